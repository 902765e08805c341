// SPDX-License-Identifier: MIT
/// \file
/// Batched copies: many pieces in one call, checked as a whole before anything is written.
///
///     copy_many(dsts, srcs)          // two sized ranges of views (spans, pitched views, buffers): synchronous
///     copy_many(dsts, srcs, stream)  // stream-ordered, returns at once; capturable
///     copy_many(pairs [, stream])    // one sized range of (dst, src) pairs (std::pair, std::tuple)
///
/// The element types and kinds are those of the ranges' views, so the direction and the page-locked rule are checked
/// at compile time exactly as for `copy`. Before anything is enqueued every piece is checked (extents, null with a
/// count, its source), then the batch: no destination overlaps another piece's destination or any source, every
/// device memory piece is on a device of the process. Errors name the piece: "copy_many: piece 7: extents differ
/// (dst 4, src 5)". Zero-size pieces are skipped. Dispatch (docs/copies.md, "Batched copies"): in nvcc translation
/// units, a gather kernel for many small pieces the stream's device can reach; else cudaMemcpyBatchAsync (1D pieces) or
/// cudaMemcpy3DBatchAsync (pitched pieces) where the driver has them and the batch allows; else one engine call per
/// piece.
#pragma once

#include <cudamem/copy.hpp>
#include <cudamem/detail/sync.hpp>
#include <cudamem/detail/transfer.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <ranges>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace cudamem {

