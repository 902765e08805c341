// SPDX-License-Identifier: MIT
// cudamem: the move-only ownership every RAII type of the library shares. Internal: include a public header instead.
#pragma once

#include <utility>

namespace cudamem::detail {

/// Owns one handle and releases it once; an owning type holds one and declares no moves, copies or destructor.
/// `Traits` gives `type`, `empty()` (owns nothing; not always null: null is a stream) and `release(type)`, noexcept.
template <class Traits>
class unique_handle {
 public:
  using handle_type = typename Traits::type;

  unique_handle() noexcept : handle_(Traits::empty()) {}                       ///< Owns nothing.
  explicit unique_handle(handle_type handle) noexcept : handle_(handle) {}     ///< Owns `handle` (may be empty()).
  unique_handle(unique_handle&& other) noexcept : handle_(other.release()) {}  ///< Takes over; `other` is left empty.
  unique_handle& operator=(unique_handle&& other) noexcept {  // releases this handle, then takes over `other`'s
    if (this != &other) reset(other.release());
    return *this;
  }
  ~unique_handle() { reset(); }

  [[nodiscard]] handle_type get() const noexcept { return handle_; }  ///< The handle (empty() when none is owned).
  [[nodiscard]] bool valid() const noexcept { return !(handle_ == Traits::empty()); }  ///< False when none is owned.
  /// Gives the handle up without releasing it; this owns nothing afterwards.
  [[nodiscard]] handle_type release() noexcept { return std::exchange(handle_, Traits::empty()); }
  void reset(handle_type handle = Traits::empty()) noexcept {  // releases the owned handle (if any), then owns `handle`
    if (valid()) Traits::release(handle_);
    handle_ = handle;
  }

 private:
  handle_type handle_;
};

}  // namespace cudamem::detail
