// SPDX-License-Identifier: MIT
/// \file
/// Memory resources (the stream-first interface of CCCL's cuda::mr and RMM) and `resource_ref<K>`, which buffers keep.
///
///     memory_resource_for<R, K>            allocate(stream_ref, bytes, alignment) -> result<void*>; deallocate
///     device_malloc_resource, pinned_resource, managed_resource   cudaMalloc, cudaMallocHost, cudaMallocManaged
///     device_pool_resource                 cudaMallocAsync on the stream's device, stream-ordered
///     host_resource                        aligned operator new
///     resource_ref<K>(r)                   non-owning, two pointers; allocate, deallocate, ==
///     default_resource<K>([stream_ordered])   what a buffer uses when given none
///     Resources compare equal when either can free what the other allocated: stateless ones always.
///     Out of memory: the error's oom() has the figures (request, device free/total, pool, graphs).
#pragma once

#include <cudamem/detail/capture.hpp>
#include <cudamem/detail/out_of_memory.hpp>
#include <cudamem/detail/process_wide.hpp>
#include <cudamem/kind.hpp>
#include <cudamem/stream.hpp>

#include <concepts>
#include <cstddef>
#include <new>
#include <type_traits>

namespace cudamem {

/// A memory resource for kind K: allocates `bytes` aligned to `alignment` on the current device (buffers make theirs
/// current), ordered on a stream or ignoring it, and takes them back without failing (else: the release handler).
template <class R, class K>
concept memory_resource_for =
    memory_kind<K> && std::is_same_v<typename R::kind, K> && requires(R& r, stream_ref s, void* p, std::size_t n) {
      { r.allocate(s, n, n) } noexcept -> std::same_as<result<void*>>;
      { r.deallocate(s, p, n, n) } noexcept;
    };

namespace detail {
/// Succeeds for a power of two; CUDA's allocators (`cuda`) align to 256 bytes, so a larger one cannot be promised.
inline status check_alignment(std::size_t alignment, const char* api, bool cuda = true) noexcept {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    return error(errc::invalid_argument, api, "alignment %zu is not a power of two", alignment);
  if (cuda && alignment > 256)
    return error(errc::not_supported, api, "alignment %zu exceeds the 256 bytes CUDA allocations guarantee", alignment);
  return {};
}
/// not_supported where device `id` has no stream-ordered memory pools (cudaMallocAsync's).
inline status require_memory_pools(device_id id, const char* api) noexcept {
  auto pools = cached_attribute<cudaDevAttrMemoryPoolsSupported>(id, api);
  if (!pools) return pools.error();
  if (*pools == 0) return error(errc::not_supported, api, "device %d has no stream-ordered memory pools", id.get());
  return {};
}
/// cudaMalloc, cudaMallocHost or cudaMallocManaged: synchronous, in relaxed capture mode (in no one's capture).
template <memory_kind K>
struct cuda_resource {
  using kind = K;
  [[nodiscard]] result<void*> allocate(stream_ref, std::size_t bytes, std::size_t alignment) noexcept {
    CUDAMEM_TRY(check_alignment(alignment, allocate_name));
    relaxed_capture_scope relaxed;
    void* raw = nullptr;
    const cudaError_t code = is_pinned    ? cudaMallocHost(&raw, bytes)
                             : is_managed ? cudaMallocManaged(&raw, bytes, cudaMemAttachGlobal)
                                          : cudaMalloc(&raw, bytes);
    if (code != cudaSuccess) [[unlikely]]
      return with_device_figures(check(code, nullptr, allocate_name).error(), bytes,
                                 is_pinned ? -1 : current_ordinal());
    return raw;
  }
  void deallocate(stream_ref, void* p, std::size_t, std::size_t) noexcept {
    relaxed_capture_scope relaxed;
    if constexpr (is_pinned) check_release(cudaFreeHost(p), "cudaFreeHost");
    else check_release(cudaFree(p), "cudaFree");
  }
  friend bool operator==(const cuda_resource&, const cuda_resource&) noexcept = default;  // stateless: all equal