namespace detail {

/// A checked, non-empty piece of a batch, with its index in the user's ranges (for errors).
struct batch_piece {
  plan p;
  std::size_t index;
};
/// The footprint [first, last) of a piece's destination or source, for the overlap check; strided (rows of
/// `row_bytes`, `pitch` apart) or not (pitch 0: every byte of the footprint).
struct byte_interval {
  std::uintptr_t first, last;
  std::size_t index;
  std::size_t pitch = 0, row_bytes = 0;
  bool dst = false;
};
/// Whether two intervals whose footprints meet share a byte: exact for contiguous ones, and for pairs on one pitch
/// whose rows are no longer than it (tiles and strips of one grid, wherever the grid starts); any other pair counts as
/// meeting (different pitches, a contiguous run longer than the pitch), as `copy` counts footprints.
inline bool bytes_meet(const byte_interval& a, const byte_interval& b) noexcept {
  if (a.pitch == 0 && b.pitch == 0) return true;
  if (a.pitch != 0 && b.pitch != 0 && a.pitch != b.pitch) return true;
  const std::uintptr_t pitch = a.pitch != 0 ? a.pitch : b.pitch;
  const auto width = [](const byte_interval& i) -> std::uintptr_t {
    return i.pitch != 0 ? i.row_bytes : i.last - i.first;
  };
  const auto rows = [](const byte_interval& i) -> std::uintptr_t {
    return i.pitch != 0 ? (i.last - i.first - i.row_bytes) / i.pitch + 1 : 1;
  };
  if (width(a) > pitch || width(b) > pitch) return true;
  // In rows of `pitch` from the earlier one's first byte: it covers columns [0, width) of rows [0, rows); each row of
  // the later one starts at column `col` of row `row` + r and may run on into the next row's first columns.
  const byte_interval &early = a.first <= b.first ? a : b, &late = a.first <= b.first ? b : a;
  const std::uintptr_t offset = late.first - early.first, row = offset / pitch, col = offset % pitch;
  return (col < width(early) && row < rows(early)) || (col + width(late) > pitch && row + 1 < rows(early));
}
// The overlap error for two intervals of different pieces, at least one a destination.
[[gnu::cold]] inline error overlap_between(const byte_interval& a, const byte_interval& b, const char* api) noexcept {
  if (a.dst && b.dst)
    return error(errc::overlap, api, "the destinations of pieces %zu and %zu overlap", std::min(a.index, b.index),
                 std::max(a.index, b.index));
  const byte_interval &d = a.dst ? a : b, &s = a.dst ? b : a;
  return error(errc::overlap, api, "the destination of piece %zu overlaps the source of piece %zu", d.index, s.index);
}
/// check_batch_overlap for batches with strided pieces: every pair whose footprints meet (at least one a
/// destination, of different pieces) is compared by bytes_meet, in a sweep over all intervals sorted by address.
/// O(n log n + pairs whose footprints meet): interleaved strips of one grid cost a comparison per pair.
[[gnu::noinline]] inline status check_strided_overlap(std::vector<byte_interval>& dsts,
                                                      const std::vector<byte_interval>& srcs,
                                                      const char* api) noexcept {
  dsts.insert(dsts.end(), srcs.begin(), srcs.end());
  std::vector<byte_interval>& all = dsts;
  std::sort(all.begin(), all.end(), [](const byte_interval& a, const byte_interval& b) {
    return a.first < b.first || (a.first == b.first && a.index < b.index);
  });
  std::vector<const byte_interval*> open;  // footprints not yet passed
  for (const byte_interval& next : all) {
    std::erase_if(open, [&](const byte_interval* o) { return o->last <= next.first; });
    for (const byte_interval* o : open)
      if ((o->dst || next.dst) && o->index != next.index && bytes_meet(*o, next)) return overlap_between(*o, next, api);
    open.push_back(&next);
  }
  return {};
}
inline constexpr const char* copy_many_api = "copy_many";

/// `e`, saying which piece it is about: "copy_many: piece 3: ..." (library errors), "... (piece 3)" (CUDA's).
[[gnu::cold, gnu::noinline]] inline error name_piece(const error& e, std::size_t index) noexcept {
  const char* detail_text = e.message();
  if (const char* api = e.api(); api != nullptr && std::strncmp(detail_text, api, std::strlen(api)) == 0)
    detail_text += std::strlen(api) + (detail_text[std::strlen(api)] == ':' ? 2 : 0);
  if (e.domain() == error_domain::library) return error(e.code(), copy_many_api, "piece %zu: %s", index, detail_text);
  char description[error::max_message + 1];
  std::snprintf(description, sizeof description, "%.200s (piece %zu)",
                e.domain() == error_domain::cuda ? cudaGetErrorString(e.cuda_status()) : detail_text, index);
  return error(e.domain(), e.native_code(), copy_many_api, e.call(),
               e.domain() == error_domain::cuda ? cudaGetErrorName(e.cuda_status()) : nullptr, description);
}

/// Refuses a batch in which a destination overlaps another piece's destination or any piece's source (its own is
/// plan_copy's check). Destinations are sorted by address (O(n) when they come sorted), neighbours compared, then
/// each source is looked up among them by binary search, unless all sources lie apart from all destinations (O(n)).
/// `dsts` is reordered; both hold non-empty intervals only.
inline status check_batch_overlap(std::vector<byte_interval>& dsts, const std::vector<byte_interval>& srcs,
                                  const char* api) noexcept {
  const auto by_first = [](const byte_interval& a, const byte_interval& b) {
    return a.first < b.first || (a.first == b.first && a.index < b.index);
  };
  if (!std::is_sorted(dsts.begin(), dsts.end(), by_first)) std::sort(dsts.begin(), dsts.end(), by_first);
  for (std::size_t k = 1; k < dsts.size(); ++k)
    if (dsts[k].first < dsts[k - 1].last) {
      const std::size_t a = std::min(dsts[k - 1].index, dsts[k].index), b = std::max(dsts[k - 1].index, dsts[k].index);
      return error(errc::overlap, api, "the destinations of pieces %zu and %zu overlap", a, b);
    }
  if (dsts.empty() || srcs.empty()) return {};
  // Disjoint and sorted, the destinations' ends are sorted too.
  const std::uintptr_t dst_first = dsts.front().first, dst_last = dsts.back().last;
  std::uintptr_t src_first = srcs.front().first, src_last = srcs.front().last;
  for (const byte_interval& s : srcs) src_first = std::min(src_first, s.first), src_last = std::max(src_last, s.last);
  if (src_last <= dst_first || dst_last <= src_first) return {};
  bool any = false;
  std::size_t found = 0, with = 0;  // the lowest-numbered source that overlaps a destination
  for (const byte_interval& s : srcs) {
    const auto d = std::upper_bound(dsts.begin(), dsts.end(), s.first,
                                    [](std::uintptr_t at, const byte_interval& i) { return at < i.last; });
    if (d != dsts.end() && d->first < s.last && (!any || s.index < found)) any = true, found = s.index, with = d->index;
  }
  if (!any) return {};
  return found == with
             ? error(errc::overlap, api, "piece %zu: source and destination overlap", found)
             : error(errc::overlap, api, "the destination of piece %zu overlaps the source of piece %zu", with, found);
}

/// The checked pieces of one batch: a buffer per thread, reused, so that a batch allocates nothing once warm.
struct batch_scratch {
  std::vector<batch_piece> pieces;
  std::vector<byte_interval> dsts, srcs;
  void clear() noexcept { pieces.clear(), dsts.clear(), srcs.clear(); }
};
inline batch_scratch& thread_batch_scratch() noexcept {
  thread_local batch_scratch scratch;
  scratch.clear();
  return scratch;
}

/// The batch-wide checks of the pieces in `b`: devices that exist, then overlap.
inline status check_batch(batch_scratch& b, const char* api) noexcept {
  bool strided = false;
  int devices = -1;
  for (const batch_piece& piece : b.pieces)
    for (const region* r : {&piece.p.dst, &piece.p.src}) {
      if (r->kind != kind_id::device) continue;
      if (devices < 0) {
        auto count = device_count();
        if (!count) return name_piece(count.error().with_api(api), piece.index);
        devices = *count;
      }
      if (r->device.get() < 0 || r->device.get() >= devices)
        return error(errc::out_of_range, api, "piece %zu: %s is device memory on device %d, and there are %d devices",
                     piece.index, r == &piece.p.dst ? "dst" : "src", r->device.get(), devices);
    }
  if (b.pieces.size() < 2) return {};  // one piece: plan_copy compared it with its source
  b.dsts.reserve(b.pieces.size());
  b.srcs.reserve(b.pieces.size());
  for (const batch_piece& piece : b.pieces)
    for (const region* r : {&piece.p.dst, &piece.p.src}) {
      const auto first = reinterpret_cast<std::uintptr_t>(r->addr);
      const bool rows = !r->contiguous();
      strided = strided || rows;
      (r == &piece.p.dst ? b.dsts : b.srcs)
          .push_back({first, first + r->footprint, piece.index, rows ? r->pitch : 0, r->row_bytes, r == &piece.p.dst});
    }
  return strided ? check_strided_overlap(b.dsts, b.srcs, api) : check_batch_overlap(b.dsts, b.srcs, api);
}

/// What a dispatch is given: a batch's checked, non-empty pieces as arrays (those cudaMemcpyBatchAsync takes, and the
/// layout the gather kernel reads once they are staged), and what the dispatches need to know of them.
struct batch_list {
  std::size_t count = 0, total = 0;  // pieces, and their bytes in all
  void** dst = nullptr;
  const void** src = nullptr;
  std::size_t* row_bytes = nullptr;  // each piece's bytes, or those of each of its rows
  std::size_t* index = nullptr;  // each piece's index in the user's ranges (for errors)
  std::size_t *rows = nullptr, *dpitch = nullptr, *spitch = nullptr;  // null when every piece is one run of bytes
  device_id launch;  // the stream's device
  /// Every device memory piece is on `launch`, and every piece is device memory or pinned, not pinned to pinned.
  bool on_launch_device = false;
  /// The same, but device memory may also be on a device whose memory `launch` reaches through a held peer guard.
  bool launch_reaches = false;
};
/// The arrays of a thread's batch lists: one allocation, grown when a batch needs more, reused.
class batch_arrays {
 public:
  /// Points the arrays of `l` at room for `count` pieces (with rows and pitches if `strided`); false if out of memory.
  bool fit(batch_list& l, std::size_t count, bool strided) noexcept {
    constexpr std::size_t words = 7;
    if (count > capacity_) {
      if (count > ~std::size_t{0} / (words * sizeof(std::size_t))) return false;
      void* more = std::malloc(count * words * sizeof(std::size_t));
      if (more == nullptr) return false;
      std::free(storage_);
      storage_ = more, capacity_ = count;
    }
    auto* const base = static_cast<std::size_t*>(storage_);
    l.dst = reinterpret_cast<void**>(base);
    l.src = reinterpret_cast<const void**>(base + count);
    l.row_bytes = base + 2 * count;
    l.rows = strided ? base + 3 * count : nullptr;
    l.dpitch = strided ? base + 4 * count : nullptr;
    l.spitch = strided ? base + 5 * count : nullptr;
    l.index = base + 6 * count;
    return true;
  }
  batch_arrays() = default;
  batch_arrays(const batch_arrays&) = delete;
  batch_arrays& operator=(const batch_arrays&) = delete;
  ~batch_arrays() { std::free(storage_); }

