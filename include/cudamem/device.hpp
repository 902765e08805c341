/// \file
/// Devices: ids, the current device, an RAII guard, and the few cached properties the library needs.
///
///     class device_id { explicit device_id(int); static device_id host(); int get(); bool is_host(); };
///     result<int> device_count();
///     result<device_id> current_device();      status set_current_device(device_id);
///     class device_guard {                     // move-only; restores the previous device
///       static result<device_guard> set(device_id);  static result<device_guard> keep_current();
///       device_id previous();
///     };
///     result<std::size_t> max_pitch(device_id);  result<int> compute_capability(device_id);  // cached
#pragma once

#include <cudamem/detail/unique_handle.hpp>
#include <cudamem/error.hpp>

#include <cstddef>

namespace cudamem {

/// A CUDA device ordinal, or host() (cudaCpuDeviceId) for memory that lives on the host. A plain
/// value: it is not checked against the devices present until an operation uses it.
class device_id {
 public:
  /// Device 0.
  constexpr device_id() noexcept = default;
  /// The device with this ordinal (as cudaSetDevice takes it).
  CUDAMEM_HD constexpr explicit device_id(int ordinal) noexcept : ordinal_(ordinal) {}
  /// The id of host memory.
  CUDAMEM_HD static constexpr device_id host() noexcept { return device_id(cudaCpuDeviceId); }
  /// The ordinal, as CUDA takes it.
  CUDAMEM_HD constexpr int get() const noexcept { return ordinal_; }
  /// True for device_id::host().
  CUDAMEM_HD constexpr bool is_host() const noexcept { return ordinal_ == cudaCpuDeviceId; }
  /// Equal when the ordinals are.
  friend constexpr bool operator==(device_id, device_id) noexcept = default;

 private:
  int ordinal_ = 0;
};

/// The number of visible CUDA devices. Errors: whatever cudaGetDeviceCount reports
/// (cudaErrorNoDevice, cudaErrorInsufficientDriver, ...).
[[nodiscard]] inline result<int> device_count() noexcept {
  int count = 0;
  if (auto s = detail::check(cudaGetDeviceCount(&count), "device_count", "cudaGetDeviceCount"); !s) return s.error();
  return count;
}

namespace detail {
/// Succeeds when `id` names an existing device; `api` names the caller in the error.
inline status check_device(device_id id, const char* api) noexcept {
  auto count = device_count();
  if (!count) return error(count.error().cuda_status(), api, "cudaGetDeviceCount");
  if (id.get() < 0 || id.get() >= *count)
    return error(errc::out_of_range, api, "device %d out of range (%d devices)", id.get(), *count);
  return {};
}
}  // namespace detail

/// The calling thread's current device. Errors: CUDA errors (no device, no driver).
[[nodiscard]] inline result<device_id> current_device() noexcept {
  int ordinal = 0;
  if (auto s = detail::check(cudaGetDevice(&ordinal), "current_device", "cudaGetDevice"); !s) return s.error();
  return device_id(ordinal);
}

/// Makes `id` current for the calling thread. Errors: out_of_range for an id that names no device;
/// CUDA errors (no device, no driver).
[[nodiscard]] inline status set_current_device(device_id id) noexcept {
  if (auto s = detail::check_device(id, "set_current_device"); !s) return s;
  return detail::check(cudaSetDevice(id.get()), "set_current_device", "cudaSetDevice");
}

namespace detail {
/// What a device_guard owns: the ordinal to make current again, or cudaInvalidDeviceId (nothing).
struct device_restore {
  using type = int;
  static int empty() noexcept { return cudaInvalidDeviceId; }
  static void release(int ordinal) noexcept { check_release(cudaSetDevice(ordinal), "cudaSetDevice"); }
};
}  // namespace detail

/// RAII: makes a device current and restores the previous one on every path out of the scope.
/// Move-only: a moved-to guard takes over the restore (a guard assigned over first restores its own
/// previous device); a moved-from guard restores nothing. A failed restore goes to the release
/// handler.
class device_guard {
 public:
  /// Makes `id` current, remembering the current device. When `id` already is current, nothing is
  /// switched and nothing will be restored. Errors: out_of_range for an id that names no device;
  /// CUDA errors (no device). On error the current device is unchanged.
  [[nodiscard]] static result<device_guard> set(device_id id) noexcept {
    int previous = 0;
    if (auto s = detail::check(cudaGetDevice(&previous), "device_guard::set", "cudaGetDevice"); !s) return s.error();
    if (previous != id.get()) {
      if (auto s = detail::check_device(id, "device_guard::set"); !s) return s.error();
      if (auto s = detail::check(cudaSetDevice(id.get()), "device_guard::set", "cudaSetDevice"); !s) return s.error();
    }
    return device_guard(previous, previous != id.get());
  }

