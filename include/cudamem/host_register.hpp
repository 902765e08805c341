/// \file
/// RAII page-locking of existing pageable host memory (cudaHostRegister).
#pragma once

#include <cudamem/span.hpp>

#include <cstddef>
#include <type_traits>

namespace cudamem {

/// Keeps a pageable range page-locked (and mapped for the device) while it lives; unregisters in
/// its destructor. Move-only; a moved-from registration is empty. The range must outlive the
/// registration. It is a viewable of kind pinned, so it goes straight into stream-ordered copies.
template <class T>
class host_registration {
 public:
  /// T, with its const.
  using element_type = T;
  /// T without const or volatile.
  using value_type = std::remove_cv_t<T>;
  /// pinned: the registered range is page-locked.
  using kind = pinned;

  /// Page-locks `range` (cudaHostRegister, portable and mapped). An empty range registers nothing.
  /// Synchronous and costly (it pins every page): do it once, not per copy. Errors: invalid_argument
  /// (null with a count), size_overflow, CUDA errors (cudaErrorHostMemoryAlreadyRegistered, ...).
  [[nodiscard]] static result<host_registration> register_range(host_span<T> range) noexcept {
    constexpr const char* api = "host_register";
    auto bytes = detail::bytes_of(range.size(), sizeof(T), api);
    if (!bytes) return bytes.error();
    if (*bytes == 0) return host_registration(range, false);
    if (range.data().get() == nullptr)
      return error(errc::invalid_argument, api, "range is null with %zu elements", range.size());
    void* raw = const_cast<void*>(static_cast<const void*>(range.data().get()));
    if (auto ok = detail::check(cudaHostRegister(raw, *bytes, cudaHostRegisterPortable | cudaHostRegisterMapped), api,
                                "cudaHostRegister");
        !ok)
      return ok.error();
    return host_registration(range, true);
  }

  /// Takes over the registration of `other`, which is left empty.
  host_registration(host_registration&& other) noexcept : range_(other.range_), active_(other.active_) {
    other.active_ = false;
    other.range_ = {};
  }
  /// Unregisters this range first, then takes over the registration of `other`.
  host_registration& operator=(host_registration&& other) noexcept {
    if (this != &other) {
      unregister();
      range_ = other.range_;
      active_ = other.active_;
      other.active_ = false;
      other.range_ = {};
    }
    return *this;
  }
  host_registration(const host_registration&) = delete;
  host_registration& operator=(const host_registration&) = delete;
  /// Unregisters the range (cudaHostUnregister). It does not wait for stream-ordered work that uses
  /// the range: that must have completed. A failure goes to the release handler.
  ~host_registration() { unregister(); }

  /// The range as page-locked memory: usable in stream-ordered copies while this lives. Empty for a
  /// moved-from registration.
  [[nodiscard]] pinned_span<T> view() const noexcept {
    return pinned_span<T>(pinned_ptr<T>(range_.data().get()), range_.size());
  }
  /// As view().
  operator pinned_span<T>() const noexcept { return view(); }

 private:
  host_registration(host_span<T> range, bool active) noexcept : range_(range), active_(active) {}
  void unregister() noexcept {
    if (active_) {
      void* raw = const_cast<void*>(static_cast<const void*>(range_.data().get()));
      detail::check_release(cudaHostUnregister(raw), "cudaHostUnregister");
    }
    active_ = false;
  }
  host_span<T> range_;
  bool active_;
};

/// Page-locks `range` while the returned registration lives, as host_registration::register_range.
/// Synchronous. Errors: invalid_argument, size_overflow, CUDA errors.
template <class T>
[[nodiscard]] result<host_registration<T>> host_register(host_span<T> range) noexcept {
  return host_registration<T>::register_range(range);
}

}  // namespace cudamem
