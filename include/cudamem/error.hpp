/// \file
/// Errors and results: every fallible call returns `result<T>` or `status`; nothing throws.
#pragma once

#include <cudamem/detail/config.hpp>

#include <cstdarg>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>

namespace cudamem {

/// Why an operation failed: misuse that the library caught itself, before CUDA saw it, or `cuda`:
/// CUDA reported the error.
enum class errc : int {
  cuda = 1,          ///< CUDA returned an error; error::cuda_status() says which
  invalid_argument,  ///< an argument is malformed (null pointer with a count, a moved-from object, ...)
  out_of_range,      ///< an index, slice or device id lies outside what exists
  size_overflow,     ///< a size in bytes does not fit in std::size_t
  extents_mismatch,  ///< the two operands of a copy differ in size
  overlap,           ///< source and destination of a copy overlap
  not_supported,     ///< the device or build cannot do what was asked
  out_of_memory,     ///< a host allocation failed (device allocations report cudaErrorMemoryAllocation)
  capture_active,    ///< a synchronous operation would break a stream capture in progress
};

/// The name of an errc value, such as "extents_mismatch"; "unknown" for a value outside the enum.
[[nodiscard]] constexpr const char* to_string(errc code) noexcept {
  switch (code) {
    case errc::cuda: return "cuda";
    case errc::invalid_argument: return "invalid_argument";
    case errc::out_of_range: return "out_of_range";
    case errc::size_overflow: return "size_overflow";
    case errc::extents_mismatch: return "extents_mismatch";
    case errc::overlap: return "overlap";
    case errc::not_supported: return "not_supported";
    case errc::capture_active: return "capture_active";
    case errc::out_of_memory: return "out_of_memory";
  }
  return "unknown";
}

/// What went wrong: the CUDA status (when CUDA reported it), the library's errc, the call that failed
/// and a one-line message. The message is formatted when the error is made, such as
/// "copy: cudaMemcpyAsync: cudaErrorInvalidValue: invalid argument" or
/// "copy: extents differ (dst 100, src 99)". Trivially copyable; making one never allocates.
class error {
 public:
  /// An error CUDA reported from `cuda_call`, inside the library function `api` (may be null).
  /// Code errc::cuda.
  error(cudaError_t status, const char* api, const char* cuda_call) noexcept
      : code_(errc::cuda), status_(status), api_(api), call_(cuda_call) {
    format("%s%s%s: %s: %s", api ? api : "", api ? ": " : "", cuda_call, cudaGetErrorName(status),
           cudaGetErrorString(status));
  }

  /// Misuse caught by the library function `api` (not null); `fmt` and the rest, printf-style, say
  /// what was wrong. The message is cut at 159 characters.
  [[gnu::format(printf, 4, 5)]] error(errc code, const char* api, const char* fmt, ...) noexcept
      : code_(code), status_(cudaSuccess), api_(api), call_(api) {
    if (api == nullptr) api_ = call_ = api = "cudamem";
    int used = std::snprintf(text_, sizeof text_, "%s: ", api);
    if (used < 0 || static_cast<std::size_t>(used) >= sizeof text_) return;
    std::va_list args;
    va_start(args, fmt);
    std::vsnprintf(text_ + used, sizeof text_ - static_cast<std::size_t>(used), fmt, args);
    va_end(args);
  }

  /// errc::cuda when CUDA reported the error, else what the library caught.
  [[nodiscard]] errc code() const noexcept { return code_; }
  /// The CUDA status, or cudaSuccess when the library caught the misuse itself.
  [[nodiscard]] cudaError_t cuda_status() const noexcept { return status_; }
  /// The library function the user called (such as "copy"); for CUDA errors it may be null.
  [[nodiscard]] const char* api() const noexcept { return api_; }
  /// The call that failed: the CUDA function for CUDA errors, else the library function.
  [[nodiscard]] const char* call() const noexcept { return call_; }
  /// One line saying which call failed and why. Valid as long as this error lives.
  [[nodiscard]] const char* message() const noexcept { return text_; }
  /// True when CUDA's context is lost: every later CUDA call in this process fails too.
  [[nodiscard]] bool is_sticky() const noexcept { return is_sticky_status(status_); }

  /// The same error reported by the library function `outer_api` (which called the one that failed):
  /// the message names `outer_api` instead of the inner function.
  [[nodiscard]] error with_api(const char* outer_api) const noexcept {
    if (code_ == errc::cuda) return error(status_, outer_api, call_);
    const char* detail = text_;
    if (api_ != nullptr) {
      const std::size_t prefix = std::strlen(api_);
      if (std::strncmp(text_, api_, prefix) == 0 && text_[prefix] == ':') detail = text_ + prefix + 2;
    }
    return error(code_, outer_api, "%s", detail);
  }