 private:
  static constexpr bool is_pinned = std::is_same_v<K, pinned>, is_managed = std::is_same_v<K, managed>;
  static constexpr const char* allocate_name = is_pinned    ? "cudaMallocHost"
                                               : is_managed ? "cudaMallocManaged"
                                                            : "cudaMalloc";
};
// The objects default_resource refers to live in process-wide storage: one per resource in the process, whichever
// shared library asks (a variable of a type a library hides would be one per library, comparing unequal across them,
// and a buffer would keep a pointer into a library that may be unloaded first). They are empty, so their address is
// all there is to them (resource_ref compares addresses), and making one anew in its bytes changes nothing.
struct CUDAMEM_DETAIL_PROCESS_WIDE builtin_resources {
  unsigned char bytes[4][2];  // per kind_id: the cuda_resource, the other (device: device_pool_resource; host)
};
template <class R>
R& builtin_resource() noexcept {
  static_assert(std::is_empty_v<R> && std::is_trivially_default_constructible_v<R> &&
                std::is_trivially_destructible_v<R>);
  using K = typename R::kind;
  unsigned char(&slots)[2] = process_wide<builtin_resources>().bytes[static_cast<int>(kind_id_of<K>)];
  return *::new (static_cast<void*>(&slots[std::is_same_v<R, cuda_resource<K>> ? 0 : 1])) R;
}
}  // namespace detail

/// cudaMalloc on the current device: usable on every stream at once. Synchronous; cudaFree synchronizes the device.
using device_malloc_resource = detail::cuda_resource<device>;
using pinned_resource = detail::cuda_resource<pinned>;    ///< cudaMallocHost (mapped for every device), synchronous.
using managed_resource = detail::cuda_resource<managed>;  ///< cudaMallocManaged (attached globally), synchronous.
static_assert(memory_resource_for<device_malloc_resource, device> && memory_resource_for<pinned_resource, pinned> &&
              memory_resource_for<managed_resource, managed>);

/// cudaMallocAsync from the pool of the stream's device, ordered on the stream; cudaFreeAsync on the stream given to
/// deallocate. Both can be captured. Errors: not_supported without memory pools.
struct device_pool_resource {
  using kind = device;  ///< The kind it serves.
  /// Allocates (see the struct).
  [[nodiscard]] result<void*> allocate(stream_ref s, std::size_t bytes, std::size_t alignment) noexcept {
    constexpr const char* api = "cudaMallocAsync";
    CUDAMEM_TRY(detail::check_alignment(alignment, api));
    if (auto where = s.device()) CUDAMEM_TRY(detail::require_memory_pools(*where, api));
    void* raw = nullptr;
    if (const cudaError_t code = cudaMallocAsync(&raw, bytes, s.get()); code != cudaSuccess) [[unlikely]]
      return failed(detail::check(code, nullptr, api).error(), s, bytes);
    return raw;
  }
  /// Frees (failures: release handler).
  void deallocate(stream_ref s, void* p, std::size_t, std::size_t) noexcept {
    detail::check_release(cudaFreeAsync(p, s.get()), "cudaFreeAsync");
  }
  /// Stateless: any two are equal (either frees what the other allocated).
  friend bool operator==(const device_pool_resource&, const device_pool_resource&) noexcept = default;

 private:
  [[gnu::cold, gnu::noinline]] static error failed(const error& failure, stream_ref s, std::size_t bytes) noexcept {
    if (!detail::is_out_of_memory(failure)) return failure;
    auto where = s.device();  // a capturing stream given without its device: the current one
    return detail::with_device_figures(failure, bytes, where ? where->get() : detail::current_ordinal());
  }
};
static_assert(memory_resource_for<device_pool_resource, device>);

namespace detail {
/// A cudaMemPool_t that a resource owns (host_pool_resource, ipc_pool, imported_pool), for unique_handle. Allocations
/// still out keep the pool's memory until they are freed (CUDA's rule): destroying it early is safe.
struct mem_pool_handle {
  using type = cudaMemPool_t;
  static type empty() noexcept { return nullptr; }
  static void release(type pool) noexcept {
    relaxed_capture_scope relaxed;  // a destructor's synchronous call: no part of a capture elsewhere
    check_release(cudaMemPoolDestroy(pool), "cudaMemPoolDestroy");
  }
};
/// cudaMallocFromPoolAsync from a pool a resource owns (host_pool_resource, ipc_pool), ordered on `s`: `owner` names
/// the resource in the error for a moved-from one (null pool). An out-of-memory failure carries the figures of
/// `device` (-1: the request alone, as for host memory).
inline result<void*> allocate_from_pool(cudaMemPool_t pool, stream_ref s, std::size_t bytes, std::size_t alignment,
                                        const char* owner, int device) noexcept {
  constexpr const char* api = "cudaMallocFromPoolAsync";
  if (pool == nullptr) return handle_moved_from(api, owner);
  CUDAMEM_TRY(check_alignment(alignment, api));
  void* raw = nullptr;
  if (const cudaError_t code = cudaMallocFromPoolAsync(&raw, bytes, pool, s.get()); code != cudaSuccess) [[unlikely]]
    return with_device_figures(check(code, nullptr, api).error(), bytes, device);
  return raw;
}
}  // namespace detail

/// Aligned operator new: at least 64 bytes (a cache line), more when asked. Needs no device.
struct host_resource {
  using kind = host;  ///< The kind it serves.
  /// Allocates.
  [[nodiscard]] result<void*> allocate(stream_ref, std::size_t bytes, std::size_t alignment) noexcept {
    CUDAMEM_TRY(detail::check_alignment(alignment, "operator new", false));
    void* raw = ::operator new(bytes, std::align_val_t{aligned(alignment)}, std::nothrow);
    if (raw == nullptr) [[unlikely]]
      return detail::with_device_figures(error(errc::out_of_memory, "operator new", "out of host memory"), bytes, -1);
    return raw;
  }
  /// Frees.
  void deallocate(stream_ref, void* p, std::size_t, std::size_t alignment) noexcept {
    ::operator delete(p, std::align_val_t{aligned(alignment)});
  }
  /// Stateless: any two are equal (either frees what the other allocated).
  friend bool operator==(const host_resource&, const host_resource&) noexcept = default;

