// SPDX-License-Identifier: MIT
// bench_copy: cudamem's copies and fills against the raw CUDA runtime calls, measured in the same
// run on the same stream and the same memory. Prints a table (and JSON with --json FILE):
//   host cost  time to enqueue a 4-byte stream-ordered copy or fill, ns per call (lower is better); a context row
//              puts a few ns of unrelated host work after each raw call instead of cudamem's checks
//   bandwidth  1 GiB stream-ordered copies and fills timed with events, GB/s (higher is better)
//   pageable   synchronous copy from pageable host memory, GB/s, for context (no target)
//   sync       synchronous copies and fills (no stream) against cudaMemcpy / cudaMemset: time per
//              4-byte call (lower is better) and 1 GiB bandwidth (higher is better). Where
//              cudaMemcpy returns before the bytes have landed (pageable H2D, D2D, memset), the raw
//              side also synchronizes, since cudamem's synchronous forms complete before they
//              return; a context row shows the bare call too.
// Every row warms up first, then runs raw and cudamem trials in pairs of alternating order (A B, B A, ...) so that
// clock and thermal drift falls on both alike, and compares the medians. See bench/README.md.
// Exits 77 when there is no CUDA device.

#include "harness.hpp"

namespace {

// ---------------------------------------------------------------------------------------------
// The measurements

// Not cudamem: a few nanoseconds of unrelated host work, put between two raw enqueues in a context row to show what
// any code between calls costs in the host-cost measurement.
[[gnu::noinline]] void other_host_work() {
  for (int i = 0; i < 40; ++i) asm volatile("");
}

// a. Host cost of enqueuing a 4-byte copy or fill. dst and src are one-float spans; the raw side
// passes the same addresses and the same stream.
void host_cost_rows(std::vector<row>& rows, const options& opt, cudamem::stream_ref s) {
  using namespace cudamem;
  auto dst_owner = take(device_buffer<float>::allocate(1), "device_buffer::allocate");
  auto src_owner = take(device_buffer<float>::allocate(1), "device_buffer::allocate");
  auto pinned_owner = take(pinned_buffer<float>::allocate(1), "pinned_buffer::allocate");
  pinned_owner[0] = 1.5f;
  check(cudamem::fill_bytes(dst_owner, 0x3c), "fill_bytes");
  check(cudamem::copy(src_owner, pinned_owner), "copy");

  const device_span<float> dst = dst_owner.view();
  const device_span<float> src = src_owner.view();
  const pinned_span<float> pinned_side = pinned_owner.view();
  float* const raw_dst = dst.data().get();
  float* const raw_src = src.data().get();
  float* const raw_pinned = pinned_side.data().get();
  const cudaStream_t raw_stream = s.get();
  constexpr std::size_t bytes = sizeof(float);

  rows.push_back(host_cost(
      "host cost: copy D2D 4 B", opt, s,
      [=] { check(cudaMemcpyAsync(raw_dst, raw_src, bytes, cudaMemcpyDeviceToDevice, raw_stream), "cudaMemcpyAsync"); },
      [=] { check(cudamem::copy(dst, src, s), "cudamem::copy"); }));
  rows.push_back(host_cost(
      "host cost: copy H2D 4 B (pinned)", opt, s,
      [=] {
        check(cudaMemcpyAsync(raw_dst, raw_pinned, bytes, cudaMemcpyHostToDevice, raw_stream), "cudaMemcpyAsync");
      },
      [=] { check(cudamem::copy(dst, pinned_side, s), "cudamem::copy"); }));
  rows.push_back(host_cost(
      "host cost: copy D2H 4 B (pinned)", opt, s,
      [=] {
        check(cudaMemcpyAsync(raw_pinned, raw_src, bytes, cudaMemcpyDeviceToHost, raw_stream), "cudaMemcpyAsync");
      },
      [=] { check(cudamem::copy(pinned_side, src, s), "cudamem::copy"); }));
  rows.push_back(host_cost(
      "host cost: fill 4 B", opt, s, [=] { check(cudaMemsetAsync(raw_dst, 0, bytes, raw_stream), "cudaMemsetAsync"); },
      [=] { check(cudamem::fill_bytes(dst, 0, s), "cudamem::fill_bytes"); }));
  const auto start = wall_clock::now();
  for (int i = 0; i < 100'000; ++i) other_host_work();
  const double work_ns = seconds_between(start, wall_clock::now()) * 1e9 / 100'000;
  char name[96];
  std::snprintf(name, sizeof name, "host cost: fill 4 B, raw + %.0f ns other work", work_ns);
  row context = host_cost(
      name, opt, s, [=] { check(cudaMemsetAsync(raw_dst, 0, bytes, raw_stream), "cudaMemsetAsync"); },
      [=] {
        check(cudaMemsetAsync(raw_dst, 0, bytes, raw_stream), "cudaMemsetAsync");
        other_host_work();
      });
  context.target = std::nullopt;
  rows.push_back(std::move(context));
  check(s.synchronize(), "stream::synchronize");
}

// b. Bandwidth of large stream-ordered copies and fills, and c. the synchronous pageable copy.
void bandwidth_rows(std::vector<row>& rows, const options& opt, cudamem::stream_ref s) {
  using namespace cudamem;
  const std::size_t n = opt.bytes;
  auto host_src = take(pinned_buffer<std::byte>::allocate(n), "pinned_buffer::allocate");
  auto host_dst = take(pinned_buffer<std::byte>::allocate(n), "pinned_buffer::allocate");
  auto device_a = take(device_buffer<std::byte>::allocate(n), "device_buffer::allocate");
  auto device_b = take(device_buffer<std::byte>::allocate(n), "device_buffer::allocate");
  const auto start = take(event::create(), "event::create");
  const auto stop = take(event::create(), "event::create");

  // Touch everything once: the sources get a pattern, the destinations something else.
  write_pattern(host_src.data().get(), n, 1);
  std::memset(host_dst.data().get(), 0xee, n);
  check(cudamem::copy(device_a, host_src), "copy");
  check(cudamem::fill_bytes(device_b, 0x11), "fill_bytes");

  std::byte* const raw_host_src = host_src.data().get();
  std::byte* const raw_host_dst = host_dst.data().get();
  std::byte* const raw_a = device_a.data().get();
  std::byte* const raw_b = device_b.data().get();
  const cudaStream_t raw_stream = s.get();
  const pinned_span<std::byte> host_src_view = host_src.view();
  const pinned_span<std::byte> host_dst_view = host_dst.view();
  const device_span<std::byte> a = device_a.view();
  const device_span<std::byte> b = device_b.view();
  const std::string size = size_text(n);

  rows.push_back(bandwidth(
      "copy H2D " + size + " (pinned)", "GB/s", n, opt, s, start, stop,
      [=] { check(cudaMemcpyAsync(raw_a, raw_host_src, n, cudaMemcpyHostToDevice, raw_stream), "cudaMemcpyAsync"); },
      [=] { check(cudamem::copy(a, host_src_view, s), "cudamem::copy"); }));
  rows.push_back(bandwidth(
      "copy D2H " + size + " (pinned)", "GB/s", n, opt, s, start, stop,
      [=] { check(cudaMemcpyAsync(raw_host_dst, raw_a, n, cudaMemcpyDeviceToHost, raw_stream), "cudaMemcpyAsync"); },
      [=] { check(cudamem::copy(host_dst_view, a, s), "cudamem::copy"); }));
  expect_equal(raw_host_dst, raw_host_src, n, "H2D then D2H");

  rows.push_back(bandwidth(
      "copy D2D " + size, "GB/s (bytes copied)", n, opt, s, start, stop,
      [=] { check(cudaMemcpyAsync(raw_b, raw_a, n, cudaMemcpyDeviceToDevice, raw_stream), "cudaMemcpyAsync"); },
      [=] { check(cudamem::copy(b, a, s), "cudamem::copy"); }));
  std::memset(raw_host_dst, 0xee, n);
  check(cudamem::copy(host_dst, device_b), "copy");
  expect_equal(raw_host_dst, raw_host_src, n, "D2D");

  constexpr unsigned char fill_value = 0x5a;
  rows.push_back(bandwidth(
      "fill " + size + " (memset)", "GB/s (bytes written)", n, opt, s, start, stop,
      [=] { check(cudaMemsetAsync(raw_b, fill_value, n, raw_stream), "cudaMemsetAsync"); },
      [=] { check(cudamem::fill_bytes(b, fill_value, s), "cudamem::fill_bytes"); }));
  check(s.synchronize(), "stream::synchronize");

  // c. Pageable host memory, synchronous copy: cudaMemcpy against cudamem::copy without a stream.
  const std::size_t pn = std::min(opt.pageable_bytes, n);
  auto pageable = take(host_buffer<std::byte>::allocate(pn), "host_buffer::allocate");
  write_pattern(pageable.data().get(), pn, 2);
  const std::byte* const raw_pageable = pageable.data().get();
  const host_span<std::byte> pageable_view = pageable.view();
  const device_span<std::byte> a_first = take(a.first(pn), "span::first");
  rows.push_back(synchronous_bandwidth(
      "copy H2D " + size_text(pn) + " (pageable, sync)", "GB/s", pn, opt,
      [=] { check(cudaMemcpy(raw_a, raw_pageable, pn, cudaMemcpyHostToDevice), "cudaMemcpy"); },
      [=] { check(cudamem::copy(a_first, pageable_view), "cudamem::copy"); }));
  check(cudamem::copy(take(host_dst_view.first(pn), "span::first"), a_first), "copy");
  expect_equal(raw_host_dst, raw_pageable, pn, "pageable H2D");
}

// d. Synchronous copies and fills: what a user writes without a stream, cudaMemcpy and cudaMemset,
// against cudamem's synchronous forms, per 4-byte call and at full size. `returns_early`: the
// direction in which cudaMemcpy may return before the bytes have landed, so the raw side also
// synchronizes the legacy stream (cudamem's synchronous forms complete before they return).
template <class Dst, class Src>
void sync_copy_rows(std::vector<row>& rows, const options& opt, const std::string& label, Dst dst, Src src,
                    cudaMemcpyKind kind, bool returns_early) {
  const auto dst4 = take(dst.first(4), "span::first");
  const auto src4 = take(src.first(4), "span::first");
  auto* const to = dst.data().get();
  const auto* const from = src.data().get();
  const std::size_t n = dst.size();
  const auto raw = [=](std::size_t bytes) {
    check(cudaMemcpy(to, from, bytes, kind), "cudaMemcpy");
    if (returns_early) check(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize");
  };
  if (returns_early)
    rows.push_back(sync_latency(
        "sync copy " + label + " 4 B, bare cudaMemcpy", opt, std::nullopt,
        [=] { check(cudaMemcpy(to, from, 4, kind), "cudaMemcpy"); },
        [=] { check(cudamem::copy(dst4, src4), "copy"); }));
  rows.push_back(sync_latency(
      "sync copy " + label + " 4 B", opt, 1.05, [=] { raw(4); }, [=] { check(cudamem::copy(dst4, src4), "copy"); }));
  rows.push_back(synchronous_bandwidth(
      "sync copy " + label + " " + size_text(n), "GB/s", n, opt, [=] { raw(n); },
      [=] { check(cudamem::copy(dst, src), "copy"); }, 0.99));
}

void synchronous_rows(std::vector<row>& rows, const options& opt) {
  using namespace cudamem;
  const std::size_t n = opt.bytes;
  auto pageable = take(host_buffer<std::byte>::allocate(n), "host_buffer::allocate");
  auto pinned_side = take(pinned_buffer<std::byte>::allocate(n), "pinned_buffer::allocate");
  auto device_a = take(device_buffer<std::byte>::allocate(n), "device_buffer::allocate");
  auto device_b = take(device_buffer<std::byte>::allocate(n), "device_buffer::allocate");
  write_pattern(pageable.data().get(), n, 3);
  std::memset(pinned_side.data().get(), 0x44, n);
  check(cudamem::copy(device_a, pageable), "copy");
  check(cudamem::fill_bytes(device_b, 0x22), "fill_bytes");

  sync_copy_rows(rows, opt, "D2H (pageable)", pageable.view(), device_a.view(), cudaMemcpyDeviceToHost, false);
  sync_copy_rows(rows, opt, "D2H (pinned)", pinned_side.view(), device_a.view(), cudaMemcpyDeviceToHost, false);
  expect_equal(pinned_side.data().get(), pageable.data().get(), n, "synchronous D2H");
  sync_copy_rows(rows, opt, "H2D (pageable)", device_b.view(), pageable.view(), cudaMemcpyHostToDevice, true);
  sync_copy_rows(rows, opt, "H2D (pinned)", device_b.view(), pinned_side.view(), cudaMemcpyHostToDevice, false);
  std::memset(pinned_side.data().get(), 0x55, n);
  check(cudamem::copy(pinned_side, device_b), "copy");
  expect_equal(pinned_side.data().get(), pageable.data().get(), n, "synchronous H2D");
  check(cudamem::fill_bytes(device_b, 0x22), "fill_bytes");
  sync_copy_rows(rows, opt, "D2D", device_b.view(), device_a.view(), cudaMemcpyDeviceToDevice, true);
  std::memset(pinned_side.data().get(), 0x55, n);
  check(cudamem::copy(pinned_side, device_b), "copy");
  expect_equal(pinned_side.data().get(), pageable.data().get(), n, "synchronous D2D");

  std::byte* const raw_b = device_b.data().get();
  const device_span<std::byte> b = device_b.view();
  const device_span<std::byte> b4 = take(b.first(4), "span::first");
  const auto raw_fill = [=](std::size_t bytes) {
    check(cudaMemset(raw_b, 0x33, bytes), "cudaMemset");
    check(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize");
  };
  rows.push_back(sync_latency(
      "sync fill 4 B", opt, 1.05, [=] { raw_fill(4); }, [=] { check(cudamem::fill_bytes(b4, 0x33), "fill_bytes"); }));
  rows.push_back(synchronous_bandwidth(
      "sync fill " + size_text(n), "GB/s (bytes written)", n, opt, [=] { raw_fill(n); },
      [=] { check(cudamem::fill_bytes(b, 0x33), "fill_bytes"); }, 0.99));
}
}  // namespace

int main(int argc, char** argv) {
  bench_name = "bench_copy";
  const options opt = parse_options(argc, argv);

  // No device (or no driver): skipped, not failed, as the tests do.
  if (visible_devices() == 0) return 77;

  const cudamem::device_id here = take(cudamem::current_device(), "current_device");
  cudaDeviceProp properties{};
  check(cudaGetDeviceProperties(&properties, here.get()), "cudaGetDeviceProperties");
  int driver = 0, runtime = 0;
  check(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
  check(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
  std::printf("bench_copy: cudamem %d.%d.%d against the CUDA runtime\n", CUDAMEM_VERSION_MAJOR, CUDAMEM_VERSION_MINOR,
              CUDAMEM_VERSION_PATCH);
  std::printf("device %d: %s (sm_%d%d), driver %d, runtime %d\n", here.get(), properties.name, properties.major,
              properties.minor, driver, runtime);
  std::printf("bandwidth: %s, %d trials per side; host cost: %d batches of %d calls per side; %d warm-ups\n",
              size_text(opt.bytes).c_str(), opt.reps, opt.batches, opt.calls, opt.warmups);
  std::printf("values are medians; ratio = cudamem / raw; spread = half the interquartile range\n\n");

  // One non-blocking stream for every stream-ordered row, raw and cudamem alike.
  const auto stream = take(cudamem::stream::create(), "stream::create");
  pin_to_current_cpu();  // the benchmark starts no thread of its own after this
  std::vector<row> rows;
  host_cost_rows(rows, opt, stream);
  bandwidth_rows(rows, opt, stream);
  synchronous_rows(rows, opt);

  report(rows, opt, properties.name);
  return 0;
}
