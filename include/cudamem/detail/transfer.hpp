// SPDX-License-Identifier: MIT
// cudamem: the untyped engine behind every copy and fill, 1D and 2D (docs/decisions.md: one transfer engine). Internal.
#pragma once

#include <cudamem/detail/arith.hpp>
#include <cudamem/detail/capture.hpp>
#include <cudamem/kind.hpp>
#include <cudamem/stream.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <utility>

namespace cudamem::detail {

/// One side of a transfer, untyped: `height` rows of `width` elements, `pitch` bytes apart; host and pinned: host().
/// Pitch 0 with one row is a 1D span (contiguous, no pitch); any other pitch must hold a row, also for one row.
struct operand {
  const void* addr = nullptr;
  std::size_t width = 0, height = 1, pitch = 0;
  device_id device = device_id::host();
  kind_id kind = kind_id::host;
};
/// A checked operand in bytes; footprint: from the first byte to one past the last. No defaults (docs/performance.md).
struct region {
  void* addr;
  std::size_t row_bytes, rows, pitch, footprint;
  device_id device;
  kind_id kind;

  [[nodiscard]] bool empty() const noexcept { return footprint == 0; }
  [[nodiscard]] bool contiguous() const noexcept { return rows == 1 || pitch == row_bytes; }
  [[nodiscard]] bool on_device() const noexcept {
    return (kind == kind_id::device || kind == kind_id::managed) && !device.is_host();
  }
};
/// Checks operand `role` into `r`, member by member (a returned region costs store-to-load stalls): sizes, null, pitch.
[[gnu::always_inline]] inline status check_operand(const operand& o, std::size_t elem_size, const char* role,
                                                   const char* api, region& r) noexcept {
  auto row_bytes = bytes_of(o.width, elem_size, api);
  if (!row_bytes) return row_bytes.error();
  r.addr = const_cast<void*>(o.addr);
  r.row_bytes = *row_bytes;
  r.rows = o.height;
  r.pitch = o.height > 1 ? o.pitch : *row_bytes;
  r.footprint = 0;
  r.device = o.device;
  r.kind = o.kind;
  if (r.row_bytes == 0 || r.rows == 0) return r.row_bytes = r.rows = r.pitch = 0, status();
  if (r.addr == nullptr && r.rows == 1)
    return error(errc::invalid_argument, api, "%s is null with %zu elements", role, o.width);
  if (r.addr == nullptr)
    return error(errc::invalid_argument, api, "%s is null with %zu x %zu elements", role, o.width, o.height);
  if (o.pitch < r.row_bytes && (r.rows > 1 || o.pitch != 0))  // folds away for 1D spans (one row, pitch 0)
    return error(errc::invalid_argument, api, "%s pitch (%zu bytes) is less than its row (%zu bytes)", role, o.pitch,
                 r.row_bytes);
  std::size_t end = 0;
  if (__builtin_mul_overflow(r.pitch, r.rows - 1, &r.footprint) ||
      __builtin_add_overflow(r.footprint, r.row_bytes, &r.footprint) ||
      __builtin_add_overflow(reinterpret_cast<std::uintptr_t>(r.addr), r.footprint, &end))
    return error(errc::size_overflow, api, "%s reaches past the end of the address space", role);
  return {};
}

/// A checked transfer: a copy of src into dst, or (fill) every byte of dst set to value.
struct plan {
  region dst, src;
  cudaMemcpyKind direction = cudaMemcpyDefault;
  bool fill = false;
  unsigned char value = 0;

