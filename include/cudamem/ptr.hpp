// SPDX-License-Identifier: MIT
/// \file
/// `ptr<T, Kind>`: a typed address that knows its memory kind and device.
///
///     ptr<T, Kind>(raw, device_id), ptr<T, Kind>(raw) (host, pinned)   unchecked; trivially copyable
///       get(), device(), explicit bool, *p, p[i], p->m (where Kind may be touched), +, -, ++, --, ==, <
///       converts to add const, or pinned to host; never the reverse
///     device_ptr<T>, pinned_ptr<T>, host_ptr<T>, managed_ptr<T>
#pragma once

#include <cudamem/detail/device_id.hpp>
#include <cudamem/kind.hpp>

#include <cstddef>
#include <type_traits>

namespace cudamem {

// Accessors of classes with a `Kind` (ptr, span): __device__, __host__ or both as it allows; g++: host code only.
#if defined(__CUDACC__)
#define CUDAMEM_DETAIL_ACCESSORS(Ret, Params, Body)                    \
  template <class K_ = Kind>                                           \
    requires(!K_::host_accessible)                                     \
  __device__ Ret Params const noexcept Body template <class K_ = Kind> \
    requires(!K_::device_accessible)                                   \
  __host__ Ret Params const noexcept Body template <class K_ = Kind>   \
    requires(K_::host_accessible && K_::device_accessible)             \
  __host__ __device__ Ret Params const noexcept Body
#else
#define CUDAMEM_DETAIL_ACCESSORS(Ret, Params, Body)                                                    \
  template <class K_ = Kind>                                                                           \
  Ret Params const noexcept {                                                                          \
    static_assert(K_::host_accessible,                                                                 \
                  "cudamem: device memory cannot be read or written on the host; copy it into a host " \
                  "or pinned buffer first (cudamem::copy), or use managed memory");                    \
    Body                                                                                               \
  }
#endif

/// A typed address of kind Kind on `device()` (host() for host and pinned), passed to kernels by value; dereferencing
/// compiles only where the memory may be touched: device memory in device code, host memory in host code.
template <class T, memory_kind Kind>
class ptr {
  static constexpr bool on_host = std::is_same_v<Kind, host> || std::is_same_v<Kind, pinned>;

 public:
  using element_type = T;  ///< T.
  using kind = Kind;       ///< The memory kind.
  constexpr ptr() noexcept = default;  ///< Null, on device_id::host() for host and pinned memory, else on device 0.
  CUDAMEM_HD constexpr ptr(T* raw, device_id id) noexcept : raw_(raw), device_(id) {}  ///< Unchecked: Kind on `id`.
  /// Wraps `raw`, host or pinned memory, on device_id::host().
  CUDAMEM_HD constexpr explicit ptr(T* raw) noexcept
    requires on_host
      : raw_(raw), device_(device_id::host()) {}
  /// Adds const, or widens pinned to host.
  template <class U, class K2>
    requires(std::is_convertible_v<U (*)[], T (*)[]> && kind_convertible<K2, Kind> && !std::is_same_v<ptr<U, K2>, ptr>)
  CUDAMEM_HD constexpr ptr(ptr<U, K2> other) noexcept : raw_(other.get()), device_(other.device()) {}
  CUDAMEM_HD constexpr T* get() const noexcept { return raw_; }  ///< The raw address.
  CUDAMEM_HD constexpr device_id device() const noexcept { return device_; }  ///< Where the memory lives.
  CUDAMEM_HD constexpr explicit operator bool() const noexcept { return raw_ != nullptr; }  ///< True when not null.
  CUDAMEM_DETAIL_ACCESSORS(T&, operator*(), { return *raw_; })  ///< The element.
  CUDAMEM_DETAIL_ACCESSORS(T*, operator->(), { return raw_; })  ///< For member access.
  CUDAMEM_DETAIL_ACCESSORS(T&, operator[]([[maybe_unused]] std::ptrdiff_t i), { return raw_[i]; })  ///< Unchecked.
  ///@{
  /// Arithmetic in elements, unchecked, as a raw pointer's; the device stays. `a - b` counts the elements between.
  CUDAMEM_HD friend constexpr ptr operator+(ptr p, std::ptrdiff_t n) noexcept { return ptr(p.raw_ + n, p.device_); }
  CUDAMEM_HD friend constexpr ptr operator+(std::ptrdiff_t n, ptr p) noexcept { return p + n; }
  CUDAMEM_HD friend constexpr ptr operator-(ptr p, std::ptrdiff_t n) noexcept { return ptr(p.raw_ - n, p.device_); }
  CUDAMEM_HD friend constexpr std::ptrdiff_t operator-(ptr a, ptr b) noexcept { return a.raw_ - b.raw_; }
  CUDAMEM_HD constexpr ptr& operator+=(std::ptrdiff_t n) noexcept { return *this = *this + n; }
  CUDAMEM_HD constexpr ptr& operator-=(std::ptrdiff_t n) noexcept { return *this = *this - n; }
  CUDAMEM_HD constexpr ptr& operator++() noexcept { return *this += 1; }
  CUDAMEM_HD constexpr ptr& operator--() noexcept { return *this -= 1; }
  CUDAMEM_HD constexpr ptr operator++(int) noexcept { return ptr(raw_++, device_); }
  CUDAMEM_HD constexpr ptr operator--(int) noexcept { return ptr(raw_--, device_); }
  ///@}
  ///@{
  /// Equal when the address and the device are; ordered by address, then device (meaningful in one allocation).
  friend constexpr bool operator==(ptr, ptr) noexcept = default;
  CUDAMEM_HD friend constexpr bool operator<(ptr a, ptr b) noexcept {
    return a.raw_ != b.raw_ ? a.raw_ < b.raw_ : a.device_.get() < b.device_.get();
  }
  CUDAMEM_HD friend constexpr bool operator>(ptr a, ptr b) noexcept { return b < a; }
  CUDAMEM_HD friend constexpr bool operator<=(ptr a, ptr b) noexcept { return !(b < a); }
  CUDAMEM_HD friend constexpr bool operator>=(ptr a, ptr b) noexcept { return !(a < b); }
  ///@}

 private:
  T* raw_ = nullptr;
  device_id device_ = on_host ? device_id::host() : device_id(0);
};

template <class T>
using device_ptr = ptr<T, device>;  ///< An address of device memory.
template <class T>
using pinned_ptr = ptr<T, pinned>;  ///< An address of page-locked host memory.
template <class T>
using host_ptr = ptr<T, host>;  ///< An address of pageable host memory.
template <class T>
using managed_ptr = ptr<T, managed>;  ///< An address of managed memory.

}  // namespace cudamem
