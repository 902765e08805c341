// SPDX-License-Identifier: MIT
// bench_batch: cudamem::copy_many against what a user writes without it, in the same run, on the same stream and
// memory:
//   small pieces   10,000 x 256 B pinned -> device: one stream-ordered batch against a loop of cudaMemcpyAsync, wall
//                  time from the first enqueue to the stream drained, us per batch (lower is better)
//   D2D pieces     10,000 x 4 KiB device -> device through the gather kernel against one cudaMemcpyAsync of the same
//                  total bytes, device time timed by events behind a kernel that holds the stream while the host
//                  enqueues (so the host's checks are not in it), GB/s (higher is better)
//                  and against one cudaMemcpyBatchAsync of the same pieces, where the driver has it
//   large pieces   1,000 x 64 KiB pinned -> device (the copy engines) against the loop (context) and the batch call
//   halo strips    64 strips of pitched tiles in one batch against 64 cudaMemcpy2DAsync, us per batch
//   one piece      host cost of a batch of one piece against one cudamem::copy, ns per call (lower is better)
// Every destination is poisoned before a row and checked against the source after it. Exits 77 without a device.
#include "harness.hpp"

#include <cudamem/copy_many.hpp>

#include <functional>
#include <numeric>
#include <random>

namespace {

using namespace cudamem;

struct pieces_layout {
  std::size_t count, bytes;                 // pieces of `bytes` each
  std::vector<std::size_t> dst_at, src_at;  // byte offsets; destinations dense, sources shuffled
};
pieces_layout gather_layout(std::size_t count, std::size_t bytes) {
  pieces_layout l{count, bytes, {}, {}};
  l.dst_at.resize(count);
  l.src_at.resize(count);
  for (std::size_t k = 0; k < count; ++k) l.dst_at[k] = l.src_at[k] = k * bytes;
  std::shuffle(l.src_at.begin(), l.src_at.end(), std::mt19937_64(42));  // gathered rows of a table
  return l;
}
// The destination a gather of `l` from `source` leaves.
std::vector<std::byte> gathered(const pieces_layout& l, const std::byte* source) {
  std::vector<std::byte> out(l.count * l.bytes);
  for (std::size_t k = 0; k < l.count; ++k) std::memcpy(&out[l.dst_at[k]], source + l.src_at[k], l.bytes);
  return out;
}
std::vector<std::byte> read_device(const void* p, std::size_t bytes) {
  std::vector<std::byte> out(bytes);
  check(cudaMemcpy(out.data(), p, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
  return out;
}

// Wall time of one batch, enqueue to drained, in microseconds.
template <class RawBatch, class LibBatch>
row batch_time(std::string name, const options& opt, stream_ref s, RawBatch raw_batch, LibBatch lib_batch,
               std::optional<double> target) {
  auto trial = [&](auto& batch) {
    const auto start = wall_clock::now();
    batch();
    check(s.synchronize(), "stream::synchronize");
    return seconds_between(start, wall_clock::now()) * 1e6;
  };
  auto [raw, lib] =
      interleaved(opt.warmups, opt.reps, [&] { return trial(raw_batch); }, [&] { return trial(lib_batch); });
  return {std::move(name), "us/batch", raw, lib, better::lower, target};
}

// The driver's batch call, where the runtime and the driver have it (CUDA 12.8).
bool driver_batches() {
#if CUDART_VERSION >= 12080
  int version = 0;
  return cudaDriverGetVersion(&version) == cudaSuccess && version >= 12080;
#else
  return false;
#endif
}
void raw_batch_call(std::vector<void*>& dsts, std::vector<const void*>& srcs, std::vector<std::size_t>& sizes,
                    cudaStream_t stream) {
#if CUDART_VERSION >= 12080
  cudaMemcpyAttributes attributes{};
  attributes.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  std::size_t first = 0;
#if CUDART_VERSION >= 13000
  check(cudaMemcpyBatchAsync(dsts.data(), srcs.data(), sizes.data(), sizes.size(), &attributes, &first, 1, stream),
        "cudaMemcpyBatchAsync");
#else
  std::size_t failed = 0;
  check(cudaMemcpyBatchAsync(dsts.data(), const_cast<void**>(srcs.data()), sizes.data(), sizes.size(), &attributes,
                             &first, 1, &failed, stream),
        "cudaMemcpyBatchAsync");
#endif
#else
  (void)dsts, (void)srcs, (void)sizes, (void)stream;
  fail("cudaMemcpyBatchAsync", "not in this runtime");
#endif
}

// A gather of pinned pieces into device memory: copy_many against a loop of cudaMemcpyAsync, and against one
// cudaMemcpyBatchAsync where the driver has it. Targets on the time ratio (cudamem / raw).
void pinned_rows(std::vector<row>& rows, const options& opt, stream_ref s, std::size_t count, std::size_t bytes,
                 std::optional<double> loop_target, std::optional<double> batch_call_target) {
  const pieces_layout l = gather_layout(count, bytes);
  const std::size_t total = count * bytes;
  auto host = take(pinned_buffer<std::byte>::allocate(total), "pinned_buffer::allocate");
  auto dev = take(device_buffer<std::byte>::allocate(total), "device_buffer::allocate");
  write_pattern(host.data().get(), total, count + bytes);
  std::vector<device_span<std::byte>> dsts;
  std::vector<pinned_span<const std::byte>> srcs;
  std::vector<void*> raw_dsts;
  std::vector<const void*> raw_srcs;
  std::vector<std::size_t> raw_sizes(count, bytes);
  for (std::size_t k = 0; k < count; ++k) {
    dsts.push_back(dev.view().subspan_unchecked(l.dst_at[k], bytes));
    srcs.push_back(host.view().subspan_unchecked(l.src_at[k], bytes));
    raw_dsts.push_back(dsts.back().data().get());
    raw_srcs.push_back(srcs.back().data().get());
  }
  const std::vector<std::byte> want = gathered(l, host.data().get());
  const cudaStream_t raw_stream = s.get();
  const auto verify = [&](const char* what, auto&& batch) {
    check(fill_bytes(dev, 0x5a), "fill_bytes");
    batch();
    check(s.synchronize(), "stream::synchronize");
    expect_equal(read_device(dev.data().get(), total).data(), want.data(), total, what);
  };
  const auto loop = [&] {
    for (std::size_t k = 0; k < count; ++k)
      check(cudaMemcpyAsync(raw_dsts[k], raw_srcs[k], bytes, cudaMemcpyHostToDevice, raw_stream), "cudaMemcpyAsync");
  };
  const auto lib = [&] { check(copy_many(dsts, srcs, s), "copy_many"); };
  const auto batch_call = [&] { raw_batch_call(raw_dsts, raw_srcs, raw_sizes, raw_stream); };
  verify("copy_many pinned->device", lib);
  verify("loop of cudaMemcpyAsync", loop);
  char name[96];
  std::snprintf(name, sizeof name, "%zu x %zu B pinned->device vs loop", count, bytes);
  rows.push_back(batch_time(name, opt, s, loop, lib, loop_target));
  if (!driver_batches()) {
    std::printf("(no cudaMemcpyBatchAsync in this runtime or driver: its row is left out)\n");
    return;
  }
  verify("cudaMemcpyBatchAsync", batch_call);
  std::snprintf(name, sizeof name, "%zu x %zu B pinned->device vs batch call", count, bytes);
  rows.push_back(batch_time(name, opt, s, batch_call, lib, batch_call_target));
}

// 4 KiB device pieces gathered by the kernel, against one 1D copy of as many bytes: device time only.
void device_row(std::vector<row>& rows, const options& opt, stream_ref s, const event& start, const event& stop) {
  constexpr std::size_t count = 10000, bytes = 4096, total = count * bytes, repeat = 4;
  const pieces_layout l = gather_layout(count, bytes);
  auto src = take(device_buffer<std::byte>::allocate(total), "device_buffer::allocate");
  auto dst = take(device_buffer<std::byte>::allocate(total), "device_buffer::allocate");
  std::vector<std::byte> pattern(total);
  write_pattern(pattern.data(), total, 3);
  check(copy(src, span(pattern)), "copy");
  std::vector<device_span<std::byte>> dsts;
  std::vector<device_span<const std::byte>> srcs;
  for (std::size_t k = 0; k < count; ++k) {
    dsts.push_back(dst.view().subspan_unchecked(l.dst_at[k], bytes));
    srcs.push_back(src.view().subspan_unchecked(l.src_at[k], bytes));
  }
  std::byte* const raw_dst = dst.data().get();
  const std::byte* const raw_src = src.data().get();
  const cudaStream_t raw_stream = s.get();
  auto trial = [&](auto& op) {
    hold_stream<<<1, 1, 0, raw_stream>>>(20'000'000ull);  // the host enqueues everything meanwhile
    check(cudaGetLastError(), "hold_stream");
    check(start.record(s), "event::record");
    for (std::size_t i = 0; i < repeat; ++i) op();
    check(stop.record(s), "event::record");
    check(stop.synchronize(), "event::synchronize");
    const float ms = take(event::elapsed_ms(start, stop), "event::elapsed_ms");
    return static_cast<double>(total * repeat) / (static_cast<double>(ms) * 1e-3) / 1e9;
  };
  auto raw_op = [&] {
    check(cudaMemcpyAsync(raw_dst, raw_src, total, cudaMemcpyDeviceToDevice, raw_stream), "cudaMemcpyAsync");
  };
  auto lib_op = [&] { check(copy_many(dsts, srcs, s), "copy_many"); };
  auto [raw, lib] = interleaved(opt.warmups, opt.reps, [&] { return trial(raw_op); }, [&] { return trial(lib_op); });
  rows.push_back({"10000 x 4 KiB D2D batch vs one 1D copy", "GB/s (device time)", raw, lib, better::higher, 0.8});
  check(fill_bytes(dst, 0x5a), "fill_bytes");
  lib_op();
  check(s.synchronize(), "stream::synchronize");
  expect_equal(read_device(raw_dst, total).data(), gathered(l, pattern.data()).data(), total, "copy_many D2D");
}

// 64 halo strips (4 x 4 tiles of 256 x 256 floats, the two outer rows and columns of each) from one pitched grid into
// another: one batch against 64 cudaMemcpy2DAsync, wall time per batch.
void halo_row(std::vector<row>& rows, const options& opt, stream_ref s) {
  constexpr std::size_t tile = 256, tiles = 4, side = tile * tiles, edge = 2;
  auto from = take(device_pitched_buffer<float>::allocate(side, side), "pitched_buffer::allocate");
  auto to = take(device_pitched_buffer<float>::allocate(side, side), "pitched_buffer::allocate");
  std::vector<float> pattern(side * side);
  write_pattern(reinterpret_cast<std::byte*>(pattern.data()), pattern.size() * sizeof(float), 11);
  check(copy(from, span(pattern)), "copy");
  const pitched_span<float, device> d = to.view();
  const pitched_span<const float, device> f = from.view();
  std::vector<std::pair<pitched_span<float, device>, pitched_span<const float, device>>> strips;
  for (std::size_t ty = 0; ty < tiles; ++ty)
    for (std::size_t tx = 0; tx < tiles; ++tx) {
      const std::size_t r = ty * tile, c = tx * tile, inner = tile - 2 * edge;
      const std::size_t at[4][4] = {{r + edge, c, inner, edge},  // row, column, rows, columns
                                    {r + edge, c + tile - edge, inner, edge},
                                    {r, c + edge, edge, inner},
                                    {r + tile - edge, c + edge, edge, inner}};
      for (const auto& a : at)
        strips.emplace_back(d.subspan_unchecked(a[0], a[1], a[2], a[3]), f.subspan_unchecked(a[0], a[1], a[2], a[3]));
    }
  const cudaStream_t raw_stream = s.get();
  const auto loop = [&] {
    for (const auto& [dst, src] : strips)
      check(cudaMemcpy2DAsync(dst.data().get(), dst.pitch_bytes(), src.data().get(), src.pitch_bytes(),
                              dst.width() * sizeof(float), dst.height(), cudaMemcpyDeviceToDevice, raw_stream),
            "cudaMemcpy2DAsync");
  };
  const auto lib = [&] { check(copy_many(strips, s), "copy_many"); };
  // The batch as a g++ translation unit runs it, without the kernel: the 3D batch call where the driver has it.
  const auto lib_without_kernel = [&] {
    const auto kernel = detail::copy_many_kernel;
    detail::copy_many_kernel = nullptr;
    const status done = copy_many(strips, s);
    detail::copy_many_kernel = kernel;
    check(done, "copy_many");
  };
  std::vector<std::function<void()>> batches{loop, lib, lib_without_kernel};
  std::function<void()> batch_3d;
#if CUDART_VERSION >= 12080
  std::vector<cudaMemcpy3DBatchOp> ops;
  for (const auto& [dst, src] : strips) {
    cudaMemcpy3DBatchOp op{};
    op.dst.type = op.src.type = cudaMemcpyOperandTypePointer;
    op.dst.op.ptr = {dst.data().get(), dst.pitch_bytes(), dst.height(), {}};
    op.src.op.ptr = {const_cast<float*>(src.data().get()), src.pitch_bytes(), src.height(), {}};
    op.extent = {dst.width() * sizeof(float), dst.height(), 1};
    op.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    ops.push_back(op);
  }
  if (driver_batches()) {
    batch_3d = [&] {
#if CUDART_VERSION >= 13000
      check(cudaMemcpy3DBatchAsync(ops.size(), ops.data(), 0, raw_stream), "cudaMemcpy3DBatchAsync");
#else
      std::size_t failed = 0;
      check(cudaMemcpy3DBatchAsync(ops.size(), ops.data(), &failed, 0, raw_stream), "cudaMemcpy3DBatchAsync");
#endif
    };
    batches.push_back(batch_3d);
  }
#endif
  // Every side leaves the strips equal to the source's and every other cell poisoned.
  for (const auto& batch : batches) {
    check(fill_bytes(to, 0x5a), "fill_bytes");
    batch();
    check(s.synchronize(), "stream::synchronize");
    std::vector<float> back(side * side), want(side * side);
    std::memset(want.data(), 0x5a, want.size() * sizeof(float));
    for (const auto& [dst, src] : strips) {
      const std::size_t r0 = static_cast<std::size_t>(reinterpret_cast<const char*>(dst.data().get()) -
                                                      reinterpret_cast<const char*>(d.data().get())) /
                             d.pitch_bytes();
      const std::size_t c0 = (static_cast<std::size_t>(reinterpret_cast<const char*>(dst.data().get()) -
                                                       reinterpret_cast<const char*>(d.data().get())) %
                              d.pitch_bytes()) /
                             sizeof(float);
      for (std::size_t r = r0; r < r0 + dst.height(); ++r)
        for (std::size_t c = c0; c < c0 + dst.width(); ++c) want[r * side + c] = pattern[r * side + c];
    }
    check(copy(span(back), to), "copy");
    expect_equal(reinterpret_cast<const std::byte*>(back.data()), reinterpret_cast<const std::byte*>(want.data()),
                 back.size() * sizeof(float), "64 halo strips");
  }
  rows.push_back(batch_time("64 halo strips vs 64 cudaMemcpy2DAsync", opt, s, loop, lib, 0.5));
  if (batch_3d) {
    rows.push_back(batch_time("64 halo strips vs cudaMemcpy3DBatchAsync", opt, s, batch_3d, lib, std::nullopt));
    rows.push_back(
        batch_time("64 halo strips, g++ file vs 3D batch call", opt, s, batch_3d, lib_without_kernel, std::nullopt));
  }
  rows.push_back(
      batch_time("64 halo strips, g++ file vs 64 cudaMemcpy2DAsync", opt, s, loop, lib_without_kernel, std::nullopt));
}

// Host cost of a batch of one piece against one copy of it.
void one_piece_row(std::vector<row>& rows, const options& opt, stream_ref s) {
  auto src = take(pinned_buffer<float>::allocate(1), "pinned_buffer::allocate");
  auto dst = take(device_buffer<float>::allocate(1), "device_buffer::allocate");
  const device_span<float> d = dst.view();
  const pinned_span<const float> from = src.view();
  const std::pair<device_span<float>, pinned_span<const float>> only[] = {{d, from}};
  rows.push_back(host_cost(
      "host cost: batch of one piece vs copy", opt, s, [&] { check(copy(d, from, s), "copy"); },
      [&] { check(copy_many(only, s), "copy_many"); }));
  rows.back().target = 1.1;
}

}  // namespace

int main(int argc, char** argv) {
  bench_name = "bench_batch";
  const options opt = parse_options(argc, argv);
  if (visible_devices() == 0) return 77;
  cudaDeviceProp properties{};
  check(cudaGetDeviceProperties(&properties, 0), "cudaGetDeviceProperties");
  std::printf("bench_batch: cudamem %d.%d.%d copy_many on %s; %d trials per side, medians\n", CUDAMEM_VERSION_MAJOR,
              CUDAMEM_VERSION_MINOR, CUDAMEM_VERSION_PATCH, properties.name, opt.reps);
  const auto s = take(stream::create(), "stream::create");
  const auto start = take(event::create(), "event::create");
  const auto stop = take(event::create(), "event::create");
  pin_to_current_cpu();
  std::printf("\n");
  std::vector<row> rows;
  pinned_rows(rows, opt, s, 10000, 256, 0.01, 0.1);  // >= 100x the loop, >= 10x cudaMemcpyBatchAsync
  device_row(rows, opt, s, start, stop);
  // Large pieces: the copy engines; the loop row is context, the batch call's must not be lost (>= 0.99x).
  pinned_rows(rows, opt, s, 1000, std::size_t{64} << 10, std::nullopt, 1 / 0.99);
  halo_row(rows, opt, s);  // >= 2x separate 2D copies
  one_piece_row(rows, opt, s);
  report(rows, opt, properties.name);
  return 0;
}