 private:
  void* storage_ = nullptr;
  std::size_t capacity_ = 0;
};
inline batch_arrays& thread_batch_arrays() noexcept {
  thread_local batch_arrays arrays;
  return arrays;
}

/// A dispatch: true when it took the batch, false (nothing enqueued) where it cannot be used, so that the caller tries
/// the next one. Variables, so that tests can watch which batches each takes.
using batch_dispatch = result<bool> (*)(const batch_list&, stream_ref, const char*) noexcept;
/// The gather kernel: set by nvcc translation units that make a stream-ordered batch (below).
inline batch_dispatch copy_many_kernel = nullptr;
/// nvcc: names the kernel's registration (defined with the kernel below), so that only translation units that make a
/// stream-ordered batch build the kernel and run its initializer; elsewhere it does nothing.
#if defined(__CUDACC__)
template <class = void>
void use_copy_many_kernel() noexcept;
#else
template <class = void>
void use_copy_many_kernel() noexcept {}
#endif

#if CUDART_VERSION >= 12080
/// Whether the driver has cudaMemcpyBatchAsync (CUDA 12.8): asked once, at run time, not taken from the header.
inline bool driver_has_batch_copy() noexcept {
  static const bool has = [] {
    int version = 0;
    return cudaDriverGetVersion(&version) == cudaSuccess && version >= 12080;
  }();
  return has;
}
/// Whether a batch call may take `l` on `s`: pieces of the kind it copies (`pitched`: with rows, else without), each
/// side pinned or device memory of the stream's device, a driver that has the calls, a stream that is neither a
/// default stream (which they refuse) nor capturing (they have no graph node: a capture would end without the copies).
inline bool batch_call_takes(const batch_list& l, stream_ref s, bool pitched) noexcept {
  const cudaStream_t handle = s.get();
  if ((l.rows != nullptr) != pitched || !l.on_launch_device || handle == nullptr || handle == cudaStreamLegacy ||
      handle == cudaStreamPerThread || !driver_has_batch_copy())
    return false;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (stream_capture_status(handle, &capture) != cudaSuccess) return (void)cudaGetLastError(), false;
  return capture == cudaStreamCaptureStatusNone;
}
/// What a batch call's status means for the dispatch: taken, a sticky error, or (cleared) declined.
inline result<bool> batch_call_outcome(cudaError_t code, const char* api, const char* call) noexcept {
  if (code == cudaSuccess) return true;
  if (error::is_sticky_status(code)) return error(code, api, call);
  (void)cudaGetLastError();
  return false;
}
/// Enqueues a batch of contiguous copies between pinned memory and device memory of the stream's device (not pinned
/// to pinned) with one cudaMemcpyBatchAsync, or returns false, enqueuing nothing, where batch_call_takes says no.
/// A non-sticky refusal is cleared and answered false: the loop then copies every piece, which is safe even if
/// some were enqueued, since no destination is any piece's source.
inline result<bool> copy_many_batch_call(const batch_list& l, stream_ref s, const char* api) noexcept {
  if (!batch_call_takes(l, s, false)) return false;
  const cudaStream_t handle = s.get();
  auto guard = device_guard::set(l.launch);
  if (!guard) return guard.error().with_api(api);
  cudaMemcpyAttributes attributes{};
  attributes.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  std::size_t attribute_of_first = 0;
#if CUDART_VERSION >= 13000
  const cudaError_t code =
      cudaMemcpyBatchAsync(l.dst, l.src, l.row_bytes, l.count, &attributes, &attribute_of_first, 1, handle);
#else
  std::size_t failed = 0;
  const cudaError_t code = cudaMemcpyBatchAsync(l.dst, const_cast<void**>(l.src), l.row_bytes, l.count, &attributes,
                                                &attribute_of_first, 1, &failed, handle);
#endif
  return batch_call_outcome(code, api, "cudaMemcpyBatchAsync");
}
/// The batch call, where the runtime has it.
inline batch_dispatch copy_many_batch = &copy_many_batch_call;

/// Enqueues a batch with pitched pieces (rows and pitches in `l`) between pinned memory and device memory of the
/// stream's device with one cudaMemcpy3DBatchAsync (pointer operands: widths in bytes, each piece one layer), or
/// returns false, enqueuing nothing, where copy_many_batch_call would.
inline result<bool> copy_many_batch_3d_call(const batch_list& l, stream_ref s, const char* api) noexcept {
  if (!batch_call_takes(l, s, true)) return false;
  const cudaStream_t handle = s.get();
  thread_local std::vector<cudaMemcpy3DBatchOp> ops;
  ops.clear();
  ops.reserve(l.count);
  for (std::size_t k = 0; k < l.count; ++k) {
    const auto operand = [&](void* at, std::size_t pitch) {
      cudaMemcpy3DOperand o{};
      o.type = cudaMemcpyOperandTypePointer;
      o.op.ptr.ptr = at, o.op.ptr.rowLength = pitch, o.op.ptr.layerHeight = l.rows[k];
      return o;
    };
    cudaMemcpy3DBatchOp op{};
    op.dst = operand(l.dst[k], l.rows[k] > 1 ? l.dpitch[k] : l.row_bytes[k]);
    op.src = operand(const_cast<void*>(l.src[k]), l.rows[k] > 1 ? l.spitch[k] : l.row_bytes[k]);
    op.extent = {l.row_bytes[k], l.rows[k], 1};
    op.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    ops.push_back(op);
  }
  auto guard = device_guard::set(l.launch);
  if (!guard) return guard.error().with_api(api);
#if CUDART_VERSION >= 13000
  const cudaError_t code = cudaMemcpy3DBatchAsync(ops.size(), ops.data(), 0, handle);
#else
  std::size_t failed = 0;
  const cudaError_t code = cudaMemcpy3DBatchAsync(ops.size(), ops.data(), &failed, 0, handle);
#endif
  return batch_call_outcome(code, api, "cudaMemcpy3DBatchAsync");
}
/// The 3D batch call, where the runtime has it.
inline batch_dispatch copy_many_batch_3d = &copy_many_batch_3d_call;
#else
inline batch_dispatch copy_many_batch = nullptr;
inline batch_dispatch copy_many_batch_3d = nullptr;
#endif

/// Offers `l` to the kernel, then to the batch calls: the status of the one that took it, or nothing if none did.
inline maybe<status> dispatch_batch(const batch_list& l, stream_ref s, const char* api) noexcept {
  for (batch_dispatch dispatch : {copy_many_kernel, copy_many_batch, copy_many_batch_3d}) {
    if (dispatch == nullptr) continue;
    auto taken = dispatch(l, s, api);
    if (!taken) return status(taken.error());
    if (*taken) return status();
  }
  return {};
}

/// The list of the checked pieces of `b` for a batch on a stream of `launch`; false if there is no room for it.
inline bool list_batch(const batch_scratch& b, device_id launch, batch_list& l) noexcept {
  bool strided = false;
  for (const batch_piece& piece : b.pieces) strided = strided || !piece.p.flat();
  if (!thread_batch_arrays().fit(l, b.pieces.size(), strided)) return false;
  l.count = b.pieces.size(), l.total = 0, l.launch = launch;
  l.on_launch_device = l.launch_reaches = true;
  for (std::size_t k = 0; k < l.count; ++k) {
    const plan& p = b.pieces[k].p;
    const region &d = p.dst, &src = p.src;
    for (const region* r : {&d, &src}) {
      const bool pinned = r->kind == kind_id::pinned, device = r->kind == kind_id::device;
      l.on_launch_device = l.on_launch_device && (pinned || (device && r->device == launch));
      l.launch_reaches =
          l.launch_reaches && (pinned || (device && (r->device == launch || peer_access_held(launch, r->device))));
    }
    if (d.kind == kind_id::pinned && src.kind == kind_id::pinned) l.on_launch_device = l.launch_reaches = false;
    l.dst[k] = d.addr, l.src[k] = src.addr, l.index[k] = b.pieces[k].index;
    l.row_bytes[k] = p.flat() ? d.row_bytes * d.rows : d.row_bytes;
    if (strided) l.rows[k] = p.flat() ? 1 : d.rows, l.dpitch[k] = d.pitch, l.spitch[k] = src.pitch;
    l.total += d.row_bytes * d.rows;
  }
  return true;
}

/// Runs checked pieces on `s`; does not synchronize. An error from CUDA names its piece; earlier pieces are queued.
inline status run_batch_async(const batch_scratch& b, stream_ref s, const char* api) noexcept {
  if (!s.valid()) return handle_moved_from(api, "stream");
  if (b.pieces.size() >= 2) {
    auto launch = s.device();
    batch_list l;
    if (launch && list_batch(b, *launch, l))
      if (maybe<status> done = dispatch_batch(l, s, api)) return *done;
  }
  for (const batch_piece& piece : b.pieces)
    if (status done = run_async(piece.p, s, api); !done) [[unlikely]]
      return name_piece(done.error(), piece.index);
  return {};
}

/// One run of `bytes` bytes at `addr`, as plan_copy would check it.
inline region flat_region(void* addr, std::size_t bytes, device_id on, kind_id kind) noexcept {
  region r;
  r.addr = addr, r.row_bytes = r.pitch = r.footprint = bytes, r.rows = 1, r.device = on, r.kind = kind;
  return r;
}
/// A stream-ordered batch of 1D pieces between device memory and pinned memory (DK, SK: their kinds; T: their
/// element), checked in one pass as it is listed, without the general planning, when it is the common case: every
/// device piece on the stream's device, the destinations in address order and apart, and all sources lying apart from
/// all destinations. Nothing (the general path then plans the batch and says what is wrong) for any other batch, or
/// when the stream's device is unknown. `each(f)` calls f(dst, src) on the pieces in order while f returns true.
template <class T, class DK, class SK, class Each>
maybe<status> fast_batch(std::size_t count, stream_ref s, Each each, const char* api) noexcept {
  static_assert((std::is_same_v<DK, device> || std::is_same_v<DK, pinned>) &&
                (std::is_same_v<SK, device> || std::is_same_v<SK, pinned>) &&
                !(std::is_same_v<DK, pinned> && std::is_same_v<SK, pinned>));
  batch_list l;
  if (!s.valid() || !thread_batch_arrays().fit(l, count, false)) return {};
  auto launch = s.device();
  if (!launch) return {};
  l.launch = *launch, l.on_launch_device = l.launch_reaches = true;
  std::size_t n = 0, total = 0, index = 0;
  std::uintptr_t dst_first = 0, dst_end = 0, src_first = ~std::uintptr_t{0}, src_end = 0;
  bool ordinary = true;
  each([&](auto dst, auto src) noexcept {
    const std::size_t size = dst.size(), at = index++;
    if (size != src.size() || size > ~std::size_t{0} / sizeof(T)) return ordinary = false;
    if (size == 0) return true;
    const std::size_t bytes = size * sizeof(T);
    const auto d = reinterpret_cast<std::uintptr_t>(dst.data().get()),
               from = reinterpret_cast<std::uintptr_t>(src.data().get());
    if (d == 0 || from == 0 || d < dst_end || d + bytes < d || from + bytes < from) return ordinary = false;
    if constexpr (std::is_same_v<DK, device>)
      if (dst.data().device() != l.launch) return ordinary = false;
    if constexpr (std::is_same_v<SK, device>)
      if (src.data().device() != l.launch) return ordinary = false;
    if (n == 0) dst_first = d;
    dst_end = d + bytes;
    src_first = from < src_first ? from : src_first;
    src_end = from + bytes > src_end ? from + bytes : src_end;
    l.dst[n] = dst.data().get(), l.src[n] = src.data().get(), l.row_bytes[n] = bytes, l.index[n] = at;
    ++n, total += bytes;
    return true;
  });
  if (!ordinary || (n != 0 && src_first < dst_end && dst_first < src_end)) return {};
  l.count = n, l.total = total;
  if (n == 0) return status();
  if (n >= 2)
    if (maybe<status> done = dispatch_batch(l, s, api)) return done;
  // No dispatch took it (a capture, an old driver, the default streams): one copy per piece, as the general path.
  for (std::size_t k = 0; k < n; ++k) {
    const device_id dd = std::is_same_v<DK, device> ? l.launch : device_id::host(),
                    sd = std::is_same_v<SK, device> ? l.launch : device_id::host();
    plan p;
    p.dst = flat_region(l.dst[k], l.row_bytes[k], dd, kind_id_of<DK>);
    p.src = flat_region(const_cast<void*>(l.src[k]), l.row_bytes[k], sd, kind_id_of<SK>);
    p.direction = copy_direction<DK, SK>;
    if (status done = run_async(p, s, api); !done) [[unlikely]]
      return status(name_piece(done.error(), l.index[k]));
  }
  return status();
}
/// Runs checked pieces to completion, one after another. A capture that would refuse any piece refuses the batch
/// before the first is written.
inline status run_batch_sync(const batch_scratch& b, const char* api) noexcept {
  device_id checked[8];
  std::size_t known = 0;
  for (const batch_piece& piece : b.pieces) {
    if (piece.p.pageable()) continue;
    const region* home = piece.p.home();
    auto device = home != nullptr ? result<device_id>(home->device) : current_device();
    if (!device) return name_piece(device.error().with_api(api), piece.index);
    if (std::find(checked, checked + known, *device) != checked + known) continue;
    auto guard = device_guard::set(*device);
    if (!guard) return name_piece(guard.error().with_api(api), piece.index);
    CUDAMEM_TRY(refuse_during_capture(api));
    if (known < std::size(checked)) checked[known++] = *device;
  }
  for (const batch_piece& piece : b.pieces)
    if (status done = run_sync(piece.p, api); !done) return name_piece(done.error(), piece.index);
  return {};
}

/// A sized range of views, whose elements copy.hpp's copies take.
template <class R>
concept view_range = std::ranges::forward_range<R> && std::ranges::sized_range<R> &&
                     viewable<std::remove_cvref_t<std::ranges::range_reference_t<R>>>;
template <class P>
concept view_pair = requires(P& p) {
  requires viewable<std::remove_cvref_t<decltype(std::get<0>(p))>>;
  requires viewable<std::remove_cvref_t<decltype(std::get<1>(p))>>;
};
/// A sized range of (dst, src) pairs of views.
template <class R>
concept pair_range = std::ranges::forward_range<R> && std::ranges::sized_range<R> &&
                     view_pair<std::remove_reference_t<std::ranges::range_reference_t<R>>>;
// What a stream-ordered batch sees of an element: an owner in a temporary range goes away with it.
template <class R, class Element>
using queued_element = std::conditional_t<std::is_lvalue_reference_v<R>, Element&, std::remove_cvref_t<Element>>;

/// Whether batches of DstView and SrcView pieces can take fast_batch: 1D spans of device memory and pinned memory.
template <class V>
inline constexpr bool fast_piece = false;
template <class T, class K>
inline constexpr bool fast_piece<span<T, K>> = std::is_same_v<K, device> || std::is_same_v<K, pinned>;
template <class DstView, class SrcView>
inline constexpr bool fast_pieces =
    fast_piece<DstView> && fast_piece<SrcView> &&
    !(std::is_same_v<typename DstView::kind, pinned> && std::is_same_v<typename SrcView::kind, pinned>);

/// Checks piece `index` into `b` (skipped when empty).
template <class DstView, class SrcView>
[[gnu::always_inline]] inline status add_piece(batch_scratch& b, std::size_t index, DstView dst, SrcView src,
                                               const char* api) noexcept {
  batch_piece piece{{}, index};
  if (status planned = plan_copy(piece.p, operand_of(dst), operand_of(src), sizeof(typename DstView::element_type),
                                 copy_direction<typename DstView::kind, typename SrcView::kind>, api);
      !planned) [[unlikely]]
    return name_piece(planned.error(), index);
  if (!piece.p.dst.empty()) b.pieces.push_back(piece);
  return {};
}
/// One piece: the checks and the one call of `copy`, so that a batch of one costs what a copy does.
template <class DstView, class SrcView>
[[gnu::always_inline]] inline status copy_one_piece(DstView dst, SrcView src, const stream_ref* s) noexcept {
  const status done = copy_operands(operand_of(dst), operand_of(src), sizeof(typename DstView::element_type),
                                    copy_direction<typename DstView::kind, typename SrcView::kind>, s, copy_many_api);
  if (!done) [[unlikely]]
    return name_piece(done.error(), 0);
  return {};
}

struct copy_many_fn {
  template <view_range Dsts, view_range Srcs>
  [[nodiscard]] status operator()(Dsts&& dsts, Srcs&& srcs) const noexcept {
    return ranges(dsts, srcs, nullptr);
  }
  template <view_range Dsts, view_range Srcs>
  [[nodiscard]] status operator()(Dsts&& dsts, Srcs&& srcs, stream_ref s) const noexcept {
    check_stream_ordered<queued_element<Dsts, std::ranges::range_reference_t<Dsts>>,
                         queued_element<Srcs, std::ranges::range_reference_t<Srcs>>>();
    use_copy_many_kernel();
    CUDAMEM_TRY(range_uses(dsts, s, false));  // owners used on a stream not their own: each use is recorded
    CUDAMEM_TRY(range_uses(srcs, s, false));
    CUDAMEM_TRY(ranges(dsts, srcs, &s));
    CUDAMEM_TRY(range_uses(dsts, s, true));
    return range_uses(srcs, s, true);
  }
  template <pair_range Pairs>
  [[nodiscard]] status operator()(Pairs&& pairs) const noexcept {
    return paired(pairs, nullptr);
  }
  template <pair_range Pairs>
  [[nodiscard]] status operator()(Pairs&& pairs, stream_ref s) const noexcept {
    using pair_type = std::remove_reference_t<std::ranges::range_reference_t<Pairs>>;
    check_stream_ordered<queued_element<Pairs, std::tuple_element_t<0, std::remove_cv_t<pair_type>>>,
                         queued_element<Pairs, std::tuple_element_t<1, std::remove_cv_t<pair_type>>>>();
    use_copy_many_kernel();
    CUDAMEM_TRY(pair_uses(pairs, s, false));
    CUDAMEM_TRY(paired(pairs, &s));
    return pair_uses(pairs, s, true);
  }

