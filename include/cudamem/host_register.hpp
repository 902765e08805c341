/// \file
/// RAII page-locking of existing pageable host memory (cudaHostRegister).
///
///     template <class T> class host_registration {   // owning, move-only
///       static constexpr bool owns_memory = true;    // stream-ordered calls refuse a temporary
///       static result<host_registration> register_range(host_span<T>);
///       pinned_span<T> view() const&;                 // not on a temporary
///       operator pinned_span<T>() const&;
///     };
///     template <class T> result<host_registration<T>> host_register(host_span<T>);
#pragma once

#include <cudamem/detail/unique_handle.hpp>
#include <cudamem/device.hpp>
#include <cudamem/span.hpp>

#include <cstddef>
#include <type_traits>

namespace cudamem {

namespace detail {
/// What a host_registration owns: the registered address; null when nothing is registered.
struct host_registration_handle {
  using type = void*;
  static void* empty() noexcept { return nullptr; }
  static void release(void* address) noexcept { check_release(cudaHostUnregister(address), "cudaHostUnregister"); }
};

/// Succeeds when each of `devices` devices can use the host address of registered memory:
/// `can_use(ordinal)` returns cudaDevAttrCanUseHostPointerForRegisteredMem of that device (a
/// result<int>). Errors: not_supported naming the first device that cannot; those of `can_use`.
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

/// Keeps a pageable range page-locked, and mapped for every device, while it lives; unregisters in
/// its destructor (which does not wait for stream-ordered work on the range: that must have
/// completed). A failed unregister goes to the release handler. Move-only; a moved-from
/// registration is empty. The range must outlive the registration.
///
/// It is a viewable of kind pinned, so it goes straight into stream-ordered copies, and its view's
/// address is usable in kernels on every device: host_register refuses where a device could not use
/// the host address of registered memory. It owns the page-locking (owns_memory): a temporary
/// registration ends at the end of its statement, so it does not convert to a view, and
/// stream-ordered operations refuse it.
template <class T>
class host_registration {
 public:
  /// T, with its const.
  using element_type = T;
  /// T without const or volatile.
  using value_type = std::remove_cv_t<T>;
  /// pinned: the registered range is page-locked.
  using kind = pinned;
  /// True: the memory stays page-locked only while this object lives, so a temporary must not be
  /// used by work that runs later.
  static constexpr bool owns_memory = true;

  /// Page-locks `range` (cudaHostRegister, portable and mapped). An empty range registers nothing.
  /// Synchronous and costly (it pins every page): do it once, not per copy. Errors: invalid_argument
  /// (null with a count), size_overflow, not_supported (a device cannot use the host address of
  /// registered memory, cudaDevAttrCanUseHostPointerForRegisteredMem; the range is unregistered
  /// again), CUDA errors (cudaErrorHostMemoryAlreadyRegistered, ...).
  [[nodiscard]] static result<host_registration> register_range(host_span<T> range) noexcept {
    constexpr const char* api = "host_register";
    auto bytes = detail::bytes_of(range.size(), sizeof(T), api);
    if (!bytes) return bytes.error();
    if (*bytes == 0) return host_registration();
    if (range.data().get() == nullptr)
      return error(errc::invalid_argument, api, "range is null with %zu elements", range.size());
    void* raw = const_cast<void*>(static_cast<const void*>(range.data().get()));
    if (auto ok = detail::check(cudaHostRegister(raw, *bytes, cudaHostRegisterPortable | cudaHostRegisterMapped), api,
                                "cudaHostRegister");
        !ok)
      return ok.error();
    host_registration registered(raw, range.size());
    auto devices = device_count();
    if (!devices) return devices.error().with_api(api);  // unregisters
    auto usable = detail::check_host_pointer_usable(
        *devices,
        [api](int ordinal) noexcept {
          return detail::cached_attribute<cudaDevAttrCanUseHostPointerForRegisteredMem>(device_id(ordinal), api);
        },
        api);
    if (!usable) return usable.error();  // unregisters
    return registered;
  }

  /// The range as page-locked memory: usable in stream-ordered copies and kernels while this lives.
  /// Empty for a moved-from registration.
  [[nodiscard]] pinned_span<T> view() const& noexcept {
    if (!registered_.valid()) return {};
    return pinned_span<T>(pinned_ptr<T>(static_cast<T*>(registered_.get())), count_);
  }
  /// Refused: the view of a temporary registration would dangle once the statement ends.
  pinned_span<T> view() const&& = delete;
  /// As view().
  operator pinned_span<T>() const& noexcept { return view(); }
  /// Refused: `pinned_span<T> p = *host_register(range);` would outlive the registration.
  operator pinned_span<T>() const&& = delete;

 private:
  host_registration() noexcept = default;
  host_registration(void* address, std::size_t count) noexcept : registered_(address), count_(count) {}

  detail::unique_handle<detail::host_registration_handle> registered_;
  std::size_t count_ = 0;
};

/// Page-locks `range` while the returned registration lives, as host_registration::register_range.
/// Synchronous. Errors: invalid_argument, size_overflow, not_supported, CUDA errors.
template <class T>
[[nodiscard]] result<host_registration<T>> host_register(host_span<T> range) noexcept {
  return host_registration<T>::register_range(range);
}

}  // namespace cudamem
