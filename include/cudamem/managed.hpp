// SPDX-License-Identifier: MIT
/// \file
/// Managed memory under control: typed prefetch and advice on managed spans and buffers, to a device, the host or a
/// host NUMA node, and batched prefetch (CUDA 13's cudaMemPrefetchBatchAsync, cudaMemDiscardAndPrefetchBatchAsync;
/// a loop of prefetches with CUDA 12). The same code compiles against the CUDA 12.x and 13.x headers.
/// Not in the umbrella header: include <cudamem/managed.hpp>. Guide: docs/kinds.md, "Managed memory under control".
///
///     prefetch(view, memory_location, stream)          stream-ordered; view: span<T, managed> or managed_buffer
///     advise(view, managed_advice, memory_location)    synchronous
///     prefetch_many(views, count, memory_location, stream)               one batch, or a loop before CUDA 13
///     discard_and_prefetch_many(views, count, memory_location, stream)   contents become indeterminate
#pragma once

#include <cudamem/buffer.hpp>
#include <cudamem/detail/capture.hpp>
#include <cudamem/detail/storage.hpp>
#include <cudamem/location.hpp>
#include <cudamem/span.hpp>
#include <cudamem/stream.hpp>

#include <cstddef>

namespace cudamem {

/// What advise() tells the driver about a managed range (cudaMemoryAdvise).
enum class managed_advice : unsigned char {
  read_mostly,  ///< Mostly read: reads make read-only copies where they happen (CUDA ignores the location; it is still
                ///< checked).
  unset_read_mostly,  ///< Undoes read_mostly (CUDA ignores the location; it is still checked).
  preferred_location,  ///< Keep the pages at the location; faults elsewhere map rather than migrate.
  unset_preferred_location,  ///< Undoes preferred_location (CUDA ignores the location; it is still checked).
  accessed_by,  ///< Keep the pages mapped for the location (a device, or the host), wherever they live.
  unset_accessed_by,  ///< Undoes accessed_by for the location.
};

namespace detail {
inline cudaMemoryAdvise native_advice(managed_advice a) noexcept {
  switch (a) {
    case managed_advice::read_mostly: return cudaMemAdviseSetReadMostly;
    case managed_advice::unset_read_mostly: return cudaMemAdviseUnsetReadMostly;
    case managed_advice::preferred_location: return cudaMemAdviseSetPreferredLocation;
    case managed_advice::unset_preferred_location: return cudaMemAdviseUnsetPreferredLocation;
    case managed_advice::accessed_by: return cudaMemAdviseSetAccessedBy;
    case managed_advice::unset_accessed_by: break;
  }
  return cudaMemAdviseUnsetAccessedBy;
}
// The two generations of the runtime's calls: CUDA 13 takes a cudaMemLocation in cudaMemPrefetchAsync and
// cudaMemAdvise; CUDA 12 (12.2 on) in their _v2 forms, the plain ones taking a device ordinal.
inline cudaError_t prefetch_call(const void* p, std::size_t bytes, cudaMemLocation to, cudaStream_t s) noexcept {
#if CUDART_VERSION >= 13000
  return cudaMemPrefetchAsync(p, bytes, to, 0, s);
#else
  return cudaMemPrefetchAsync_v2(p, bytes, to, 0, s);
#endif
}
inline cudaError_t advise_call(const void* p, std::size_t bytes, cudaMemoryAdvise a, cudaMemLocation at) noexcept {
#if CUDART_VERSION >= 13000
  return cudaMemAdvise(p, bytes, a, at);
#else
  return cudaMemAdvise_v2(p, bytes, a, at);
#endif
}
inline constexpr const char* prefetch_name =
    CUDART_VERSION >= 13000 ? "cudaMemPrefetchAsync" : "cudaMemPrefetchAsync_v2";
inline constexpr const char* advise_name = CUDART_VERSION >= 13000 ? "cudaMemAdvise" : "cudaMemAdvise_v2";

/// The untyped prefetch; empty: nothing to do.
inline status prefetch_bytes(const void* p, std::size_t bytes, memory_location to, stream_ref s,
                             const char* api) noexcept {
  if (!s.valid()) return handle_moved_from(api, "stream");
  CUDAMEM_TRY(check_location(to, api));
  if (bytes == 0) return {};
  return check(prefetch_call(p, bytes, to.native(), s.get()), api, prefetch_name);
}
/// The untyped advice; empty: nothing to do.
inline status advise_bytes(const void* p, std::size_t bytes, managed_advice a, memory_location at,
                           const char* api) noexcept {
  CUDAMEM_TRY(check_location(at, api));
  if (bytes == 0) return {};
  relaxed_capture_scope relaxed;  // a synchronous call of the library's own: no part of a capture elsewhere
  return check(advise_call(p, bytes, native_advice(a), at.native()), api, advise_name);
}
/// One batch of the non-empty ranges (`discard`: discard, then prefetch), or with CUDA 12 a loop of prefetches (a
/// discarded range's contents are indeterminate, so keeping them is a valid discard).
inline status prefetch_batch(const void* const* ptrs, const std::size_t* sizes, std::size_t count, memory_location to,
                             stream_ref s, bool discard, const char* api) noexcept {
  if (!s.valid()) return handle_moved_from(api, "stream");
  CUDAMEM_TRY(check_location(to, api));
#if CUDART_VERSION >= 13000
  vec<void*> addresses;
  vec<std::size_t> bytes;
  for (std::size_t i = 0; i < count; ++i)
    if (sizes[i] != 0) {
      addresses.push_back(const_cast<void*>(ptrs[i]));  // the runtime's signature; nothing is written through it
      bytes.push_back(sizes[i]);
    }
  if (addresses.empty()) return {};
  cudaMemLocation location = to.native();
  std::size_t first_range = 0;  // the location's ranges start at the first
  const cudaError_t code = discard
                               ? cudaMemDiscardAndPrefetchBatchAsync(addresses.begin(), bytes.begin(), addresses.size(),
                                                                     &location, &first_range, 1, 0, s.get())
                               : cudaMemPrefetchBatchAsync(addresses.begin(), bytes.begin(), addresses.size(),
                                                           &location, &first_range, 1, 0, s.get());
  return check(code, api, discard ? "cudaMemDiscardAndPrefetchBatchAsync" : "cudaMemPrefetchBatchAsync");
#else
  (void)discard;
  for (std::size_t i = 0; i < count; ++i)
    if (sizes[i] != 0) CUDAMEM_TRY(check(prefetch_call(ptrs[i], sizes[i], to.native(), s.get()), api, prefetch_name));
  return {};
#endif
}
template <class T>
status prefetch_views(const span<T, managed>* views, std::size_t count, memory_location to, stream_ref s, bool discard,
                      const char* api) noexcept {
  if (views == nullptr && count != 0)
    return error(errc::invalid_argument, api, "null views with a count of %zu", count);
  vec<const void*> ptrs;
  vec<std::size_t> sizes;
  for (std::size_t i = 0; i < count; ++i) {
    ptrs.push_back(views[i].data().get());
    sizes.push_back(views[i].size_bytes());
  }
  return prefetch_batch(ptrs.begin(), sizes.begin(), count, to, s, discard, api);
}
}  // namespace detail

/// Migrates `view`'s pages to `to` in stream order on `s` (cudaMemPrefetchAsync); does not synchronize, and may be
/// captured where CUDA allows. Empty: nothing. Errors: invalid_argument (moved-from stream, negative NUMA node),
/// out_of_range (no such device), CUDA errors (cudaErrorInvalidDevice where the device lacks concurrent managed
/// access).
template <class T>
[[nodiscard]] status prefetch(span<T, managed> view, memory_location to, stream_ref s) noexcept {
  return detail::prefetch_bytes(view.data().get(), view.size_bytes(), to, s, "prefetch");
}
/// As prefetch(view, to, s), of a whole managed buffer (not a temporary: it would be freed under the prefetch).
template <class T>
[[nodiscard]] status prefetch(const managed_buffer<T>& b, memory_location to, stream_ref s) noexcept {
  return prefetch(b.view(), to, s);
}
template <class T>
status prefetch(const managed_buffer<T>&&, memory_location, stream_ref) = delete;  // keep the managed buffer alive

/// Tells the driver how `view` will be used (cudaMemAdvise): `at` is the location the advice names (CUDA ignores it
/// for read_mostly, unset_read_mostly and unset_preferred_location; cudamem checks it for every advice). Synchronous.
/// Errors: as prefetch, CUDA errors.
template <class T>
[[nodiscard]] status advise(span<T, managed> view, managed_advice advice, memory_location at) noexcept {
  return detail::advise_bytes(view.data().get(), view.size_bytes(), advice, at, "advise");
}
/// As advise(view, advice, at), of a whole managed buffer.
template <class T>
[[nodiscard]] status advise(const managed_buffer<T>& b, managed_advice advice, memory_location at) noexcept {
  return advise(b.view(), advice, at);
}

/// Prefetches `count` views to `to` on `s` as one batch (cudaMemPrefetchBatchAsync, CUDA 13), or prefetch by
/// prefetch (CUDA 12); empty views are skipped. Does not synchronize `s`, but the batch call may return only once the
/// pages have moved (measured on an H200, driver 580: docs/kinds.md); where the thread must not wait, call prefetch
/// per view. Errors: as prefetch; invalid_argument (null views with a count); a CUDA 12 loop stops at the first
/// failure, the earlier prefetches queued.
template <class T>
[[nodiscard]] status prefetch_many(const span<T, managed>* views, std::size_t count, memory_location to,
                                   stream_ref s) noexcept {
  return detail::prefetch_views(views, count, to, s, false, "prefetch_many");
}
/// As prefetch_many, but the views' contents are discarded first (cudaMemDiscardAndPrefetchBatchAsync, CUDA 13):
/// they are indeterminate afterwards, and no page is copied to get there. CUDA 12: prefetch_many (the contents stay,
/// which is one of the allowed outcomes).
template <class T>
[[nodiscard]] status discard_and_prefetch_many(const span<T, managed>* views, std::size_t count, memory_location to,
                                               stream_ref s) noexcept {
  return detail::prefetch_views(views, count, to, s, true, "discard_and_prefetch_many");
}

}  // namespace cudamem