  /// A guard that keeps the current device and restores nothing, for code that needs a guard on
  /// every path. Errors: CUDA errors (no device, no driver).
  [[nodiscard]] static result<device_guard> keep_current() noexcept {
    int current = 0;
    if (auto s = detail::check(cudaGetDevice(&current), "device_guard::keep_current", "cudaGetDevice"); !s)
      return s.error();
    return device_guard(current, false);
  }

  /// The device that was current when the guard was made, and is made current again when the guard
  /// goes (if the guard switched away from it).
  [[nodiscard]] device_id previous() const noexcept { return previous_; }

 private:
  device_guard(int previous, bool switched) noexcept
      : previous_(previous), restore_(switched ? previous : detail::device_restore::empty()) {}
  device_id previous_;
  detail::unique_handle<detail::device_restore> restore_;
};

namespace detail {
/// One int per device ordinal and `Tag`, read once and kept for the life of the process. Every
/// value is kept, 0 included; errors are not, and neither are ordinals outside [0, max_devices).
/// Thread-safe: threads that race may each read, and store the same value.
template <class Tag>
struct per_device_cache {
  static constexpr int max_devices = 64;

  /// The cached value for `ordinal`, else `read(ordinal)` (a result<int>), cached when it succeeds.
  template <class Read>
  static result<int> get(int ordinal, Read&& read) noexcept {
    const bool cacheable = ordinal >= 0 && ordinal < max_devices;
    if (cacheable && __atomic_load_n(&known[ordinal], __ATOMIC_ACQUIRE))
      return __atomic_load_n(&values[ordinal], __ATOMIC_RELAXED);
    result<int> value = read(ordinal);
    if (value && cacheable) {
      __atomic_store_n(&values[ordinal], *value, __ATOMIC_RELAXED);
      __atomic_store_n(&known[ordinal], true, __ATOMIC_RELEASE);
    }
    return value;
  }

  static inline int values[max_devices] = {};
  static inline bool known[max_devices] = {};
};

/// An attribute of device `ordinal`, read now (cudaDeviceGetAttribute). Errors: out_of_range for an
/// ordinal that names no device; CUDA errors.
inline result<int> read_attribute(int ordinal, cudaDeviceAttr attribute, const char* api) noexcept {
  if (auto s = check_device(device_id(ordinal), api); !s) return s.error();
  int value = 0;
  if (auto s = check(cudaDeviceGetAttribute(&value, attribute, ordinal), api, "cudaDeviceGetAttribute"); !s)
    return s.error();
  return value;
}

template <cudaDeviceAttr Attribute>
struct attribute_tag {};

/// An attribute of a device, read once per (device, attribute) and cached. Errors: as read_attribute.
template <cudaDeviceAttr Attribute>
inline result<int> cached_attribute(device_id id, const char* api) noexcept {
  return per_device_cache<attribute_tag<Attribute>>::get(
      id.get(), [api](int ordinal) noexcept { return read_attribute(ordinal, Attribute, api); });
}

struct compute_capability_tag {};
}  // namespace detail

/// The largest pitch in bytes a 2D copy may use on `id` (cudaDevAttrMaxPitch), read once per device
/// and cached. The driver does not enforce it. Errors: out_of_range for an id that names no device;
/// CUDA errors.
[[nodiscard]] inline result<std::size_t> max_pitch(device_id id) noexcept {
  auto value = detail::cached_attribute<cudaDevAttrMaxPitch>(id, "max_pitch");
  if (!value) return value.error();
  return static_cast<std::size_t>(static_cast<unsigned>(*value));
}

/// The compute capability of `id` as major * 10 + minor (90 on Hopper), read once per device and
/// cached. Errors: out_of_range for an id that names no device; CUDA errors.
[[nodiscard]] inline result<int> compute_capability(device_id id) noexcept {
  return detail::per_device_cache<detail::compute_capability_tag>::get(
      id.get(), [](int ordinal) noexcept -> result<int> {
        constexpr const char* api = "compute_capability";
        auto major = detail::read_attribute(ordinal, cudaDevAttrComputeCapabilityMajor, api);
        if (!major) return major;
        auto minor = detail::read_attribute(ordinal, cudaDevAttrComputeCapabilityMinor, api);
        if (!minor) return minor;
        return *major * 10 + *minor;
      });
}

}  // namespace cudamem
