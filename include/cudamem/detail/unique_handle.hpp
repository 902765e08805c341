// cudamem: the move-only ownership every RAII type of the library shares. Internal: include a public
// header instead.
#pragma once

#include <utility>

namespace cudamem::detail {

/// Owns one handle and releases it exactly once. The owning types (stream, event, device_guard,
/// host_registration, ...) hold one as a member and declare no move operations or destructor of
/// their own: the compiler-generated ones move it, and copying does not compile.
///
/// `Traits` says what the handle is:
///
///     struct stream_handle {
///       using type = cudaStream_t;                        // copyable, comparable with ==
///       static type empty() noexcept;                     // the sentinel: owns nothing
///       static void release(type handle) noexcept;        // called once per owned handle
///     };
///
/// A moved-from owner holds empty(); release() is never called with empty(). The sentinel need not
/// be null: a moved-from stream holds a handle CUDA rejects, because null is a valid stream.
template <class Traits>
class unique_handle {
 public:
  using handle_type = typename Traits::type;

  /// Owns nothing.
  unique_handle() noexcept : handle_(Traits::empty()) {}
  /// Owns `handle` (which may be empty()).
  explicit unique_handle(handle_type handle) noexcept : handle_(handle) {}
  /// Takes over the handle of `other`, which is left empty.
  unique_handle(unique_handle&& other) noexcept : handle_(other.release()) {}
  /// Releases this handle, then takes over the handle of `other`, which is left empty.
  unique_handle& operator=(unique_handle&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  unique_handle(const unique_handle&) = delete;
  unique_handle& operator=(const unique_handle&) = delete;
  ~unique_handle() { reset(); }

  /// The handle (empty() when nothing is owned).
  [[nodiscard]] handle_type get() const noexcept { return handle_; }
  /// False when nothing is owned.
  [[nodiscard]] bool valid() const noexcept { return !(handle_ == Traits::empty()); }
  /// Gives the handle up without releasing it; this owns nothing afterwards.
  [[nodiscard]] handle_type release() noexcept { return std::exchange(handle_, Traits::empty()); }
  /// Releases the owned handle (if any), then owns `handle`.
  void reset(handle_type handle = Traits::empty()) noexcept {
    if (valid()) Traits::release(handle_);
    handle_ = handle;
  }

 private:
  handle_type handle_;
};

}  // namespace cudamem::detail