 private:
  // owner_use for each element that is an owner (held by reference: a range of views or values costs nothing).
  template <class R>
  static status range_uses(R& range, stream_ref s, bool commit) noexcept {
    if constexpr (tracked_owner<std::remove_cvref_t<std::ranges::range_reference_t<R>>>)
      for (auto&& element : range) CUDAMEM_TRY(owner_use(element, s, copy_many_api, commit));
    return {};
  }
  template <class Pairs>
  static status pair_uses(Pairs& pairs, stream_ref s, bool commit) noexcept {
    using pair_type = std::remove_reference_t<std::ranges::range_reference_t<Pairs>>;
    if constexpr (tracked_owner<std::remove_cvref_t<decltype(std::get<0>(std::declval<pair_type&>()))>> ||
                  tracked_owner<std::remove_cvref_t<decltype(std::get<1>(std::declval<pair_type&>()))>>)
      for (auto&& piece : pairs) {
        CUDAMEM_TRY(owner_use(std::get<0>(piece), s, copy_many_api, commit));
        CUDAMEM_TRY(owner_use(std::get<1>(piece), s, copy_many_api, commit));
      }
    return {};
  }
  template <class DstView, class SrcView>
  static constexpr void check_types() {
    check_copy_types<DstView, SrcView>();
  }
  template <class Dsts, class Srcs>
  static status ranges(Dsts& dsts, Srcs& srcs, const stream_ref* s) noexcept {
    using DstView = std::remove_cvref_t<decltype(std::declval<std::ranges::range_reference_t<Dsts>>().view())>;
    using SrcView = std::remove_cvref_t<decltype(std::declval<std::ranges::range_reference_t<Srcs>>().view())>;
    check_types<DstView, SrcView>();
    const auto count = static_cast<std::size_t>(std::ranges::size(dsts));
    if (count != static_cast<std::size_t>(std::ranges::size(srcs)))
      return error(errc::extents_mismatch, copy_many_api, "%zu destinations and %zu sources", count,
                   static_cast<std::size_t>(std::ranges::size(srcs)));
    if (count == 1) return copy_one_piece((*std::ranges::begin(dsts)).view(), (*std::ranges::begin(srcs)).view(), s);
    if constexpr (fast_pieces<DstView, SrcView>)
      if (s != nullptr) {
        const auto each = [&](auto&& f) noexcept {
          auto src = std::ranges::begin(srcs);
          for (auto&& dst : dsts)
            if (!f(dst.view(), (*src++).view())) return;
        };
        if (maybe<status> done = fast<DstView, SrcView>(count, *s, each)) return *done;
      }
    batch_scratch& b = thread_batch_scratch();
    b.pieces.reserve(count);
    auto src = std::ranges::begin(srcs);
    std::size_t index = 0;
    for (auto&& dst : dsts) CUDAMEM_TRY(add_piece(b, index++, dst.view(), (*src++).view(), copy_many_api));
    return run(b, s);
  }
  template <class Pairs>
  static status paired(Pairs& pairs, const stream_ref* s) noexcept {
    using pair_type = std::remove_reference_t<std::ranges::range_reference_t<Pairs>>;
    using DstView = std::remove_cvref_t<decltype(std::get<0>(std::declval<pair_type&>()).view())>;
    using SrcView = std::remove_cvref_t<decltype(std::get<1>(std::declval<pair_type&>()).view())>;
    check_types<DstView, SrcView>();
    const auto count = static_cast<std::size_t>(std::ranges::size(pairs));
    if (count == 1) {
      auto&& only = *std::ranges::begin(pairs);
      return copy_one_piece(std::get<0>(only).view(), std::get<1>(only).view(), s);
    }
    if constexpr (fast_pieces<DstView, SrcView>)
      if (s != nullptr) {
        const auto each = [&](auto&& f) noexcept {
          for (auto&& piece : pairs)
            if (!f(std::get<0>(piece).view(), std::get<1>(piece).view())) return;
        };
        if (maybe<status> done = fast<DstView, SrcView>(count, *s, each)) return *done;
      }
    batch_scratch& b = thread_batch_scratch();
    b.pieces.reserve(count);
    std::size_t index = 0;
    for (auto&& piece : pairs)
      CUDAMEM_TRY(add_piece(b, index++, std::get<0>(piece).view(), std::get<1>(piece).view(), copy_many_api));
    return run(b, s);
  }
  template <class DstView, class SrcView, class Each>
  static maybe<status> fast(std::size_t count, stream_ref s, const Each& each) noexcept {
    return fast_batch<std::remove_const_t<typename DstView::element_type>, typename DstView::kind,
                      typename SrcView::kind>(count, s, each, copy_many_api);
  }
  static status run(batch_scratch& b, const stream_ref* s) noexcept {
    if (s != nullptr && !s->valid()) return handle_moved_from(copy_many_api, "stream");
    CUDAMEM_TRY(check_batch(b, copy_many_api));
    return s != nullptr ? run_batch_async(b, *s, copy_many_api) : run_batch_sync(b, copy_many_api);
  }
};
}  // namespace detail

