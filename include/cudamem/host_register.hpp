// SPDX-License-Identifier: MIT
/// \file
/// RAII page-locking of pageable host memory: `host_register(host_span<T>)` gives a move-only `host_registration<T>`.
///
///     result<host_registration<T>> host_register(host_span<T> range)   cudaHostRegister, portable and mapped
///     host_registration<T>: view() -> pinned_span<T> (const registration: pinned_span<const T>), data()
///       move-only; unregisters when it goes; deep-const; no view or pointer of a temporary
#pragma once

#include <cudamem/detail/unique_handle.hpp>
#include <cudamem/device.hpp>
#include <cudamem/span.hpp>

#include <cstddef>
#include <type_traits>

namespace cudamem {

namespace detail {
struct host_registration_handle {  // what a host_registration owns: the registered address, or null
  using type = void*;
  static void* empty() noexcept { return nullptr; }
  static void release(void* address) noexcept { check_release(cudaHostUnregister(address), "cudaHostUnregister"); }
};
/// Succeeds when devices [0, `devices`) can use registered memory's host address (`can_use(ordinal)`, a result<int>).
template <class CanUse>
status check_host_pointer_usable(int devices, CanUse&& can_use, const char* api) noexcept {
  for (int ordinal = 0; ordinal < devices; ++ordinal) {
    auto usable = can_use(ordinal);
    if (!usable) return usable.error();
    if (*usable == 0)
      return error(errc::not_supported, api,
                   "device %d cannot use the host address of registered memory in kernels; use a pinned_buffer",
                   ordinal);
  }
  return {};
}
}  // namespace detail

/// Keeps a pageable range (which must outlive it) page-locked and mapped for every device while it lives; move-only.
/// Unregistering does not wait for stream-ordered work on the range; a failure goes to the release handler.
template <class T>
class host_registration {
 public:
  using element_type = T;                    ///< T, with its const.
  using value_type = std::remove_cv_t<T>;    ///< T without const or volatile.
  using kind = pinned;                       ///< The range is page-locked, and usable in kernels on every device.
  static constexpr bool owns_memory = true;  ///< Stream-ordered operations refuse a temporary registration.
  /// Page-locks `range` (cudaHostRegister, portable and mapped; not if empty); synchronous and costly: do it once.
  /// Errors: invalid_argument (null with a count), size_overflow, not_supported (a device cannot use it), CUDA errors.
  [[nodiscard]] static result<host_registration> register_range(host_span<T> range) noexcept {
    constexpr const char* api = "host_register";
    auto bytes = detail::bytes_of(range.size(), sizeof(T), api);
    if (!bytes) return bytes.error();
    if (*bytes == 0) return host_registration();
    if (range.data().get() == nullptr)
      return error(errc::invalid_argument, api, "range is null with %zu elements", range.size());
    void* raw = const_cast<void*>(static_cast<const void*>(range.data().get()));
    const unsigned flags = cudaHostRegisterPortable | cudaHostRegisterMapped;
    CUDAMEM_TRY(detail::check(cudaHostRegister(raw, *bytes, flags), api, "cudaHostRegister"));
    host_registration registered(raw, range.size());
    auto devices = device_count();
    if (!devices) return devices.error().with_api(api);  // unregisters
    auto can_use = [api](int ordinal) noexcept {
      return detail::cached_attribute<cudaDevAttrCanUseHostPointerForRegisteredMem>(device_id(ordinal), api);
    };
    CUDAMEM_TRY(detail::check_host_pointer_usable(*devices, can_use, api));  // unregisters
    return registered;
  }
  /// The range as page-locked memory, while this lives; empty after a move.
  [[nodiscard]] pinned_span<T> view() & noexcept { return {data(), registered_.valid() ? count_ : 0}; }
  /// As view(), of const T: a const registration does not give write access to the range.
  [[nodiscard]] pinned_span<const T> view() const& noexcept { return {data(), registered_.valid() ? count_ : 0}; }
  /// The range's first element (null when empty or moved from).
  [[nodiscard]] pinned_ptr<T> data() & noexcept { return pinned_ptr<T>(static_cast<T*>(registered_.get())); }
  /// As data(), of const T.
  [[nodiscard]] pinned_ptr<const T> data() const& noexcept {
    return pinned_ptr<const T>(static_cast<const T*>(registered_.get()));
  }
  ///@{
  /// Converts to its view as view() does; not a temporary registration, whose view would outlive it.
  CUDAMEM_DETAIL_OWNER_VIEWS((pinned_span<T>), (pinned_span<const T>));
  ///@}

 private:
  host_registration(void* address = nullptr, std::size_t count = 0) noexcept : registered_(address), count_(count) {}
  detail::unique_handle<detail::host_registration_handle> registered_;
  std::size_t count_ = 0;
};
/// As host_registration::register_range.
template <class T>
[[nodiscard]] result<host_registration<T>> host_register(host_span<T> range) noexcept {
  return host_registration<T>::register_range(range);
}

}  // namespace cudamem
