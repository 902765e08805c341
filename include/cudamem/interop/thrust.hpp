// SPDX-License-Identifier: MIT
/// \file
/// Thrust on cudamem (nvcc only; elsewhere it declares nothing): thrust_allocator and thrust_policy, par_nosync on a
/// stream with temporary storage from a device resource (by default allocator_for(s)), and device spans as Thrust
/// iterators (to_thrust, thrust_begin, thrust_end, from_thrust). Thrust reports errors by throwing, and so does the
/// allocator: the one place cudamem throws. See docs/allocators.md.
///
///     thrust_allocator(s [, resource_ref<device>])   Thrust's temporary storage, ordered on s
///     thrust_policy(s [, resource_ref<device>])      thrust::cuda::par_nosync with that allocator, on s
///     to_thrust(span), thrust_begin(span), thrust_end(span)   thrust::device_ptr<T>
///     from_thrust(device_ptr, count, device_id) -> device_span<T>
#pragma once

#include <cudamem/registry.hpp>
#include <cudamem/span.hpp>

#if defined(__CUDACC__)
#include <thrust/device_ptr.h>
#include <thrust/execution_policy.h>
#include <thrust/system/detail/bad_alloc.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>

namespace cudamem {

/// A Thrust allocator of bytes from a device resource (which must outlive it), ordered on a stream; no synchronizing.
class thrust_allocator {
 public:
  using value_type = char;  ///< Thrust allocates temporary storage as bytes
  /// From the resource registered on `s` (register_allocator), else the stream-ordered pool.
  explicit thrust_allocator(stream_ref s) noexcept : thrust_allocator(s, allocator_for(s)) {}
  /// From `resource`, on `s`.
  thrust_allocator(stream_ref s, resource_ref<device> resource) noexcept : stream_(s), resource_(resource) {}
  /// `bytes` bytes, 256-byte aligned. Throws thrust's bad_alloc if the resource fails (no exceptions: prints, aborts).
  char* allocate(std::ptrdiff_t bytes) {
    auto got = resource_.allocate(stream_, static_cast<std::size_t>(bytes), 256);
    if (got) return static_cast<char*>(*got);
#if defined(__cpp_exceptions)
    throw thrust::system::detail::bad_alloc(got.error().message());
#else
    std::fprintf(stderr, "cudamem::thrust_allocator: %s\n", got.error().message());
    std::abort();
#endif
  }
  /// Gives `p` back to the resource on the stream.
  void deallocate(char* p, std::size_t bytes) noexcept { resource_.deallocate(stream_, p, bytes, 256); }
  [[nodiscard]] stream_ref stream() const noexcept { return stream_; }  ///< The stream it allocates on.
  [[nodiscard]] resource_ref<device> resource() const noexcept { return resource_; }  ///< Where memory comes from.

 private:
  stream_ref stream_;
  resource_ref<device> resource_;
};

/// Thrust's CUDA policy on `s` (par_nosync: an algorithm returning a value still waits), storage from `resource`.
[[nodiscard]] inline auto thrust_policy(stream_ref s, resource_ref<device> resource) noexcept {
  return thrust::cuda::par_nosync(thrust_allocator(s, resource)).on(s.get());
}
/// thrust_policy(s, allocator_for(s)).
[[nodiscard]] inline auto thrust_policy(stream_ref s) noexcept { return thrust_policy(s, allocator_for(s)); }
/// The first element of a device span as a Thrust device pointer (also its begin iterator).
template <class T>
[[nodiscard]] thrust::device_ptr<T> to_thrust(span<T, device> s) noexcept {
  return thrust::device_pointer_cast(s.data().get());
}
/// As to_thrust.
template <class T>
[[nodiscard]] thrust::device_ptr<T> thrust_begin(span<T, device> s) noexcept {
  return to_thrust(s);
}
/// Thrust's end iterator of the span.
template <class T>
[[nodiscard]] thrust::device_ptr<T> thrust_end(span<T, device> s) noexcept {
  return to_thrust(s) + static_cast<std::ptrdiff_t>(s.size());
}
/// Views `count` elements from a Thrust device pointer to device memory on `id` (not checked).
template <class T>
[[nodiscard]] span<T, device> from_thrust(thrust::device_ptr<T> first, std::size_t count, device_id id) noexcept {
  return make_span<device>(thrust::raw_pointer_cast(first), count, id);
}

}  // namespace cudamem
#endif  // __CUDACC__