  [[nodiscard]] bool flat() const noexcept { return dst.contiguous() && (fill || src.contiguous()); }
  [[nodiscard]] bool pageable() const noexcept {
    return dst.kind == kind_id::host && (fill || src.kind == kind_id::host);
  }
  [[nodiscard]] bool peer() const noexcept {
    return !fill && dst.kind == kind_id::device && src.kind == kind_id::device && dst.device != src.device;
  }
  /// The operand whose device runs the transfer: the first on a device, else none (the current device runs it).
  [[nodiscard]] const region* home() const noexcept {
    return dst.on_device() ? &dst : !fill && src.on_device() ? &src : nullptr;
  }
};
/// A 2D transfer may not use a pitch beyond cudaDevAttrMaxPitch, which the driver does not check.
inline status check_pitch_limits(const plan& p, const char* api) noexcept {
  auto limit = (p.home() != nullptr ? result<device_id>(p.home()->device) : current_device()).and_then(max_pitch);
  if (!limit) return limit.error().with_api(api);
  for (const region* r : {&p.dst, p.fill ? nullptr : &p.src})
    if (r != nullptr && !r->contiguous() && r->pitch > *limit)
      return error(errc::invalid_argument, api, "%s pitch (%zu bytes) exceeds the device's maximum (%zu bytes)",
                   r == &p.dst ? "dst" : "src", r->pitch, *limit);
  return {};
}
__extension__ typedef unsigned __int128 wide_uint;  // sums and products of two 64-bit values, exactly
__extension__ typedef __int128 wide_int;
// The sum over k in [0, n) of floor((a k + b) / m), modulo 2^128 (a difference of two such sums below 2^128 is exact),
// in O(log m) steps of Euclid's algorithm; n, m, a below 2^64, m > 0.
inline wide_uint floor_sum(wide_uint n, wide_uint m, wide_uint a, wide_uint b) noexcept {
  wide_uint sum = 0;
  for (;;) {
    if (a >= m) sum += (n % 2 == 0 ? n / 2 * (n - 1) : (n - 1) / 2 * n) * (a / m), a %= m;
    if (b >= m) sum += n * (b / m), b %= m;
    const wide_uint top = a * n + b;  // below m (n + 1): no wrap
    if (top < m) return sum;
    n = top / m;
    b = top % m;
    std::swap(m, a);
  }
}
// Whether a row of dst (`rows` rows of `width` bytes from `to`, `dpitch` apart) shares a byte with one of src (from
// `from`, `spitch` apart), pitches at least `width`. With c(i) = to + i dpitch + width - 1 - from, src row j meets dst
// row i when c(i) - (2 width - 2) <= j spitch <= c(i); only j = floor(c(i) / spitch) can, and for the rows i where
// that j is a row of src, it does when c(i) mod spitch <= 2 width - 2: counted with two floor sums, O(log spitch).
inline bool rows_meet(std::uintptr_t to, std::size_t dpitch, std::uintptr_t from, std::size_t spitch, std::size_t width,
                      std::size_t rows) noexcept {
  const wide_int c0 = wide_int{to} - wide_int{from} + wide_int{width} - 1, step = dpitch;
  const wide_uint reach = 2 * wide_uint{width} - 2;
  const auto first_reaching = [&](wide_int at) {  // the first dst row i with c(i) >= at
    return at <= c0 ? wide_uint{0} : static_cast<wide_uint>((at - c0 + step - 1) / step);
  };
  const wide_uint low = first_reaching(0), past = first_reaching(wide_int{rows} * spitch);
  const wide_uint high = past < rows ? past : wide_uint{rows};
  // Row `high`, if any, would meet src's rows past the last: only the last can be in reach.
  if (high < rows && c0 + static_cast<wide_int>(high) * step - static_cast<wide_int>(reach) <=
                         static_cast<wide_int>(rows - 1) * spitch)
    return true;
  if (low >= high) return false;
  const wide_uint n = high - low, m = spitch;
  if (reach >= m - 1) return true;  // every remainder is in reach
  const wide_uint c = static_cast<wide_uint>(c0 + static_cast<wide_int>(low) * step) % m;
  // floor((x + m - 1 - reach) / m) - floor(x / m) is 1 where x mod m > reach, else 0.
  const wide_uint out_of_reach = floor_sum(n, m, dpitch, c + m - 1 - reach) - floor_sum(n, m, dpitch, c);
  return out_of_reach < n;
}
// The exact overlap test of two operands of `rows` > 1 rows of `row_bytes` each, whose footprints intersect: whether
// a row of one shares a byte with a row of the other. Equal pitches: rows are intervals modulo the pitch, O(1).
// Unequal pitches: rows_meet, O(log pitch) whatever the height (docs/copies.md).
[[gnu::noinline]] inline status check_rows_disjoint(const region& d, const region& s, const char* api) noexcept {
  const std::uintptr_t to = reinterpret_cast<std::uintptr_t>(d.addr), from = reinterpret_cast<std::uintptr_t>(s.addr);
  const std::size_t width = d.row_bytes, rows = d.rows;
  bool shared = false;
  if (d.pitch == s.pitch) {
    // Row k of the earlier operand starts `distance - k * pitch` before row 0 of the later one; only the two k nearest
    // to distance / pitch can bring them within a row (width <= pitch).
    const std::size_t pitch = d.pitch, distance = to < from ? from - to : to - from;
    const std::size_t whole = distance / pitch, rest = distance % pitch;
    shared = (rest < width && whole < rows) || (pitch - rest < width && whole < rows - 1);
  } else {
    shared = rows_meet(to, d.pitch, from, s.pitch, width, rows);
  }
  return shared ? error(errc::overlap, api, "source and destination overlap (rows of each share bytes)") : status();
}
// plan_copy for operands of equal heights.
[[gnu::always_inline]] inline status plan_shaped(plan& p, const operand& dst, const operand& src, std::size_t elem_size,
                                                 cudaMemcpyKind direction, const char* api) noexcept {
  if (dst.width != src.width)
    return dst.height == 1
               ? error(errc::extents_mismatch, api, "extents differ (dst %zu, src %zu)", dst.width, src.width)
               : error(errc::extents_mismatch, api, "extents differ (dst %zu x %zu, src %zu x %zu)", dst.width,
                       dst.height, src.width, src.height);
  p.direction = direction;
  p.fill = false;
  CUDAMEM_TRY(check_operand(dst, elem_size, "dst", api, p.dst));
  CUDAMEM_TRY(check_operand(src, elem_size, "src", api, p.src));
  if (p.dst.empty()) return {};
  const auto to = reinterpret_cast<std::uintptr_t>(p.dst.addr), from = reinterpret_cast<std::uintptr_t>(p.src.addr);
  // Intersecting footprints: for one row (always a 1D copy) they are the rows; for more, the rows decide.
  if (to < from + p.src.footprint && from < to + p.dst.footprint) [[unlikely]] {
    if (p.dst.rows == 1) return error(errc::overlap, api, "source and destination overlap");
    CUDAMEM_TRY(check_rows_disjoint(p.dst, p.src, api));
  }
  // One row is flat: known at compile time for 1D views, where the pitch check then folds away.
  return dst.height == 1 || p.flat() || p.pageable() ? status() : check_pitch_limits(p, api);
}
// plan_copy of a 1D operand against a 2D one: the 1D one takes the 2D one's shape when it has as many elements.
[[gnu::noinline]] inline status plan_reshaped(plan& p, const operand& dst, const operand& src, std::size_t elem_size,
                                              cudaMemcpyKind direction, const char* api) noexcept {
  operand d = dst, s = src;
  for (auto [flat, shaped] : {std::pair{&d, &s}, std::pair{&s, &d}})
    if (flat->height == 1 && shaped->height > 1 && flat->width % shaped->height == 0 &&
        flat->width / shaped->height == shaped->width && steppable(shaped->width, elem_size)) {
      if (flat->pitch != 0) {  // a one-row 2D operand: its pitch must hold its row before the pitch is replaced
        region checked;
        CUDAMEM_TRY(check_operand(*flat, elem_size, flat == &d ? "dst" : "src", api, checked));
      }
      *flat = {flat->addr, shaped->width, shaped->height, shaped->width * elem_size, flat->device, flat->kind};
    }
  if (d.height != s.height)
    return error(errc::extents_mismatch, api, "extents differ (dst %zu x %zu, src %zu x %zu)", dst.width, dst.height,
                 src.width, src.height);
  return plan_shaped(p, d, s, elem_size, direction, api);
}
/// Checks a copy into `p`: extents (1D matches 2D of as many elements), operands, overlap of rows, pitch limit.
[[gnu::always_inline]] inline status plan_copy(plan& p, const operand& dst, const operand& src, std::size_t elem_size,
                                               cudaMemcpyKind direction, const char* api) noexcept {
  if (dst.height != src.height) [[unlikely]]
    return plan_reshaped(p, dst, src, elem_size, direction, api);
  return plan_shaped(p, dst, src, elem_size, direction, api);
}
[[gnu::always_inline]] inline status plan_fill(plan& p, const operand& dst, std::size_t elem_size, unsigned char value,
                                               const char* api) noexcept {
  p.fill = true;
  p.value = value;
  CUDAMEM_TRY(check_operand(dst, elem_size, "dst", api, p.dst));
  return dst.height == 1 || p.flat() || p.pageable() ? status() : check_pitch_limits(p, api);  // empty: flat
}

/// The 2D copy kernel (detail/copy2d.hpp), set by nvcc translation units: false where cudaMemcpy2DAsync is as fast.
inline result<bool> (*copy2d_kernel)(const plan&, stream_ref, const char*) noexcept = nullptr;
/// The one CUDA call of a checked, non-empty plan, ordered on `on`. Does not synchronize.
inline status enqueue(const plan& p, stream_ref on, const char* api) noexcept {
  const region &d = p.dst, &s = p.src;
  const cudaStream_t stream = on.get();
  if (p.fill && p.flat())
    return check(memset_async(d.addr, p.value, d.row_bytes * d.rows, stream), api, "cudaMemsetAsync");
  if (p.fill)
    return check(cudaMemset2DAsync(d.addr, d.pitch, p.value, d.row_bytes, d.rows, stream), api, "cudaMemset2DAsync");
  if (p.flat() && p.peer())
    return check(cudaMemcpyPeerAsync(d.addr, d.device.get(), s.addr, s.device.get(), d.row_bytes * d.rows, stream), api,
                 "cudaMemcpyPeerAsync");
  if (p.flat())
    return check(memcpy_async(d.addr, s.addr, d.row_bytes * d.rows, p.direction, stream), api, "cudaMemcpyAsync");
  if (p.peer()) {
    cudaMemcpy3DPeerParms parms{};
    parms.srcPtr = {s.addr, s.pitch, s.row_bytes, s.rows};
    parms.srcDevice = s.device.get();
    parms.dstPtr = {d.addr, d.pitch, d.row_bytes, d.rows};
    parms.dstDevice = d.device.get();
    parms.extent = {d.row_bytes, d.rows, 1};
    return check(cudaMemcpy3DPeerAsync(&parms, stream), api, "cudaMemcpy3DPeerAsync");
  }
  if (copy2d_kernel != nullptr && d.kind == kind_id::device && s.kind == kind_id::device) {
    auto launched = copy2d_kernel(p, on, api);
    if (!launched || *launched) return launched ? status() : launched.error();
  }
  return check(cudaMemcpy2DAsync(d.addr, d.pitch, s.addr, s.pitch, d.row_bytes, d.rows, p.direction, stream), api,
               "cudaMemcpy2DAsync");
}

/// Refuses a synchronous operation while a blocking stream of the current device captures (the legacy stream joins).
inline status refuse_during_capture(const char* api) noexcept {
  return refuse_capture(cudaStreamLegacy, api,
                        "a blocking stream is capturing a graph, and the legacy default stream would join it; use the "
                        "stream-ordered form on the capturing stream");
}
/// Runs a plan to completion: pageable memory on the host, else on the home device's legacy stream (docs/decisions.md).
inline status run_sync(const plan& p, const char* api) noexcept {
  const region &d = p.dst, &s = p.src;
  if (d.empty()) return {};
  if (p.pageable()) {
    for (std::size_t row = 0; row < d.rows; ++row) {
      char* const to = static_cast<char*>(d.addr) + row * d.pitch;
      if (p.fill) std::memset(to, p.value, d.row_bytes);
      else std::memcpy(to, static_cast<const char*>(s.addr) + row * s.pitch, d.row_bytes);
    }
    return {};
  }
  const region* home = p.home();
  auto guard = home != nullptr ? device_guard::set(home->device) : device_guard::keep_current();
  if (!guard) return guard.error().with_api(api);
  CUDAMEM_TRY(refuse_during_capture(api));
#if !defined(CUDA_API_PER_THREAD_DEFAULT_STREAM)  // there cudaMemcpy would go to the per-thread stream
  if (!p.fill && s.kind == kind_id::device && (d.kind == kind_id::host || d.kind == kind_id::pinned))
    return p.flat() ? check(cudaMemcpy(d.addr, s.addr, d.row_bytes * d.rows, p.direction), api, "cudaMemcpy")
                    : check(cudaMemcpy2D(d.addr, d.pitch, s.addr, s.pitch, d.row_bytes, d.rows, p.direction), api,
                            "cudaMemcpy2D");
#endif
  relaxed_capture_scope relaxed;
  if (home == &d && !p.fill && s.on_device() && s.device != d.device) {
    auto other_guard = device_guard::set(s.device);
    if (!other_guard) return other_guard.error().with_api(api);
    CUDAMEM_TRY(refuse_during_capture(api));
    CUDAMEM_TRY(check(cudaStreamSynchronize(cudaStreamLegacy), api, "cudaStreamSynchronize"));
  }
  CUDAMEM_TRY(enqueue(p, stream_ref::legacy(), api));
  return check(cudaStreamSynchronize(cudaStreamLegacy), api, "cudaStreamSynchronize");
}

// `done` failed: pool memory is mapped only where its device (or one given access) is current, and CUDA refuses the
// transfer with invalid-value while another device is. Retry once with the stream's device current.
[[gnu::cold, gnu::noinline]] inline status retry_async(const plan& p, stream_ref s, const char* api,
                                                       const status& done) noexcept {
  if (done.error() != cudaErrorInvalidValue) return done;
  auto device = s.device();
  auto guard = device ? device_guard::set(*device) : result<device_guard>(device.error());
  return guard && guard->previous() != *device ? enqueue(p, s, api) : done;
}
// run_async of what it does not inline: a moved-from stream, nothing to do, 2D, peers.
[[gnu::noinline]] inline status run_async_general(const plan& p, stream_ref s, const char* api) noexcept {
  if (!s.valid()) return handle_moved_from(api, "stream");
  if (p.dst.empty()) return {};
  status done = enqueue(p, s, api);
  if (done) [[likely]]
    return {};  // not `done`: copying a status copies its whole error
  return retry_async(p, s, api, done);
}
/// Enqueues a plan on `s`; does not synchronize. A contiguous copy or fill, not between devices, is one inline call.
[[gnu::always_inline]] inline status run_async(const plan& p, stream_ref s, const char* api) noexcept {
  if (!s.valid() || p.dst.empty() || !p.flat() || p.peer()) [[unlikely]]
    return run_async_general(p, s, api);
  const std::size_t bytes = p.dst.row_bytes * p.dst.rows;
  const cudaError_t code = p.fill ? memset_async(p.dst.addr, p.value, bytes, s.get())
                                  : memcpy_async(p.dst.addr, p.src.addr, bytes, p.direction, s.get());
  if (code == cudaSuccess) [[likely]]
    return {};
  return retry_async(p, s, api, check(code, api, p.fill ? "cudaMemsetAsync" : "cudaMemcpyAsync"));
}

}  // namespace cudamem::detail
