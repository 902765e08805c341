// SPDX-License-Identifier: MIT
/// \file
/// `host_pool_resource`: a stream-ordered memory pool of page-locked host memory (cudaMemPoolCreate at a host
/// location, or at one host NUMA node), as a resource of kind pinned: pinned buffers allocated and freed in stream
/// order, without cudaMallocHost's synchronization. Where the driver has no host pools: errc::not_supported.
/// Not in the umbrella header: include <cudamem/host_pool.hpp>. Guide: docs/allocators.md, "Host-located pools".
///
///     host_pool_resource::create([memory_location::host() | host_numa(n)] [, device_id reader])  result<...>
///       allocate(stream_ref, bytes, alignment) -> result<void*>   cudaMallocFromPoolAsync, stream-ordered
///       deallocate(stream_ref, p, bytes, alignment)                cudaFreeAsync on the stream given
///       native_handle(), location(); move-only; == when the pool is the same
#pragma once

#include <cudamem/detail/capture.hpp>
#include <cudamem/detail/unique_handle.hpp>
#include <cudamem/location.hpp>
#include <cudamem/resource.hpp>

#include <cstddef>

namespace cudamem {

namespace detail {
// cudaDevAttrHostMemoryPoolsSupported (144) and cudaDevAttrHostNumaMemoryPoolsSupported (142) by value: CUDA 12's
// older headers lack the first; a driver that does not know one answers with an error, read as "no".
inline bool host_pools_supported(device_id id, bool numa) noexcept {
  int supported = 0;
  const cudaError_t earlier = cudaPeekAtLastError();
  const cudaError_t code = cudaDeviceGetAttribute(&supported, static_cast<cudaDeviceAttr>(numa ? 142 : 144), id.get());
  if (code != cudaSuccess && earlier == cudaSuccess && !error::is_sticky_status(code)) (void)cudaGetLastError();
  return code == cudaSuccess && supported != 0;
}
}  // namespace detail

/// Page-locked host memory from a pool of its own, allocated and freed in stream order (both capturable), readable
/// and writable on the host and from the reader device given at creation. Owns the pool (destroyed with it, after
/// every allocation is freed); move-only. Equal when two refer to one pool.
class host_pool_resource {
 public:
  using kind = pinned;  ///< The kind it serves.

  /// A pool at `where` (host() or host_numa(node)), its memory opened to `reader` (kernels there
  /// read and write it). Synchronous. Errors: invalid_argument (a device location, a negative node), out_of_range (no
  /// such device), not_supported (the driver or device has no host-located pools of that kind), CUDA errors.
  [[nodiscard]] static result<host_pool_resource> create(memory_location where, device_id reader) noexcept {
    constexpr const char* api = "host_pool_resource::create";
    if (where.is_device())
      return error(errc::invalid_argument, api, "a host pool needs a host location, not device %d", where.id());
    if (where.type() == cudaMemLocationTypeHostNumaCurrent)  // CUDA refuses it for pools: name the node
      return error(errc::invalid_argument, api, "a host pool needs host() or host_numa(node), not host_numa_current()");
    CUDAMEM_TRY(detail::check_location(where, api));
    CUDAMEM_TRY(detail::check_device(reader, api));
    const bool numa = where.type() != cudaMemLocationTypeHost;
    if (!detail::host_pools_supported(reader, numa))
      return error(errc::not_supported, api, "device %d has no stream-ordered pools at host%s locations", reader.get(),
                   numa ? " NUMA" : "");
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location = where.native();
    detail::relaxed_capture_scope relaxed;
    cudaMemPool_t raw = nullptr;
    CUDAMEM_TRY(detail::check(cudaMemPoolCreate(&raw, &props), api, "cudaMemPoolCreate"));
    host_pool_resource made(raw, where);
    const cudaMemAccessDesc access{{cudaMemLocationTypeDevice, reader.get()}, cudaMemAccessFlagsProtReadWrite};
    CUDAMEM_TRY(detail::check(cudaMemPoolSetAccess(raw, &access, 1), api, "cudaMemPoolSetAccess"));
    return made;
  }
  /// As create(where, reader), read from the current device.
  [[nodiscard]] static result<host_pool_resource> create(memory_location where = memory_location::host()) noexcept {
    auto current = current_device();
    if (!current) return current.error().with_api("host_pool_resource::create");
    return create(where, *current);
  }

  /// `bytes` from the pool, ordered on `s` (cudaMallocFromPoolAsync). Errors: invalid_argument (moved from, bad
  /// alignment), not_supported (alignment > 256), CUDA errors.
  [[nodiscard]] result<void*> allocate(stream_ref s, std::size_t bytes, std::size_t alignment) noexcept {
    return detail::allocate_from_pool(pool_.valid() ? pool_.get() : nullptr, s, bytes, alignment, "host_pool_resource",
                                      -1);
  }
  /// Frees on `s` (cudaFreeAsync); failures go to the release handler.
  void deallocate(stream_ref s, void* p, std::size_t, std::size_t) noexcept {
    detail::check_release(cudaFreeAsync(p, s.get()), "cudaFreeAsync");
  }
  [[nodiscard]] cudaMemPool_t native_handle() const noexcept { return pool_.get(); }  ///< The pool (null: moved).
  [[nodiscard]] memory_location location() const noexcept { return where_; }  ///< Where its memory lives.
  /// The same pool: either frees what the other allocated.
  friend bool operator==(const host_pool_resource& a, const host_pool_resource& b) noexcept {
    return a.pool_.get() == b.pool_.get();
  }

 private:
  host_pool_resource(cudaMemPool_t pool, memory_location where) noexcept : pool_(pool), where_(where) {}
  detail::unique_handle<detail::mem_pool_handle> pool_;
  memory_location where_ = memory_location::host();
};
static_assert(memory_resource_for<host_pool_resource, pinned>);

}  // namespace cudamem
