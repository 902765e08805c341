// SPDX-License-Identifier: MIT
/// \file
/// Memory resources: where a buffer's memory comes from and goes back to. One resource per kind,
/// with the stream-first interface that CCCL's cuda::mr and RMM settled on, and `resource_ref<K>`,
/// the type-erased handle a buffer keeps so that it frees through the resource it came from.
///
///   concept memory_resource_for<R, K>     R::kind is K; allocate / deallocate as below
///   result<void*> allocate(stream_ref s, std::size_t bytes, std::size_t alignment) noexcept
///   void deallocate(stream_ref s, void* p, std::size_t bytes, std::size_t alignment) noexcept
///   device_malloc_resource   cudaMalloc / cudaFree                  (kind device)
///   device_pool_resource     cudaMallocAsync / cudaFreeAsync on s   (kind device)
///   pinned_resource          cudaMallocHost / cudaFreeHost          (kind pinned)
///   managed_resource         cudaMallocManaged / cudaFree           (kind managed)
///   host_resource            aligned operator new / delete          (kind host)
///   resource_ref<K>          non-owning handle to any resource of kind K
#pragma once

#include <cudamem/detail/capture.hpp>
#include <cudamem/kind.hpp>
#include <cudamem/stream.hpp>

#include <concepts>
#include <cstddef>
#include <new>
#include <type_traits>

namespace cudamem {

/// A memory resource for kind K: allocates `bytes` aligned to `alignment`, ordered on a stream (or
/// ignoring it), and takes them back without failing (a failed release goes to the release
/// handler). It allocates on the current device; buffers make their device current around both.
template <class R, class K>
concept memory_resource_for =
    memory_kind<K> && std::is_same_v<typename R::kind, K> && requires(R& r, stream_ref s, void* p, std::size_t n) {
      { r.allocate(s, n, n) } noexcept -> std::same_as<result<void*>>;
      { r.deallocate(s, p, n, n) } noexcept;
    };

namespace detail {
/// CUDA's allocators align to 256 bytes; a larger alignment cannot be promised.
inline status check_cuda_alignment(std::size_t alignment, const char* api) noexcept {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    return error(errc::invalid_argument, api, "alignment %zu is not a power of two", alignment);
  if (alignment > 256)
    return error(errc::not_supported, api, "alignment %zu exceeds the 256 bytes CUDA allocations guarantee", alignment);
  return {};
}

/// The synchronous CUDA allocators, told apart by their two calls (`Calls`): the alignment check,
/// then the call in relaxed capture mode (an allocation is not part of anyone's capture). The
/// stream is not used.
template <memory_kind K, class Calls>
struct cuda_resource {
  using kind = K;  ///< the kind it serves
  /// Allocates `bytes` on the current device.
  [[nodiscard]] result<void*> allocate(stream_ref, std::size_t bytes, std::size_t alignment) noexcept {
    if (auto ok = check_cuda_alignment(alignment, Calls::allocate_name); !ok) return ok.error();
    relaxed_capture_scope relaxed;
    void* raw = nullptr;
    if (auto ok = check(Calls::allocate(&raw, bytes), nullptr, Calls::allocate_name); !ok) return ok.error();
    return raw;
  }
  /// Frees; a failure goes to the release handler.
  void deallocate(stream_ref, void* p, std::size_t, std::size_t) noexcept {
    relaxed_capture_scope relaxed;
    check_release(Calls::free(p), Calls::free_name);
  }
};

struct malloc_calls {
  static constexpr const char *allocate_name = "cudaMalloc", *free_name = "cudaFree";
  static cudaError_t allocate(void** p, std::size_t bytes) noexcept { return cudaMalloc(p, bytes); }
  static cudaError_t free(void* p) noexcept { return cudaFree(p); }
};
struct host_alloc_calls {
  static constexpr const char *allocate_name = "cudaMallocHost", *free_name = "cudaFreeHost";
  static cudaError_t allocate(void** p, std::size_t bytes) noexcept { return cudaMallocHost(p, bytes); }
  static cudaError_t free(void* p) noexcept { return cudaFreeHost(p); }
};
struct managed_calls {
  static constexpr const char *allocate_name = "cudaMallocManaged", *free_name = "cudaFree";
  static cudaError_t allocate(void** p, std::size_t bytes) noexcept {
    return cudaMallocManaged(p, bytes, cudaMemAttachGlobal);
  }
  static cudaError_t free(void* p) noexcept { return cudaFree(p); }
};
}  // namespace detail

/// cudaMalloc on the current device: usable on every stream at once. Synchronous; cudaFree
/// synchronizes the device.
using device_malloc_resource = detail::cuda_resource<device, detail::malloc_calls>;
static_assert(memory_resource_for<device_malloc_resource, device>);

/// cudaMallocAsync from the pool of the stream's device, ordered on the stream; cudaFreeAsync on the
/// stream given to deallocate. Both can be captured. Errors: not_supported without memory pools.
struct device_pool_resource {
  using kind = device;  ///< the kind it serves
  /// Allocates (see the struct).
  [[nodiscard]] result<void*> allocate(stream_ref s, std::size_t bytes, std::size_t alignment) noexcept {
    constexpr const char* api = "cudaMallocAsync";
    if (auto ok = detail::check_cuda_alignment(alignment, api); !ok) return ok.error();
    if (auto where = s.device(); where) {
      auto pools = detail::cached_attribute<cudaDevAttrMemoryPoolsSupported>(*where, api);
      if (!pools) return pools.error();
      if (*pools == 0)
        return error(errc::not_supported, api, "device %d has no stream-ordered memory pools", where->get());
    }
    void* raw = nullptr;
    if (auto ok = detail::check(cudaMallocAsync(&raw, bytes, s.get()), nullptr, api); !ok) return ok.error();
    return raw;
  }
  /// Frees; a failure goes to the release handler.
  void deallocate(stream_ref s, void* p, std::size_t, std::size_t) noexcept {
    detail::check_release(cudaFreeAsync(p, s.get()), "cudaFreeAsync");
  }
};
static_assert(memory_resource_for<device_pool_resource, device>);

/// cudaMallocHost: page-locked, mapped for every device. Synchronous.
using pinned_resource = detail::cuda_resource<pinned, detail::host_alloc_calls>;
static_assert(memory_resource_for<pinned_resource, pinned>);

/// cudaMallocManaged (attached globally) on the current device. Synchronous.
using managed_resource = detail::cuda_resource<managed, detail::managed_calls>;
static_assert(memory_resource_for<managed_resource, managed>);

/// Aligned operator new: at least 64 bytes (a cache line), more when asked. Needs no device.
struct host_resource {
  using kind = host;  ///< the kind it serves
  /// Allocates (see the struct).
  [[nodiscard]] result<void*> allocate(stream_ref, std::size_t bytes, std::size_t alignment) noexcept {
    if (alignment == 0 || (alignment & (alignment - 1)) != 0)
      return error(errc::invalid_argument, "operator new", "alignment %zu is not a power of two", alignment);
    void* raw = ::operator new(bytes, std::align_val_t{aligned(alignment)}, std::nothrow);
    if (raw == nullptr) return error(errc::out_of_memory, "operator new", "out of host memory (%zu bytes)", bytes);
    return raw;
  }
  /// Frees.
  void deallocate(stream_ref, void* p, std::size_t, std::size_t alignment) noexcept {
    ::operator delete(p, std::align_val_t{aligned(alignment)});
  }