  /// Whether a CUDA status corrupts the context (the process must be restarted to use the device).
  [[nodiscard]] static constexpr bool is_sticky_status(cudaError_t status) noexcept {
    switch (status) {
      case cudaErrorIllegalAddress:
      case cudaErrorLaunchFailure:
      case cudaErrorHardwareStackError:
      case cudaErrorIllegalInstruction:
      case cudaErrorMisalignedAddress:
      case cudaErrorInvalidAddressSpace:
      case cudaErrorInvalidPc:
      case cudaErrorAssert:
      case cudaErrorLaunchTimeout:
      case cudaErrorECCUncorrectable:
      case cudaErrorContained:
      case cudaErrorTensorMemoryLeak:
        return true;
      default:
        return false;
    }
  }

 private:
  [[gnu::format(printf, 2, 3)]] void format(const char* fmt, ...) noexcept {
    std::va_list args;
    va_start(args, fmt);
    std::vsnprintf(text_, sizeof text_, fmt, args);
    va_end(args);
  }

  errc code_;
  cudaError_t status_;
  const char* api_;
  const char* call_;
  char text_[160] = {};
};

/// Tag type for constructing a result that holds an error, as std::unexpect_t.
struct unexpect_t {
  /// Explicit, so that `{}` never converts to the tag by accident.
  explicit unexpect_t() = default;
};
/// The tag value: `result<T>(unexpect, failure)` holds `failure`.
inline constexpr unexpect_t unexpect{};

template <class T>
class result;

/// `result<void>` (alias status): success, or an error. The return type of every fallible
/// operation that produces no value.
template <>
class [[nodiscard]] result<void> {
 public:
  /// void: a success carries no value.
  using value_type = void;
  /// cudamem::error.
  using error_type = cudamem::error;

  /// Success.
  result() noexcept : has_value_(true) {}
  /// A failure holding `failure`; implicit, so a function can `return error(...)`.
  result(const cudamem::error& failure) noexcept : error_(failure), has_value_(false) {}
  /// A failure holding `failure`, as std::expected's unexpect constructor.
  result(unexpect_t, const cudamem::error& failure) noexcept : result(failure) {}

  /// True on success.
  [[nodiscard]] bool has_value() const noexcept { return has_value_; }
  /// True on success.
  explicit operator bool() const noexcept { return has_value_; }
  /// No-op on success; precondition has_value() (checked in debug builds), as std::expected<void>.
  void value() const noexcept {
#ifndef NDEBUG
    if (!has_value_) {
      std::fprintf(stderr, "cudamem: status::value() called on an error: %s\n", error_.message());
      std::abort();
    }
#endif
  }
  /// The error. Precondition: !has_value().
  [[nodiscard]] const cudamem::error& error() const noexcept {
#ifndef NDEBUG
    if (has_value_) {
      std::fprintf(stderr, "cudamem: status::error() called on a success\n");
      std::abort();
    }
#endif
    return error_;
  }

  /// Calls `f()`, which returns a result, on success; else returns this error as that result type.
  template <class F>
  auto and_then(F&& f) const {
    using next = std::remove_cvref_t<std::invoke_result_t<F>>;
    if (has_value_) return std::forward<F>(f)();
    return next(error_);
  }
  /// Calls `f(error())`, which returns a status, when this holds an error; else returns success.
  template <class F>
  result or_else(F&& f) const {
    if (has_value_) return *this;
    return std::forward<F>(f)(error_);
  }

 private:
  union {
    char none_ = 0;
    cudamem::error error_;
  };
  bool has_value_;
};

/// An expected-style result: a T or an error. The interface follows std::expected (has_value,
/// value, error, operator*, operator->, value_or, and_then, transform, or_else), without exceptions:
/// value() on an error is a precondition violation (checked with an abort in debug builds).
/// cudamem/interop/expected.hpp converts it to cuda::std::expected<T, error>. Why not
/// cuda::std::expected itself: docs/decisions.md (compile time).
template <class T>
class [[nodiscard]] result {
  static_assert(!std::is_reference_v<T> && !std::is_same_v<std::remove_cv_t<T>, cudamem::error>,
                "result<T>: T must be an object type other than error");

 public:
  /// T.
  using value_type = T;
  /// cudamem::error.
  using error_type = cudamem::error;

