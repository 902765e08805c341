// SPDX-License-Identifier: MIT
// bench_growable: growing device memory in place (growable_buffer: the driver's virtual memory management) against
// what a user does without it (allocate the new size, copy, free the old), in the same run. Prints a table (and JSON
// with --json FILE); ratio = cudamem / raw:
//   grow 1 GiB -> 8 GiB   112 steps of 64 MiB: growable_buffer::grow vs cudaMalloc + cudaMemcpy (device to device)
//                         + cudaFree of the same sizes, ms per sweep (lower is better; target <= 0.1, 10x faster)
//   read through the span a kernel reading --bytes (default 1 GiB) through a growable_buffer's span vs the same
//                         kernel through a device_buffer's, GB/s (higher is better; target >= 0.99)
// --bytes sets the read row's size; the growth sweep's sizes are fixed (--quick: 64 MiB -> 512 MiB, 4 MiB steps).
// Exits 77 when there is no CUDA device.

#include "harness.hpp"

#include <cudamem/growable.hpp>

namespace {
using namespace cudamem;

struct sweep {
  std::size_t from, to, step;
};

// ms for one sweep: from `from` bytes up to `to` in `step` steps.
double raw_sweep(const sweep& w) {
  void* old = nullptr;
  check(cudaMalloc(&old, w.from), "cudaMalloc");
  check(cudaMemset(old, 1, w.from), "cudaMemset");
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  const auto start = wall_clock::now();
  for (std::size_t size = w.from + w.step; size <= w.to; size += w.step) {
    void* grown = nullptr;
    check(cudaMalloc(&grown, size), "cudaMalloc");
    check(cudaMemcpy(grown, old, size - w.step, cudaMemcpyDeviceToDevice), "cudaMemcpy");
    check(cudaFree(old), "cudaFree");
    old = grown;
  }
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  const double ms = seconds_between(start, wall_clock::now()) * 1e3;
  check(cudaFree(old), "cudaFree");
  return ms;
}
double lib_sweep(const sweep& w) {
  auto g = take(growable_buffer<std::byte>::create(w.to), "growable_buffer::create");
  check(g.grow(w.from), "growable_buffer::grow");
  check(cudaMemset(g.data().get(), 1, w.from), "cudaMemset");
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  const auto start = wall_clock::now();
  for (std::size_t size = w.from + w.step; size <= w.to; size += w.step) check(g.grow(size), "growable_buffer::grow");
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  return seconds_between(start, wall_clock::now()) * 1e3;
}

void growth_row(std::vector<row>& rows, const options& opt, bool quick) {
  constexpr std::size_t mib = std::size_t{1} << 20;
  const sweep w = quick ? sweep{64 * mib, 512 * mib, 4 * mib} : sweep{1024 * mib, 8192 * mib, 64 * mib};
  const int reps = quick ? 3 : std::min(opt.reps, 7);  // a raw sweep copies 500.5 GiB: a few trials are plenty
  auto [raw, lib] = interleaved(1, reps, [&] { return raw_sweep(w); }, [&] { return lib_sweep(w); });
  rows.push_back({"grow " + size_text(w.from) + " -> " + size_text(w.to) + " by " + size_text(w.step), "ms/sweep", raw,
                  lib, better::lower, 0.1});
}

__global__ void read_all(device_span<const uint4> in, unsigned* sink) {
  unsigned acc = 0;
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < in.size(); i += gridDim.x * blockDim.x) {
    const uint4 v = in[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678u) *sink = acc;  // keeps the loads; practically never taken
}

void read_row(std::vector<row>& rows, const options& opt, stream_ref s) {
  const std::size_t count = opt.bytes / sizeof(uint4);
  auto plain = take(device_buffer<uint4>::allocate(count), "device_buffer::allocate");
  auto grown = take(growable_buffer<uint4>::create(count), "growable_buffer::create");
  for (std::size_t step = 1; step <= 4; ++step) check(grown.grow(count * step / 4), "growable_buffer::grow");
  auto sink = take(device_buffer<unsigned>::allocate(1), "device_buffer::allocate");
  check(cudaMemset(plain.data().get(), 3, opt.bytes), "cudaMemset");
  check(cudaMemset(grown.data().get(), 3, opt.bytes), "cudaMemset");
  int sms = 0;
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "cudaDeviceGetAttribute");
  const auto start = take(event::create(), "event::create"), stop = take(event::create(), "event::create");
  const device_span<const uint4> a = plain.view(), b = grown.view();
  rows.push_back(bandwidth(
      "kernel read " + size_text(opt.bytes) + " via span", "GB/s", opt.bytes, opt, s, start, stop,
      [&] { read_all<<<sms * 8, 512, 0, s.get()>>>(a, sink.data().get()); },
      [&] { read_all<<<sms * 8, 512, 0, s.get()>>>(b, sink.data().get()); }));
}
}  // namespace

int main(int argc, char** argv) {
  bench_name = "bench_growable";
  bool quick = false;
  for (int i = 1; i < argc; ++i) quick = quick || std::string(argv[i]) == "--quick";
  const options opt = parse_options(argc, argv);
  if (visible_devices() == 0) return 77;
  const device_id here = take(current_device(), "current_device");
  cudaDeviceProp properties{};
  check(cudaGetDeviceProperties(&properties, here.get()), "cudaGetDeviceProperties");
  std::printf("bench_growable: cudamem %d.%d.%d against allocate + copy + free\n", CUDAMEM_VERSION_MAJOR,
              CUDAMEM_VERSION_MINOR, CUDAMEM_VERSION_PATCH);
  std::printf("device %d: %s (sm_%d%d)\n", here.get(), properties.name, properties.major, properties.minor);
  std::printf("values are medians; ratio = cudamem / raw; spread = half the interquartile range\n\n");
  const auto s = take(stream::create(), "stream::create");
  pin_to_current_cpu();
  std::vector<row> rows;
  growth_row(rows, opt, quick);
  read_row(rows, opt, s);
  report(rows, opt, properties.name);
  return 0;
}
