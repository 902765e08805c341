// SPDX-License-Identifier: MIT
// bench_managed: a kernel reading managed memory against the same kernel reading device memory, in the same run.
// Prints a table (and JSON with --json FILE); ratio = cudamem / raw, both in GB/s (higher is better):
//   after prefetch     the managed buffer prefetched to the kernel's device (prefetch, untimed) vs cudaMalloc'd
//                      memory (target >= 0.95)
//   without prefetch   the managed buffer's pages on the host before each trial (prefetch to the host, untimed),
//                      so the kernel migrates them on fault (context: no target)
//   prefetch_many      16 views of --bytes / 16 to the device in one batch vs 16 prefetch calls, host ns per view
//                      (context; lower is better)
// Size: --bytes (default 1 GiB). Exits 77 when there is no CUDA device.

#include "harness.hpp"

#include <cudamem/managed.hpp>

namespace {
using namespace cudamem;

__global__ void read_all(span<const uint4, managed> in, unsigned* sink) {
  unsigned acc = 0;
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < in.size(); i += gridDim.x * blockDim.x) {
    const uint4 v = in[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678u) *sink = acc;  // keeps the loads; practically never taken
}
__global__ void read_all(device_span<const uint4> in, unsigned* sink) {
  unsigned acc = 0;
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < in.size(); i += gridDim.x * blockDim.x) {
    const uint4 v = in[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678u) *sink = acc;
}

struct setup {
  device_id here;
  int blocks;
  stream_ref s;
  const event& start;
  const event& stop;
};

// GB/s of one enqueued kernel, timed by events; `before` runs untimed first (and is waited for).
template <class Before, class Op>
double timed(const setup& at, std::size_t bytes, Before before, Op op) {
  before();
  check(at.s.synchronize(), "stream::synchronize");
  check(at.start.record(at.s), "event::record");
  op();
  check(at.stop.record(at.s), "event::record");
  check(at.stop.synchronize(), "event::synchronize");
  const float ms = take(event::elapsed_ms(at.start, at.stop), "event::elapsed_ms");
  return static_cast<double>(bytes) / (static_cast<double>(ms) * 1e-3) / 1e9;
}

void read_rows(std::vector<row>& rows, const options& opt, const setup& at) {
  const std::size_t count = opt.bytes / sizeof(uint4);
  auto plain = take(device_buffer<uint4>::allocate(count), "device_buffer::allocate");
  auto managed_memory = take(managed_buffer<uint4>::allocate(count), "managed_buffer::allocate");
  auto sink = take(device_buffer<unsigned>::allocate(1), "device_buffer::allocate");
  check(cudaMemset(plain.data().get(), 3, opt.bytes), "cudaMemset");
  for (uint4& v : managed_memory) v = uint4{3, 3, 3, 3};  // first touched on the host
  const device_span<const uint4> device_view = plain.view();
  const span<const uint4, managed> managed_view = managed_memory.view();
  auto on_device = [&] { read_all<<<at.blocks, 512, 0, at.s.get()>>>(device_view, sink.data().get()); };
  auto on_managed = [&] { read_all<<<at.blocks, 512, 0, at.s.get()>>>(managed_view, sink.data().get()); };
  auto nothing = [] {};
  auto to_device = [&] { check(prefetch(managed_view, memory_location::device(at.here), at.s), "prefetch"); };
  auto to_host = [&] { check(prefetch(managed_view, memory_location::host(), at.s), "prefetch"); };
  const std::string size = size_text(opt.bytes);
  auto [raw, lib] = interleaved(
      opt.warmups, opt.reps, [&] { return timed(at, opt.bytes, nothing, on_device); },
      [&] { return timed(at, opt.bytes, to_device, on_managed); });
  rows.push_back({"kernel read " + size + ", managed after prefetch", "GB/s", raw, lib, better::higher, 0.95});
  const int fault_reps = std::min(opt.reps, 5);  // each trial migrates the whole buffer twice
  auto [raw2, lib2] = interleaved(
      1, fault_reps, [&] { return timed(at, opt.bytes, nothing, on_device); },
      [&] { return timed(at, opt.bytes, to_host, on_managed); });
  rows.push_back({"kernel read " + size + ", managed, no prefetch", "GB/s", raw2, lib2, better::higher, std::nullopt});
}

void batch_row(std::vector<row>& rows, const options& opt, const setup& at) {
  constexpr std::size_t views = 16;
  const std::size_t count = opt.bytes / sizeof(uint4) / views;
  std::vector<managed_buffer<uint4>> buffers;
  std::vector<span<uint4, managed>> spans;
  for (std::size_t i = 0; i < views; ++i) buffers.push_back(take(managed_buffer<uint4>::allocate(count), "allocate"));
  for (auto& b : buffers) spans.push_back(b.view());
  auto host_ns = [&](auto&& enqueue) {
    for (auto& v : spans) check(prefetch(v, memory_location::host(), at.s), "prefetch");
    check(at.s.synchronize(), "stream::synchronize");
    const auto start = wall_clock::now();
    enqueue();
    const double ns = seconds_between(start, wall_clock::now()) * 1e9 / views;
    check(at.s.synchronize(), "stream::synchronize");
    return ns;
  };
  const memory_location to = memory_location::device(at.here);
  auto [raw, lib] = interleaved(
      1, std::min(opt.reps, 9),
      [&] {
        return host_ns([&] {
          for (auto& v : spans) check(prefetch(v, to, at.s), "prefetch");
        });
      },
      [&] { return host_ns([&] { check(prefetch_many(spans.data(), spans.size(), to, at.s), "prefetch_many"); }); });
  rows.push_back({"prefetch_many 16 views vs a loop", "ns/view", raw, lib, better::lower, std::nullopt});
}
}  // namespace

int main(int argc, char** argv) {
  bench_name = "bench_managed";
  const options opt = parse_options(argc, argv);
  if (visible_devices() == 0) return 77;
  const device_id here = take(current_device(), "current_device");
  cudaDeviceProp properties{};
  check(cudaGetDeviceProperties(&properties, here.get()), "cudaGetDeviceProperties");
  int concurrent = 0;
  check(cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, here.get()), "cudaDeviceGetAttribute");
  std::printf("bench_managed: cudamem %d.%d.%d, managed memory against device memory\n", CUDAMEM_VERSION_MAJOR,
              CUDAMEM_VERSION_MINOR, CUDAMEM_VERSION_PATCH);
  std::printf("device %d: %s (sm_%d%d), concurrent managed access %d; %s, %d trials per side\n", here.get(),
              properties.name, properties.major, properties.minor, concurrent, size_text(opt.bytes).c_str(), opt.reps);
  if (concurrent == 0) {
    std::fprintf(stderr, "bench_managed: the device cannot prefetch managed memory (no concurrent managed access)\n");
    return 77;
  }
  std::printf("values are medians; ratio = cudamem / raw; spread = half the interquartile range\n\n");
  const auto s = take(stream::create(), "stream::create");
  const auto start = take(event::create(), "event::create"), stop = take(event::create(), "event::create");
  pin_to_current_cpu();
  const setup at{here, properties.multiProcessorCount * 8, s, start, stop};
  std::vector<row> rows;
  read_rows(rows, opt, at);
  batch_row(rows, opt, at);
  report(rows, opt, properties.name);
  return 0;
}
