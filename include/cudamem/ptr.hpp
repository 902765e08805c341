/// \file
/// `ptr<T, Kind>`: a typed address that knows its memory kind and device.
#pragma once

#include <cudamem/device.hpp>
#include <cudamem/kind.hpp>

#include <cstddef>
#include <type_traits>

namespace cudamem {

namespace detail {
template <class>
inline constexpr bool always_false = false;

// Which side may touch memory of kind K. Device-only members are __device__, host-only ones
// __host__, and the calls from the wrong side fail to compile; in plain host-compiler builds the
// device-only members do not exist, and a host-side use of device memory hits a static_assert.
template <class K>
concept host_only = K::host_accessible && !K::device_accessible;
template <class K>
concept device_only = K::device_accessible && !K::host_accessible;
template <class K>
concept both_sides = K::device_accessible && K::host_accessible;

}  // namespace detail

// The accessors a typed address or view has, by kind. Expands inside a class with a `T* raw_()`
// member; one place so ptr and span say the same thing.
#if defined(__CUDACC__)
#define CUDAMEM_DETAIL_ACCESSORS(Ret, Params, Body)                                           \
  template <class K_ = Kind>                                                                  \
    requires detail::device_only<K_>                                                          \
  __device__ Ret Params const noexcept Body template <class K_ = Kind>                        \
    requires detail::host_only<K_>                                                            \
  __host__ Ret Params const noexcept Body template <class K_ = Kind>                          \
    requires detail::both_sides<K_>                                                           \
  __host__ __device__ Ret Params const noexcept Body
#else
#define CUDAMEM_DETAIL_ACCESSORS(Ret, Params, Body)                                          \
  template <class K_ = Kind>                                                                 \
    requires K_::host_accessible                                                             \
  Ret Params const noexcept Body template <class K_ = Kind>                                  \
    requires(!K_::host_accessible)                                                           \
  Ret Params const noexcept {                                                                \
    static_assert(detail::always_false<K_>, "cudamem: device memory cannot be read or written on the host; copy it into a host or pinned buffer first (cudamem::copy), or use managed memory"); \
    __builtin_unreachable();                                                                 \
  }
#endif

/// A typed address of memory of kind Kind, on device `device()` (host and pinned memory:
/// device_id::host()). Trivially copyable and passed to kernels by value. Arithmetic counts
/// elements and is unchecked, like a raw pointer's. Dereferencing compiles only on a side that may
/// touch the memory: device memory in device code, pageable host memory in host code, the other
/// kinds in both (in g++ builds, only host code exists).
template <class T, memory_kind Kind>
class ptr {
 public:
  /// T.
  using element_type = T;
  /// The memory kind.
  using kind = Kind;

  /// A null pointer (on device_id::host() for host and pinned memory, else on device 0).
  CUDAMEM_HD constexpr ptr() noexcept : raw_(nullptr), device_(default_device()) {}
  /// Wraps `raw`, which the caller asserts is memory of kind Kind on device `id`.
  CUDAMEM_HD constexpr ptr(T* raw, device_id id) noexcept : raw_(raw), device_(id) {}
  /// Wraps `raw`, host or pinned memory, on device_id::host(): host memory has no device to name.
  CUDAMEM_HD constexpr explicit ptr(T* raw) noexcept requires(std::is_same_v<Kind, host> || std::is_same_v<Kind, pinned>)
      : raw_(raw), device_(device_id::host()) {}
  /// Adds const, or widens pinned to host.
  template <class U, class K2>
    requires(std::is_convertible_v<U (*)[], T (*)[]> && kind_convertible<K2, Kind> &&
             !(std::is_same_v<U, T> && std::is_same_v<K2, Kind>))
  CUDAMEM_HD constexpr ptr(ptr<U, K2> other) noexcept : raw_(other.get()), device_(other.device()) {}

  /// The raw address.
  CUDAMEM_HD constexpr T* get() const noexcept { return raw_; }
  /// The device the memory lives on (device_id::host() for host and pinned memory).
  CUDAMEM_HD constexpr device_id device() const noexcept { return device_; }
  /// True when not null.
  CUDAMEM_HD constexpr explicit operator bool() const noexcept { return raw_ != nullptr; }