 private:
  static constexpr std::size_t aligned(std::size_t alignment) noexcept { return alignment < 64 ? 64 : alignment; }
};
static_assert(memory_resource_for<host_resource, host>);

/// A non-owning, type-erased handle (two pointers) to a resource of kind K, which must outlive it and its buffers.
template <memory_kind K>
class resource_ref {
 public:
  using kind = K;  ///< The kind it serves.

  /// Refers to `resource`, which must serve kind K (a resource of another kind does not compile).
  template <class R>
    requires(!std::is_same_v<std::remove_cv_t<R>, resource_ref> && memory_resource_for<R, K>)
  resource_ref(R& resource) noexcept : object_(&resource), ops_(&ops_for<R>) {}
  /// As the resource's allocate.
  [[nodiscard]] result<void*> allocate(stream_ref s, std::size_t bytes, std::size_t alignment) const noexcept {
    return ops_->allocate(object_, s, bytes, alignment);
  }
  /// As the resource's deallocate.
  void deallocate(stream_ref s, void* p, std::size_t bytes, std::size_t alignment) const noexcept {
    ops_->deallocate(object_, s, p, bytes, alignment);
  }
  /// True for a resource with `static constexpr bool selects_device = true`: it makes a stream's device current itself.
  [[nodiscard]] bool selects_device() const noexcept { return ops_->selects_device; }
  /// The same object, or two of one type that its operator== finds equal (two stateless resources of a type are).
  friend bool operator==(resource_ref a, resource_ref b) noexcept {
    return a.object_ == b.object_ || (a.ops_ == b.ops_ && a.ops_->equal(a.object_, b.object_));
  }

 private:
  struct operations {
    result<void*> (*allocate)(void*, stream_ref, std::size_t, std::size_t) noexcept;
    void (*deallocate)(void*, stream_ref, void*, std::size_t, std::size_t) noexcept;
    bool selects_device;
    bool (*equal)(const void*, const void*) noexcept;  // two objects of one type; without operator==: identity
  };
  template <class R>
  static constexpr operations ops_for{
      [](void* r, auto... args) noexcept { return static_cast<R*>(r)->allocate(args...); },
      [](void* r, auto... args) noexcept { static_cast<R*>(r)->deallocate(args...); },
      (requires { requires R::selects_device; }),
      [](const void* a, const void* b) noexcept {
        if constexpr (std::equality_comparable<R>) return *static_cast<const R*>(a) == *static_cast<const R*>(b);
        else return a == b;
      }};

  void* object_;
  const operations* ops_;
};
static_assert(memory_resource_for<resource_ref<device>, device>);

/// The resource a buffer of kind K uses when none is given (device: the pool if stream-ordered, else cudaMalloc).
template <memory_kind K>
[[nodiscard]] resource_ref<K> default_resource(bool stream_ordered = false) noexcept {
  if constexpr (std::is_same_v<K, host>) return detail::builtin_resource<host_resource>();
  else if constexpr (std::is_same_v<K, device>)
    return stream_ordered ? resource_ref<K>(detail::builtin_resource<device_pool_resource>())
                          : resource_ref<K>(detail::builtin_resource<device_malloc_resource>());
  else return detail::builtin_resource<detail::cuda_resource<K>>();
}

}  // namespace cudamem