  /// A success holding T{} (only for default-constructible T).
  result() requires std::is_default_constructible_v<T> : has_value_(true) { ::new (&value_) T(); }
  /// A success holding `value`.
  template <class U = T>
    requires(std::is_constructible_v<T, U&&> && !std::is_same_v<std::remove_cvref_t<U>, result> &&
             !std::is_same_v<std::remove_cvref_t<U>, cudamem::error>)
  result(U&& value) noexcept(std::is_nothrow_constructible_v<T, U&&>) : has_value_(true) {
    ::new (&value_) T(std::forward<U>(value));
  }
  /// A failure holding `failure`; implicit, so a function can `return error(...)`.
  result(const cudamem::error& failure) noexcept : has_value_(false) { ::new (&error_) cudamem::error(failure); }
  /// A failure holding `failure`, as std::expected's unexpect constructor.
  result(unexpect_t, const cudamem::error& failure) noexcept : result(failure) {}

  /// Moves the value or copies the error of `other`.
  result(result&& other) noexcept(std::is_nothrow_move_constructible_v<T>) : has_value_(other.has_value_) {
    if (has_value_) ::new (&value_) T(std::move(other.value_));
    else ::new (&error_) cudamem::error(other.error_);
  }
  /// Copies the value or the error of `other` (only for copyable T).
  result(const result& other) requires std::is_copy_constructible_v<T> : has_value_(other.has_value_) {
    if (has_value_) ::new (&value_) T(other.value_);
    else ::new (&error_) cudamem::error(other.error_);
  }
  /// Destroys the held value, then moves in the value or copies in the error of `other`.
  result& operator=(result&& other) noexcept(std::is_nothrow_move_constructible_v<T>) {
    if (this != &other) {
      destroy();
      ::new (this) result(std::move(other));
    }
    return *this;
  }
  /// Destroys the held value, then copies in the value or the error of `other` (copyable T only).
  result& operator=(const result& other) requires std::is_copy_constructible_v<T> {
    if (this != &other) {
      destroy();
      ::new (this) result(other);
    }
    return *this;
  }
  /// Destroys the held value, if any.
  ~result() { destroy(); }

  /// True when this holds a value.
  [[nodiscard]] bool has_value() const noexcept { return has_value_; }
  /// True when this holds a value.
  explicit operator bool() const noexcept { return has_value_; }

  ///@{
  /// The value. Precondition: has_value() (checked with an abort in debug builds).
  [[nodiscard]] T& value() & noexcept { check_value(); return value_; }
  [[nodiscard]] const T& value() const& noexcept { check_value(); return value_; }
  [[nodiscard]] T&& value() && noexcept { check_value(); return std::move(value_); }
  ///@}
  ///@{
  /// The value, as value(). Precondition: has_value().
  [[nodiscard]] T& operator*() & noexcept { return value(); }
  [[nodiscard]] const T& operator*() const& noexcept { return value(); }
  [[nodiscard]] T&& operator*() && noexcept { return std::move(*this).value(); }
  ///@}
  ///@{
  /// A pointer to the value. Precondition: has_value().
  [[nodiscard]] T* operator->() noexcept { return &value(); }
  [[nodiscard]] const T* operator->() const noexcept { return &value(); }
  ///@}

  /// The error. Precondition: !has_value() (checked with an abort in debug builds).
  [[nodiscard]] const cudamem::error& error() const noexcept { check_error(); return error_; }

  ///@{
  /// The value (moved out of an rvalue result), or `fallback` converted to T when this holds an error.
  template <class U>
  [[nodiscard]] T value_or(U&& fallback) && {
    return has_value_ ? std::move(value_) : static_cast<T>(std::forward<U>(fallback));
  }
  template <class U>
  [[nodiscard]] T value_or(U&& fallback) const& {
    return has_value_ ? value_ : static_cast<T>(std::forward<U>(fallback));
  }
  ///@}

  ///@{
  /// Calls `f(value())`, which returns a result, when this holds a value; else returns this error
  /// as that result type.
  template <class F>
  auto and_then(F&& f) & { return and_then_impl(*this, std::forward<F>(f)); }
  template <class F>
  auto and_then(F&& f) const& { return and_then_impl(*this, std::forward<F>(f)); }
  template <class F>
  auto and_then(F&& f) && { return and_then_impl(std::move(*this), std::forward<F>(f)); }
  ///@}
  ///@{
  /// `f(value())` wrapped in a result (a status when `f` returns void) when this holds a value;
  /// else this error.
  template <class F>
  auto transform(F&& f) & { return transform_impl(*this, std::forward<F>(f)); }
  template <class F>
  auto transform(F&& f) const& { return transform_impl(*this, std::forward<F>(f)); }
  template <class F>
  auto transform(F&& f) && { return transform_impl(std::move(*this), std::forward<F>(f)); }
  ///@}
  ///@{
  /// Calls `f(error())`, which returns a `result<T>`, when this holds an error; else returns this
  /// value (moved out of an rvalue result).
  template <class F>
  result or_else(F&& f) const& {
    if (has_value_) return *this;
    return std::forward<F>(f)(error_);
  }
  template <class F>
  result or_else(F&& f) && {
    if (has_value_) return std::move(*this);
    return std::forward<F>(f)(error_);
  }
  ///@}

