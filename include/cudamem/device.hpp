// SPDX-License-Identifier: MIT
/// \file
/// Devices: `device_id`, the current device, the RAII `device_guard`, and cached `max_pitch` and `compute_capability`.
///
///     device_id(ordinal), device_id::host(); get(), is_host()    an ordinal, trivially copyable, ==
///     result<int> device_count();  result<device_id> current_device();  status set_current_device(id)
///     device_guard::set(id), device_guard::keep_current()        RAII: the previous device comes back
///     result<std::size_t> max_pitch(id);  result<int> compute_capability(id)   cached per device
#pragma once

#include <cudamem/detail/device_id.hpp>
#include <cudamem/detail/unique_handle.hpp>
#include <cudamem/error.hpp>

#include <cstddef>
#include <type_traits>

namespace cudamem {

/// The number of visible devices. Errors: cudaGetDeviceCount's (cudaErrorNoDevice, cudaErrorInsufficientDriver, ...).
[[nodiscard]] inline result<int> device_count() noexcept {
  int count = 0;
  CUDAMEM_TRY(detail::check(cudaGetDeviceCount(&count), "device_count", "cudaGetDeviceCount"));
  return count;
}
/// The calling thread's current device. Errors: CUDA errors (no device, no driver).
[[nodiscard]] inline result<device_id> current_device() noexcept {
  int ordinal = 0;
  CUDAMEM_TRY(detail::check(cudaGetDevice(&ordinal), "current_device", "cudaGetDevice"));
  return device_id(ordinal);
}

namespace detail {
inline status check_device(device_id id, const char* api) noexcept {  // out_of_range unless `id` names a device
  auto count = device_count();
  if (!count) return error(count.error().cuda_status(), api, "cudaGetDeviceCount");
  if (id.get() < 0 || id.get() >= *count)
    return error(errc::out_of_range, api, "device %d out of range (%d devices)", id.get(), *count);
  return {};
}
struct device_restore {  // what a device_guard owns: the ordinal to make current again, or cudaInvalidDeviceId
  using type = int;
  static int empty() noexcept { return cudaInvalidDeviceId; }
  static void release(int ordinal) noexcept { check_release(cudaSetDevice(ordinal), "cudaSetDevice"); }
};
/// get(): one int per `Tag` and ordinal < max_devices, from `read(ordinal)` until it succeeds; racers store the same.
template <class Tag>
struct per_device_cache {
  static constexpr int max_devices = 64;
  static inline long long slots[max_devices] = {};  // a known value v as (1 << 32) | v, one atomic word; 0: unknown
  template <class Read>
  static result<int> get(int ordinal, Read&& read) noexcept {
    const bool cacheable = ordinal >= 0 && ordinal < max_devices;
    if (const long long slot = cacheable ? __atomic_load_n(&slots[ordinal], __ATOMIC_RELAXED) : 0; slot != 0)
      return static_cast<int>(slot);
    result<int> value = read(ordinal);
    if (value && cacheable)
      __atomic_store_n(&slots[ordinal], (1ll << 32) | static_cast<unsigned>(*value), __ATOMIC_RELAXED);
    return value;
  }
};
/// An attribute of a device, read once and cached. Errors: out_of_range; CUDA errors.
template <cudaDeviceAttr Attribute>
inline result<int> cached_attribute(device_id id, const char* api) noexcept {
  using cache = per_device_cache<std::integral_constant<cudaDeviceAttr, Attribute>>;
  return cache::get(id.get(), [api](int ordinal) noexcept -> result<int> {
    CUDAMEM_TRY(check_device(device_id(ordinal), api));
    int value = 0;
    CUDAMEM_TRY(check(cudaDeviceGetAttribute(&value, Attribute, ordinal), api, "cudaDeviceGetAttribute"));
    return value;
  });
}
}  // namespace detail

/// Makes `id` current for the calling thread. Errors: out_of_range (`id` names no device); CUDA errors.
[[nodiscard]] inline status set_current_device(device_id id) noexcept {
  CUDAMEM_TRY(detail::check_device(id, "set_current_device"));
  return detail::check(cudaSetDevice(id.get()), "set_current_device", "cudaSetDevice");
}

/// RAII: makes a device current and restores the previous one when it goes (failing: the release handler); move-only.
class device_guard {
 public:
  /// Makes `id` current (restoring nothing if it already was). Errors (nothing changed): out_of_range; CUDA's.
  [[nodiscard]] static result<device_guard> set(device_id id) noexcept {
    int previous = 0;
    CUDAMEM_TRY(detail::check(cudaGetDevice(&previous), "device_guard::set", "cudaGetDevice"));
    if (previous == id.get()) return device_guard(previous, false);
    if (auto made = set_current_device(id); !made) return made.error().with_api("device_guard::set");
    return device_guard(previous, true);
  }
  /// A guard that keeps the current device and restores nothing. Errors: CUDA errors (no device, no driver).
  [[nodiscard]] static result<device_guard> keep_current() noexcept {
    auto current = current_device();
    if (!current) return current.error().with_api("device_guard::keep_current");
    return device_guard(current->get(), false);
  }
  [[nodiscard]] device_id previous() const noexcept { return previous_; }  ///< Current before; restored if switched.

 private:
  device_guard(int previous, bool switched) noexcept
      : previous_(previous), restore_(switched ? previous : detail::device_restore::empty()) {}
  device_id previous_;
  detail::unique_handle<detail::device_restore> restore_;
};

/// The largest pitch a 2D copy may use on `id` (cudaDevAttrMaxPitch, unenforced), cached. Errors: out_of_range, CUDA.
[[nodiscard]] inline result<std::size_t> max_pitch(device_id id) noexcept {
  auto value = detail::cached_attribute<cudaDevAttrMaxPitch>(id, "max_pitch");
  return value ? result<std::size_t>(static_cast<unsigned>(*value)) : value.error();
}
/// The compute capability of `id` as major * 10 + minor (90 on Hopper), cached per device. Errors: as max_pitch.
[[nodiscard]] inline result<int> compute_capability(device_id id) noexcept {
  auto major = detail::cached_attribute<cudaDevAttrComputeCapabilityMajor>(id, "compute_capability");
  if (!major) return major;
  auto minor = detail::cached_attribute<cudaDevAttrComputeCapabilityMinor>(id, "compute_capability");
  return minor ? *major * 10 + *minor : minor;
}

}  // namespace cudamem
