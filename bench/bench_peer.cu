// SPDX-License-Identifier: MIT
// bench_peer: two GPUs. The cost of a peer_access guard taken and dropped on a pair another guard already holds
// (an absolute target: 2 us); cudamem's peer copies against cudaMemcpyPeerAsync / cudaMemcpy3DPeerAsync, 1D and
// 2D, without and with peer access (GB/s, same stream and memory, timed with events); and, where NCCL is found, an
// all-reduce over cudamem buffers against one over raw pointers on both GPUs of this process (ncclCommInitAll,
// timed on the host to completion). Exits 77 with fewer than two GPUs.
#include "harness.hpp"

#include <cudamem/peer.hpp>
#if defined(CUDAMEM_BENCH_NCCL)
#include <cudamem/interop/nccl.hpp>
#endif

namespace {

using namespace cudamem;
const device_id d0(0), d1(1);

// Taking and dropping a guard on a held pair, in ns: the median of `batches` batches of `calls`.
double guard_ns(const options& opt) {
  auto held = take(peer_access::enable(d1, d0), "peer_access::enable");
  std::vector<double> batches;
  for (int b = 0; b < opt.batches; ++b) {
    const auto start = wall_clock::now();
    for (int i = 0; i < opt.calls; ++i) {
      auto guard = peer_access::enable(d1, d0);
      if (!guard) fail("peer_access::enable", guard.error().message());
    }
    batches.push_back(seconds_between(start, wall_clock::now()) * 1e9 / opt.calls);
  }
  return summarize(std::move(batches)).median;
}

// 1D and 2D copies of `bytes` from device 0 to device 1 on `s` (device 0's), cudamem against the raw call.
void copy_rows(std::vector<row>& rows, const options& opt, const char* access, stream_ref s, const event& start,
               const event& stop) {
  const std::size_t bytes = opt.bytes;
  auto src = take(device_buffer<std::byte>::allocate(bytes, d0), "allocate");
  auto dst = take(device_buffer<std::byte>::allocate(bytes, d1), "allocate");
  std::vector<std::byte> pattern(bytes), back(bytes);
  write_pattern(pattern.data(), bytes, 42);
  check(copy(src, span(pattern)), "copy");
  std::byte* const to = dst.data().get();
  const std::byte* const from = src.data().get();
  const cudaStream_t raw = s.get();
  const std::string suffix = std::string(", ") + access;
  rows.push_back(bandwidth(
      "peer D2D 1D " + size_text(bytes) + suffix, "GB/s", bytes, opt, s, start, stop,
      [=] { check(cudaMemcpyPeerAsync(to, 1, from, 0, bytes, raw), "cudaMemcpyPeerAsync"); },
      [&] { check(copy(dst, src, s), "copy"); }));
  rows.back().target = 0.98;
  check(s.synchronize(), "synchronize");
  check(copy(span(back), dst), "copy");
  expect_equal(back.data(), pattern.data(), bytes, "peer copy");

  // 2D: rows of 64 KiB in a pitch 512 bytes wider, as many as fit in `bytes`.
  const std::size_t row_bytes = std::size_t{64} << 10, pitch = row_bytes + 512, height = bytes / pitch;
  const detail::operand d{to, row_bytes, height, pitch, d1, detail::kind_id::device};
  const detail::operand sr{from, row_bytes, height, pitch, d0, detail::kind_id::device};
  const cudaMemcpy3DPeerParms parms{nullptr,
                                    {},
                                    {const_cast<std::byte*>(from), pitch, row_bytes, height},
                                    0,
                                    nullptr,
                                    {},
                                    {to, pitch, row_bytes, height},
                                    1,
                                    {row_bytes, height, 1}};
  auto copy2d = [&] {
    detail::plan p;
    check(detail::plan_copy(p, d, sr, 1, cudaMemcpyDeviceToDevice, "copy"), "plan_copy");
    check(detail::run_async(p, s, "copy"), "copy");
  };
  rows.push_back(bandwidth(
      "peer D2D 2D " + std::to_string(height) + " x 64 KiB" + suffix, "GB/s", row_bytes * height, opt, s, start, stop,
      [&] { check(cudaMemcpy3DPeerAsync(&parms, raw), "cudaMemcpy3DPeerAsync"); }, copy2d));
  rows.back().target = 0.98;
}

#if defined(CUDAMEM_BENCH_NCCL)
void check(ncclResult_t code, const char* what) {
  if (code != ncclSuccess) fail(what, ncclGetErrorString(code));
}

// A sum all-reduce of `opt.bytes` of floats per GPU, over both GPUs of this process, to completion.
void nccl_rows(std::vector<row>& rows, const options& opt) {
  const device_id devices[2] = {d0, d1};
  nccl::communicator comms[2];
  check(nccl::communicator::init_all(devices, comms), "communicator::init_all");
  const std::size_t count = opt.bytes / sizeof(float);
  std::vector<stream> streams;
  std::vector<device_buffer<float>> data;
  for (device_id d : devices) {
    streams.push_back(take(stream::create(d), "stream::create"));
    data.push_back(take(device_buffer<float>::allocate(count, d), "allocate"));
    check(fill_bytes(data.back(), 0), "fill_bytes");
  }
  auto wait_all = [&] {
    for (auto& s : streams) check(s.synchronize(), "synchronize");
  };
  auto raw = [&] {
    check(ncclGroupStart(), "ncclGroupStart");
    for (int r = 0; r < 2; ++r)
      check(ncclAllReduce(data[r].data().get(), data[r].data().get(), count, ncclFloat32, ncclSum, comms[r].get(),
                          streams[r].get()),
            "ncclAllReduce");
    check(ncclGroupEnd(), "ncclGroupEnd");
    wait_all();
  };
  auto lib = [&] {
    auto group = take(nccl::group::start(), "group::start");
    for (int r = 0; r < 2; ++r)
      check(nccl::all_reduce(comms[r], data[r], nccl::reduce_op::sum, streams[r]), "all_reduce");
    check(group.end(), "group::end");
    wait_all();
  };
  rows.push_back(
      synchronous_bandwidth("NCCL all-reduce 2 GPUs " + size_text(opt.bytes), "GB/s", opt.bytes, opt, raw, lib, 0.99));
}
#endif
}  // namespace