  /// The element it points to. Compiles only where Kind may be touched (see the class comment).
  CUDAMEM_DETAIL_ACCESSORS(T&, operator*(), { return *raw_; })
  /// The raw address, for member access. Compiles only where Kind may be touched.
  CUDAMEM_DETAIL_ACCESSORS(T*, operator->(), { return raw_; })
  /// The element `i` positions away; unchecked. Compiles only where Kind may be touched.
  CUDAMEM_DETAIL_ACCESSORS(T&, operator[]([[maybe_unused]] std::ptrdiff_t i), { return raw_[i]; })

  /// Advances by `n` elements.
  CUDAMEM_HD constexpr ptr& operator+=(std::ptrdiff_t n) noexcept { raw_ += n; return *this; }
  /// Moves back by `n` elements.
  CUDAMEM_HD constexpr ptr& operator-=(std::ptrdiff_t n) noexcept { raw_ -= n; return *this; }
  /// Advances by one element.
  CUDAMEM_HD constexpr ptr& operator++() noexcept { ++raw_; return *this; }
  /// Moves back by one element.
  CUDAMEM_HD constexpr ptr& operator--() noexcept { --raw_; return *this; }
  /// Advances by one element; returns the old value.
  CUDAMEM_HD constexpr ptr operator++(int) noexcept { ptr old = *this; ++raw_; return old; }
  /// Moves back by one element; returns the old value.
  CUDAMEM_HD constexpr ptr operator--(int) noexcept { ptr old = *this; --raw_; return old; }
  /// `p` advanced by `n` elements, on the same device.
  CUDAMEM_HD friend constexpr ptr operator+(ptr p, std::ptrdiff_t n) noexcept { return p += n; }
  /// `p` advanced by `n` elements, on the same device.
  CUDAMEM_HD friend constexpr ptr operator+(std::ptrdiff_t n, ptr p) noexcept { return p += n; }
  /// `p` moved back by `n` elements, on the same device.
  CUDAMEM_HD friend constexpr ptr operator-(ptr p, std::ptrdiff_t n) noexcept { return p -= n; }
  /// Elements between two addresses of one allocation.
  CUDAMEM_HD friend constexpr std::ptrdiff_t operator-(ptr a, ptr b) noexcept { return a.raw_ - b.raw_; }
  /// Equal when both the address and the device are.
  CUDAMEM_HD friend constexpr bool operator==(ptr a, ptr b) noexcept { return a.raw_ == b.raw_ && a.device_ == b.device_; }
  ///@{
  /// Orders by address, then by device (consistent with ==); meaningful within one allocation.
  /// Usable in kernels.
  CUDAMEM_HD friend constexpr bool operator<(ptr a, ptr b) noexcept {
    return a.raw_ != b.raw_ ? a.raw_ < b.raw_ : a.device_.get() < b.device_.get();
  }
  CUDAMEM_HD friend constexpr bool operator>(ptr a, ptr b) noexcept { return b < a; }
  CUDAMEM_HD friend constexpr bool operator<=(ptr a, ptr b) noexcept { return !(b < a); }
  CUDAMEM_HD friend constexpr bool operator>=(ptr a, ptr b) noexcept { return !(a < b); }
  ///@}

 private:
  CUDAMEM_HD static constexpr device_id default_device() noexcept {
    return (std::is_same_v<Kind, host> || std::is_same_v<Kind, pinned>) ? device_id::host() : device_id(0);
  }
  T* raw_;
  device_id device_;
};

/// An address of device memory.
template <class T>
using device_ptr = ptr<T, device>;
/// An address of page-locked host memory.
template <class T>
using pinned_ptr = ptr<T, pinned>;
/// An address of pageable host memory.
template <class T>
using host_ptr = ptr<T, host>;
/// An address of managed memory.
template <class T>
using managed_ptr = ptr<T, managed>;

}  // namespace cudamem