/// copy_many(dsts, srcs [, stream]), copy_many(pairs [, stream]): copies each source piece into its destination
/// piece, as `copy` would, after checking the whole batch; a refused batch writes nothing. Without a stream: complete
/// on return (one synchronous copy per piece). With one: ordered on it, returns at once, capturable. Errors name the
/// piece: extents_mismatch (also ranges of different lengths), invalid_argument, overlap (a destination with another
/// destination or any source), out_of_range (a device the process lacks), size_overflow, capture_active, CUDA errors
/// (those of a stream-ordered batch after some pieces were queued: the earlier pieces stay queued).
inline constexpr detail::copy_many_fn copy_many{};

#if defined(__CUDACC__)
namespace detail {

/// One piece as the kernel reads it: `rows` rows of `row_bytes`, `dpitch` and `spitch` bytes apart (one row: flat).
struct copy_many_entry {
  char* dst;
  const char* src;
  std::size_t row_bytes, rows, dpitch, spitch;
};
inline constexpr unsigned copy_many_threads = 256, copy_many_unroll = 4;
// Byte offset of element k of a piece of `per_row` elements of V per row, rows `pitch` apart.
template <class V>
__device__ std::size_t copy_many_offset(std::size_t k, std::size_t per_row, std::size_t rows, std::size_t pitch) {
  if (rows == 1) return k * sizeof(V);
  const std::size_t row = k / per_row;
  return row * pitch + (k - row * per_row) * sizeof(V);
}
// A warp copies one piece: the lanes step through its elements of V, row after row, each loading up to
// `copy_many_unroll` before storing them.
template <class V>
__device__ void copy_many_piece(const copy_many_entry& e, unsigned lane) {
  const std::size_t per_row = e.row_bytes / sizeof(V), count = per_row * e.rows;
  for (std::size_t i = lane; i < count; i += 32 * copy_many_unroll) {
    V v[copy_many_unroll];
#pragma unroll
    for (unsigned u = 0; u < copy_many_unroll; ++u)
      if (i + u * 32 < count)
        v[u] = *reinterpret_cast<const V*>(e.src + copy_many_offset<V>(i + u * 32, per_row, e.rows, e.spitch));
#pragma unroll
    for (unsigned u = 0; u < copy_many_unroll; ++u)
      if (i + u * 32 < count)
        *reinterpret_cast<V*>(e.dst + copy_many_offset<V>(i + u * 32, per_row, e.rows, e.dpitch)) = v[u];
  }
}
// Templates (of nothing): a header's kernel must not be defined in every translation unit (one definition each), and
// is built only where use_copy_many_kernel names its registration. `list` holds a batch_list's arrays as staged:
// `count` destinations, sources and row bytes, then, if `strided`, `count` rows, destination and source pitches.
template <class = void>
__global__ void __launch_bounds__(copy_many_threads)
    copy_many_gather(const std::size_t* list, std::size_t count, bool strided) {
  const unsigned lane = threadIdx.x % 32;
  const std::size_t warps = std::size_t{gridDim.x} * (copy_many_threads / 32);
  for (std::size_t k = (std::size_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32; k < count; k += warps) {
    copy_many_entry e{
        reinterpret_cast<char*>(list[k]), reinterpret_cast<const char*>(list[count + k]), list[2 * count + k], 1, 0, 0};
    if (strided) e.rows = list[3 * count + k], e.dpitch = list[4 * count + k], e.spitch = list[5 * count + k];
    const std::uintptr_t bits = reinterpret_cast<std::uintptr_t>(e.dst) | reinterpret_cast<std::uintptr_t>(e.src) |
                                e.row_bytes | (e.rows > 1 ? e.dpitch | e.spitch : 0);
    if ((bits & 15) == 0) copy_many_piece<uint4>(e, lane);
    else if ((bits & 7) == 0) copy_many_piece<uint2>(e, lane);
    else if ((bits & 3) == 0) copy_many_piece<unsigned>(e, lane);
    else copy_many_piece<unsigned char>(e, lane);
  }
}

/// The piece lists the kernel reads: page-locked, mapped blocks per device, each with an event recorded after the
/// kernel that reads it, so that a block is written again only once that kernel is done (docs/decisions.md). A
/// block is busy from its acquisition until the event is recorded; at most `blocks_per_device` per device, and a
/// batch that finds none free goes to the next dispatch instead of waiting. Given back at process exit (an atexit
/// handler registered with the first block, so it runs before the CUDA runtime's own teardown).
struct CUDAMEM_DETAIL_PROCESS_WIDE copy_many_staging {
  static constexpr int max_devices = 64, blocks_per_device = 8;
  static constexpr std::size_t min_block_bytes = std::size_t{64} << 10;
  struct block {
    void* host = nullptr;
    std::size_t bytes = 0;
    cudaEvent_t read = nullptr;
    bool busy = false;
  };
  /// A block of at least `bytes` for device `id` (its current device is `id`), busy; null when none can be had.
  block* acquire(device_id id, std::size_t bytes) noexcept {
    if (id.get() < 0 || id.get() >= max_devices) return nullptr;
    relaxed_capture_scope relaxed;  // queries and allocations are no work of a capture in another thread
    const lock_guard<mutex> hold(lock_);
    block* grow = nullptr;
    for (block& b : blocks_[id.get()]) {
      if (b.busy || (b.read != nullptr && query_event(b.read) != cudaSuccess)) continue;
      if (b.host != nullptr && b.bytes >= bytes) return b.busy = true, &b;
      if (grow == nullptr || b.host == nullptr) grow = &b;  // an unused slot before a small block
    }
    if (grow == nullptr) return nullptr;
    if (grow->read == nullptr && cudaEventCreateWithFlags(&grow->read, cudaEventDisableTiming) != cudaSuccess)
      return (void)cudaGetLastError(), grow->read = nullptr, nullptr;
    std::size_t size = min_block_bytes;
    while (size < bytes) size *= 2;
    void* host = nullptr;
    if (cudaHostAlloc(&host, size, cudaHostAllocPortable | cudaHostAllocMapped) != cudaSuccess)
      return (void)cudaGetLastError(), nullptr;
    if (!exit_hook_) exit_hook_ = std::atexit([] { process_wide<copy_many_staging>().give_back_all(); }) == 0;
    if (grow->host != nullptr) (void)cudaFreeHost(grow->host);  // its last reader is done (its event)
    grow->host = host, grow->bytes = size, grow->busy = true;
    return grow;
  }
  /// Ends the busy time of `b`: after its event was recorded behind the reader, or when nothing was launched.
  void release(block& b) noexcept {
    const lock_guard<mutex> hold(lock_);
    b.busy = false;
  }
  /// Waits for each block's last reader, then frees it and its event (at process exit; errors of a runtime already
  /// unloading are no failures, and the runtime's last error is left clean).
  void give_back_all() noexcept {
    const lock_guard<mutex> hold(lock_);
    for (auto& device_blocks : blocks_)
      for (block& b : device_blocks) {
        if (b.read != nullptr) (void)cudaEventSynchronize(b.read), (void)cudaEventDestroy(b.read);
        if (b.host != nullptr) (void)cudaFreeHost(b.host);
        b = block{};
      }
    (void)cudaGetLastError();
  }

 private:
  mutex lock_;
  bool exit_hook_ = false;  // give_back_all registered with atexit
  block blocks_[max_devices][blocks_per_device] = {};
};

/// The kernel runs batches whose pieces average less than this; larger pieces go to the copy engines.
inline constexpr std::size_t copy_many_kernel_max_average = std::size_t{64} << 10;

/// Launches the gather kernel for the batch (1D and pitched pieces) on `s`, or returns false, enqueuing nothing: a
/// stream that captures (the list would be a host block reused after the batch, not part of the graph), a piece it
/// cannot reach, managed or host-to-host pieces, large pieces, no free staging block.
template <class = void>
result<bool> copy_many_launch(const batch_list& l, stream_ref s, const char* api) noexcept {
  if (!l.launch_reaches || l.total >= copy_many_kernel_max_average * l.count) return false;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (stream_capture_status(s.get(), &capture) != cudaSuccess) return (void)cudaGetLastError(), false;
  if (capture != cudaStreamCaptureStatusNone) return false;
  auto sms = cached_attribute<cudaDevAttrMultiProcessorCount>(l.launch, api);
  if (!sms) return sms.error();
  auto guard = device_guard::set(l.launch);  // a launch and an event go to the current device
  if (!guard) return guard.error().with_api(api);
  copy_many_staging& staging = process_wide<copy_many_staging>();
  const std::size_t count = l.count, words = l.rows != nullptr ? 6 : 3;
  copy_many_staging::block* block = staging.acquire(l.launch, count * words * sizeof(std::size_t));
  if (block == nullptr) return false;
  auto* const list = static_cast<std::size_t*>(block->host);
  const void* const arrays[] = {l.dst, l.src, l.row_bytes, l.rows, l.dpitch, l.spitch};
  for (std::size_t a = 0; a < words; ++a) std::memcpy(list + a * count, arrays[a], count * sizeof(std::size_t));
  constexpr std::size_t warps_per_block = copy_many_threads / 32;
  const std::size_t wanted = (count + warps_per_block - 1) / warps_per_block, most = std::size_t(*sms) * 8;
  const dim3 grid(static_cast<unsigned>(wanted < most ? wanted : most)), threads(copy_many_threads);
  const std::size_t* mapped = list;  // the mapped address equals the host address (unified addressing)
  std::size_t pieces = count;
  bool strided = l.rows != nullptr;
  void* args[] = {&mapped, &pieces, &strided};
  const cudaError_t launched =
      cudaLaunchKernel(reinterpret_cast<const void*>(&copy_many_gather<>), grid, threads, args, 0, s.get());
  if (launched != cudaSuccess) {
    staging.release(*block);
    return error(launched, api, "cudaLaunchKernel");
  }
  const cudaError_t recorded = record_event(block->read, s.get());
  if (recorded != cudaSuccess) {
    // The kernel is queued and may still read the block: keep it busy for good rather than risk overwriting it.
    return error(recorded, api, "cudaEventRecord");
  }
  staging.release(*block);
  return true;
}
template <class = void>
inline const bool copy_many_registered = (copy_many_kernel = &copy_many_launch<>, true);
template <class>
void use_copy_many_kernel() noexcept {
  (void)copy_many_registered<>;
}

}  // namespace detail
#endif

}  // namespace cudamem