int main(int argc, char** argv) {
  bench_name = "bench_peer";
  const options opt = parse_options(argc, argv);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < 2) {
    std::fprintf(stderr, "bench_peer: needs two CUDA devices, found %d\n", devices);
    return 77;
  }
  if (!take(can_access_peer(d0, d1), "can_access_peer") || !take(can_access_peer(d1, d0), "can_access_peer")) {
    std::fprintf(stderr, "bench_peer: devices 0 and 1 cannot peer\n");
    return 77;
  }
  cudaDeviceProp properties{};
  check(cudaGetDeviceProperties(&properties, 0), "cudaGetDeviceProperties");
  std::printf("bench_peer: cudamem %d.%d.%d, devices 0 and 1: %s\n", CUDAMEM_VERSION_MAJOR, CUDAMEM_VERSION_MINOR,
              CUDAMEM_VERSION_PATCH, properties.name);
  std::printf("values are medians; ratio = cudamem / raw; spread = half the interquartile range\n\n");

  check(set_current_device(d0), "set_current_device");
  const auto s = take(stream::create(d0), "stream::create");
  const auto start = take(event::create(d0), "event::create");
  const auto stop = take(event::create(d0), "event::create");
  std::vector<row> rows;
  copy_rows(rows, opt, "no peer access", s, start, stop);
  {
    auto both = take(enable_both(d0, d1), "enable_both");
    copy_rows(rows, opt, "peer access", s, start, stop);
  }
#if defined(CUDAMEM_BENCH_NCCL)
  nccl_rows(rows, opt);
#else
  std::printf("NCCL not found at build time: no all-reduce row\n");
#endif
  const double guard = guard_ns(opt);

  print_table(rows);
  std::printf("\n");
  print_summary(rows);
  std::printf("peer_access guard on a held pair: %.0f ns per take and drop (target <= 2000 ns): %s\n", guard,
              guard <= 2000 ? "PASS" : "FAIL");
  if (opt.json_path != nullptr) {
    write_json(opt.json_path, rows, properties.name);
    std::printf("wrote %s\n", opt.json_path);
  }
  return 0;
}