 private:
  template <class Self, class F>
  static auto and_then_impl(Self&& self, F&& f) {
    using next = std::remove_cvref_t<std::invoke_result_t<F, decltype(std::forward<Self>(self).value_)>>;
    if (self.has_value_) return std::forward<F>(f)(std::forward<Self>(self).value_);
    return next(self.error_);
  }
  template <class Self, class F>
  static auto transform_impl(Self&& self, F&& f) {
    using next = std::remove_cv_t<std::invoke_result_t<F, decltype(std::forward<Self>(self).value_)>>;
    if constexpr (std::is_void_v<next>) {
      if (self.has_value_) {
        std::forward<F>(f)(std::forward<Self>(self).value_);
        return result<void>();
      }
      return result<void>(self.error_);
    } else {
      if (self.has_value_) return result<next>(std::forward<F>(f)(std::forward<Self>(self).value_));
      return result<next>(self.error_);
    }
  }
  void destroy() noexcept {
    if (has_value_) value_.~T();
  }
  void check_value() const noexcept {
#ifndef NDEBUG
    if (!has_value_) {
      std::fprintf(stderr, "cudamem: result::value() called on an error: %s\n", error_.message());
      std::abort();
    }
#endif
  }
  void check_error() const noexcept {
#ifndef NDEBUG
    if (has_value_) {
      std::fprintf(stderr, "cudamem: result::error() called on a value\n");
      std::abort();
    }
#endif
  }

  union {
    T value_;
    cudamem::error error_;
  };
  bool has_value_;
};

/// What a fallible operation that produces no value returns: success, or an error.
using status = result<void>;

// ---------------------------------------------------------------------------------------------
// Failures inside destructors (cudaFree, cudaStreamDestroy, ...) cannot be returned: they go to a
// process-wide handler. The default prints one line to stderr.

/// A function called with the error of a failed release (cudaFree, cudaStreamDestroy, ...) in a
/// destructor; it must not throw. See set_release_handler.
using release_handler = void (*)(const error&) noexcept;

namespace detail {
inline void default_release_handler(const error& failure) noexcept {
  std::fprintf(stderr, "cudamem: release failed: %s\n", failure.message());
}
inline release_handler& release_handler_slot() noexcept {
  static release_handler slot = &default_release_handler;
  return slot;
}
}  // namespace detail

/// Replaces the process-wide release handler (null restores the default, which prints one line to
/// stderr) and returns the previous one. Thread-safe.
inline release_handler set_release_handler(release_handler handler) noexcept {
  if (handler == nullptr) handler = &detail::default_release_handler;
  return __atomic_exchange_n(&detail::release_handler_slot(), handler, __ATOMIC_ACQ_REL);
}

/// Passes `failure` to the current release handler. The library's destructors call it; a user's
/// own RAII types may too, so that their failed releases are reported the same way.
inline void report_release_failure(const error& failure) noexcept {
  __atomic_load_n(&detail::release_handler_slot(), __ATOMIC_ACQUIRE)(failure);
}

namespace detail {
/// Turns a CUDA status into a status. A non-sticky error is also cleared from CUDA's last-error
/// slot: it is reported through the result, and a stale copy would mislead the user's own checks.
inline status check(cudaError_t code, const char* api, const char* cuda_call) noexcept {
  if (code == cudaSuccess) [[likely]]
    return {};
  if (!error::is_sticky_status(code)) (void)cudaGetLastError();
  return error(code, api, cuda_call);
}

/// For destructors: reports a failed release to the handler.
inline void check_release(cudaError_t code, const char* cuda_call) noexcept {
  if (code == cudaSuccess) [[likely]]
    return;
  if (!error::is_sticky_status(code)) (void)cudaGetLastError();
  report_release_failure(error(code, nullptr, cuda_call));
}
}  // namespace detail

}  // namespace cudamem

/// Propagates an error: `CUDAMEM_TRY(copy(a, b));` evaluates its argument (a status or result) once
/// and, when it holds an error, returns that error from the enclosing function, which must return a
/// status or a result. The value of a successful result is discarded.
#define CUDAMEM_TRY(...)                                        \
  do {                                                          \
    if (auto cudamem_try_status_ = (__VA_ARGS__); !cudamem_try_status_) \
      return cudamem_try_status_.error();                       \
  } while (0)