 private:
  static constexpr std::size_t aligned(std::size_t alignment) noexcept { return alignment < 64 ? 64 : alignment; }
};
static_assert(memory_resource_for<host_resource, host>);

/// A non-owning, type-erased handle to a resource of kind K (two pointers). The resource must
/// outlive every handle and every buffer allocated from it.
template <memory_kind K>
class resource_ref {
 public:
  /// The kind the resource serves.
  using kind = K;  ///< the kind it serves

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
  /// Equal when both refer to the same resource object.
  friend bool operator==(resource_ref a, resource_ref b) noexcept { return a.object_ == b.object_; }

 private:
  struct operations {
    result<void*> (*allocate)(void*, stream_ref, std::size_t, std::size_t) noexcept;
    void (*deallocate)(void*, stream_ref, void*, std::size_t, std::size_t) noexcept;
  };
  template <class R>
  static constexpr operations ops_for{[](void* r, stream_ref s, std::size_t n, std::size_t a) noexcept {
                                        return static_cast<R*>(r)->allocate(s, n, a);
                                      },
                                      [](void* r, stream_ref s, void* p, std::size_t n, std::size_t a) noexcept {
                                        static_cast<R*>(r)->deallocate(s, p, n, a);
                                      }};

  void* object_;
  const operations* ops_;
};

namespace detail {
template <class R>
inline R builtin_resource{};
}  // namespace detail

/// The resource a buffer of kind K uses when none is given (device memory: the pool when
/// stream-ordered, else cudaMalloc).
template <memory_kind K>
[[nodiscard]] resource_ref<K> default_resource(bool stream_ordered = false) noexcept {
  if constexpr (std::is_same_v<K, device>) {
    if (stream_ordered) return detail::builtin_resource<device_pool_resource>;
    return detail::builtin_resource<device_malloc_resource>;
  } else if constexpr (std::is_same_v<K, pinned>) {
    return detail::builtin_resource<pinned_resource>;
  } else if constexpr (std::is_same_v<K, managed>) {
    return detail::builtin_resource<managed_resource>;
  } else {
    return detail::builtin_resource<host_resource>;
  }
}

}  // namespace cudamem
