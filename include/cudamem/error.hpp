/// \file
/// Errors and results: every fallible call returns `result<T>` or `status`; nothing throws.
///
///     enum class errc { cuda, invalid_argument, out_of_range, ..., capture_active, nccl };
///     enum class error_domain { library, cuda, nccl };
///     class error {                       // trivially copyable; making one never allocates
///       error(cudaError_t, const char* api, const char* cuda_call);
///       error(errc, const char* api, const char* fmt, ...);                    // printf-style
///       error(error_domain, int native_code, const char* api, const char* call,
///             const char* name, const char* description);                    // NCCL and others
///       domain(), native_code(), code(), cuda_status(), api(), call(), message(), is_sticky(),
///       with_api(outer_api);   ==  with error, errc, cudaError_t
///     };
///     template <class T> class result;    // a subset of std::expected<T, error>, without exceptions
///     using status = result<void>;
///     status check_launch(const char* kernel_name);          // cudaGetLastError as a status
///     set_release_handler(handler); report_release_failure(error);
///     CUDAMEM_TRY(expression);                                // return the error, if any
#pragma once

#include <cudamem/detail/config.hpp>
#include <cudamem/detail/process_wide.hpp>

#include <cstdarg>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <new>
#include <type_traits>
#include <utility>

#if defined(__cpp_exceptions) || defined(__EXCEPTIONS)
#define CUDAMEM_DETAIL_EXCEPTIONS 1
#else
#define CUDAMEM_DETAIL_EXCEPTIONS 0
#endif

// nvcc's front end warns (#2810-D) wherever a [[nodiscard]] class's user-provided move assignment
// is used, so `r = make();` would break -Werror builds; there the functions carry the attribute.
#if defined(__CUDACC__)
#define CUDAMEM_DETAIL_NODISCARD_RESULT
#else
#define CUDAMEM_DETAIL_NODISCARD_RESULT [[nodiscard]]
#endif

namespace cudamem {

/// Why an operation failed, portably: `cuda` or `nccl` when that library reported the error
/// (error::native_code() says which), else the misuse that cudamem caught itself, before CUDA saw it.
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
  nccl,              ///< NCCL returned an error; error::native_code() is its ncclResult_t
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
    case errc::nccl: return "nccl";
  }
  return "unknown";
}

/// Who reported an error, and so what error::native_code() means.
enum class error_domain : unsigned char {
  library,  ///< cudamem caught it; the native code is the errc
  cuda,     ///< the CUDA runtime reported it; the native code is the cudaError_t
  nccl,     ///< NCCL reported it; the native code is the ncclResult_t
};

/// The name of a domain: "library", "cuda" or "nccl"; "unknown" for a value outside the enum.
[[nodiscard]] constexpr const char* to_string(error_domain domain) noexcept {
  switch (domain) {
    case error_domain::library: return "library";
    case error_domain::cuda: return "cuda";
    case error_domain::nccl: return "nccl";
  }
  return "unknown";
}

/// What went wrong: who reported it (domain()) with which code (native_code()), its portable
/// classification (code()), the call that failed and a one-line message. The message is formatted
/// when the error is made, such as "copy: cudaMemcpyAsync: cudaErrorInvalidValue: invalid argument"
/// or "copy: extents differ (dst 100, src 99)". Trivially copyable; making one never allocates.
///
/// The names given for `api` and `call` are copied (api() and call() keep up to max_name characters
/// of each; the message keeps them whole), so a name built at run time may be freed afterwards.
class error {
 public:
  /// The longest message kept, in characters; a longer one is cut and ends in "...".
  static constexpr std::size_t max_message = 255;
  /// The longest api() and call() kept, in characters.
  static constexpr std::size_t max_name = 47;

  /// An error CUDA reported from `cuda_call`, inside the library function `api` (may be null).
  /// Code errc::cuda, domain cuda.
  error(cudaError_t status, const char* api, const char* cuda_call) noexcept
      : error(error_domain::cuda, static_cast<int>(status), api, cuda_call, cudaGetErrorName(status),
              cudaGetErrorString(status)) {}

  /// Misuse caught by the library function `api` (null reads "cudamem"); `fmt` and the rest,
  /// printf-style, say what was wrong. Domain library.
  [[gnu::format(printf, 4, 5)]] error(errc code, const char* api, const char* fmt, ...) noexcept
      : domain_(error_domain::library), code_(code), native_(static_cast<int>(code)) {
    if (api == nullptr) api = "cudamem";
    set_names(api, api);
    begin_message(api);
    std::va_list args;
    va_start(args, fmt);
    vappend(fmt, args);
    va_end(args);
  }

  /// An error another library reported from `call`, inside the library function `api` (may be
  /// null): `native_code` is that library's code (an ncclResult_t for error_domain::nccl), `name`
  /// and `description` its words for it (either may be null). The message reads
  /// "api: call: name: description". code() is errc::cuda or errc::nccl by domain (for
  /// error_domain::library, `native_code` is taken as the errc).
  error(error_domain domain, int native_code, const char* api, const char* call, const char* name,
        const char* description) noexcept
      : domain_(domain), code_(classify(domain, native_code)), native_(native_code) {
    if (call == nullptr) call = "?";
    set_names(api, call);
    begin_message(api);
    append("%s", call);
    if (name != nullptr) append(": %s", name);
    if (description != nullptr) append(": %s", description);
  }

  /// Who reported the error: library, cuda or nccl.
  [[nodiscard]] error_domain domain() const noexcept { return domain_; }
  /// The reporter's own code: the cudaError_t, the ncclResult_t, or the errc (as int).
  [[nodiscard]] int native_code() const noexcept { return native_; }
  /// errc::cuda or errc::nccl when that library reported the error, else what cudamem caught.
  [[nodiscard]] errc code() const noexcept { return code_; }
  /// The CUDA status, or cudaSuccess when CUDA did not report the error.
  [[nodiscard]] cudaError_t cuda_status() const noexcept {
    return domain_ == error_domain::cuda ? static_cast<cudaError_t>(native_) : cudaSuccess;
  }
  /// The library function the user called (such as "copy"); null for a CUDA error made without one.
  [[nodiscard]] const char* api() const noexcept { return has_api_ ? api_ : nullptr; }
  /// The call that failed: the CUDA or NCCL function, else the library function.
  [[nodiscard]] const char* call() const noexcept { return call_; }
  /// One line saying which call failed and why. Valid as long as this error lives.
  [[nodiscard]] const char* message() const noexcept { return text_; }
  /// True when CUDA's context is lost: every later CUDA call in this process fails too.
  [[nodiscard]] bool is_sticky() const noexcept { return is_sticky_status(cuda_status()); }

  /// The same error reported by the library function `outer_api` (which called the one that failed):
  /// the message names `outer_api` instead of the inner function.
  [[nodiscard]] error with_api(const char* outer_api) const noexcept {
    error outer = *this;
    if (outer_api == nullptr && domain_ == error_domain::library) outer_api = "cudamem";
    outer.set_names(outer_api, domain_ == error_domain::library ? outer_api : call_);
    outer.length_ = 0;
    outer.text_[0] = '\0';
    outer.begin_message(outer_api);
    outer.append("%s", text_ + detail_offset_);
    return outer;
  }

  /// Whether a CUDA status corrupts the context: the process must be restarted to use CUDA again.
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
      case cudaErrorMpsClientTerminated:
      case cudaErrorExternalDevice: return true;
      default: return false;
    }
  }

  /// Equal when the same reporter gave the same code (as std::error_code): where the error arose
  /// (api, call) and the message are not compared.
  friend bool operator==(const error& a, const error& b) noexcept {
    return a.domain_ == b.domain_ && a.native_ == b.native_;
  }
  /// True when code() is `code`: `if (e == errc::capture_active)`.
  friend bool operator==(const error& e, errc code) noexcept { return e.code_ == code; }
  /// True when CUDA reported `status`: `if (e == cudaErrorMemoryAllocation)`.
  friend bool operator==(const error& e, cudaError_t status) noexcept {
    return e.domain_ == error_domain::cuda && e.native_ == static_cast<int>(status);
  }

 private:
  static constexpr errc classify(error_domain domain, int native_code) noexcept {
    switch (domain) {
      case error_domain::cuda: return errc::cuda;
      case error_domain::nccl: return errc::nccl;
      case error_domain::library: break;
    }
    return static_cast<errc>(native_code);
  }
  static void copy_name(char (&to)[max_name + 1], const char* from) noexcept {
    std::size_t i = 0;
    for (; from != nullptr && i < max_name && from[i] != '\0'; ++i) to[i] = from[i];
    to[i] = '\0';
  }
  void set_names(const char* api, const char* call) noexcept {
    has_api_ = api != nullptr;
    copy_name(api_, api);
    copy_name(call_, call);
  }
  // "api: " when there is an api; what follows is what with_api keeps.
  void begin_message(const char* api) noexcept {
    if (api != nullptr) append("%s: ", api);
    detail_offset_ = static_cast<unsigned short>(length_);
  }
  [[gnu::format(printf, 2, 3)]] void append(const char* fmt, ...) noexcept {
    std::va_list args;
    va_start(args, fmt);
    vappend(fmt, args);
    va_end(args);
  }
  [[gnu::format(printf, 2, 0)]] void vappend(const char* fmt, std::va_list args) noexcept {
    if (length_ >= max_message) return;
    const int written = std::vsnprintf(text_ + length_, sizeof text_ - length_, fmt, args);
    if (written < 0) return;
    if (length_ + static_cast<std::size_t>(written) <= max_message) {
      length_ += static_cast<std::size_t>(written);
      return;
    }
    length_ = max_message;
    std::memcpy(text_ + max_message - 3, "...", 3);
  }

  error_domain domain_;
  bool has_api_ = false;
  unsigned short detail_offset_ = 0;  // where the message continues after "api: "
  errc code_;
  int native_;
  std::size_t length_ = 0;
  char api_[max_name + 1] = {};
  char call_[max_name + 1] = {};
  char text_[max_message + 1] = {};
};
static_assert(std::is_trivially_copyable_v<error>);

/// Tag type for constructing a result that holds an error, as std::unexpect_t.
struct unexpect_t {
  /// Explicit, so that `{}` never converts to the tag by accident.
  explicit unexpect_t() = default;
};
/// The tag value: `result<T>(unexpect, failure)` holds `failure`.
inline constexpr unexpect_t unexpect{};

template <class T>
class result;

namespace detail {
template <class T>
inline constexpr bool is_result = false;
template <class T>
inline constexpr bool is_result<result<T>> = true;

// Tag of the private constructor that builds a result's value from a function's return value in
// place (transform), so that the value need not be movable, as with std::expected.
struct from_invoke_t {};

// std::invoke without <functional> (which costs more compile time than this whole header): function
// objects, and pointers to members applied to an object or to a pointer to one.
template <class F>
decltype(auto) invoke(F&& f) {
  return std::forward<F>(f)();
}
template <class F, class Arg>
decltype(auto) invoke(F&& f, Arg&& arg) {
  using fn = std::remove_cvref_t<F>;
  if constexpr (std::is_member_function_pointer_v<fn>) {
    if constexpr (requires(Arg&& a, fn m) { (static_cast<Arg&&>(a).*m)(); }) return (std::forward<Arg>(arg).*f)();
    else return ((*std::forward<Arg>(arg)).*f)();
  } else if constexpr (std::is_member_object_pointer_v<fn>) {
    if constexpr (requires(Arg&& a, fn m) { static_cast<Arg&&>(a).*m; }) return (std::forward<Arg>(arg).*f);
    else return ((*std::forward<Arg>(arg)).*f);
  } else {
    return std::forward<F>(f)(std::forward<Arg>(arg));
  }
}

// Reading the value of a result that holds an error (value(), always) or the error of one that holds
// a value (error() and operator*, in debug builds): print and abort.
[[noreturn, gnu::cold]] inline void bad_result_access(const char* what, const error* failure) noexcept {
  if (failure != nullptr) std::fprintf(stderr, "cudamem: %s called on an error: %s\n", what, failure->message());
  else std::fprintf(stderr, "cudamem: %s called on a success\n", what);
  std::abort();
}
}  // namespace detail

/// `result<void>` (alias status): success, or an error. The return type of every fallible
/// operation that produces no value. The interface of std::expected<void, error> (see result<T>).
template <>
class [[nodiscard]] result<void> {
  template <class>
  friend class result;

 public:
  /// void: a success carries no value.
  using value_type = void;
  /// cudamem::error.
  using error_type = cudamem::error;
  /// The result type for values of type U, as std::expected::rebind.
  template <class U>
  using rebind = result<U>;

  /// Success.
  result() noexcept : has_value_(true) {}
  /// Success, as std::expected's in_place constructor.
  explicit result(std::in_place_t) noexcept : has_value_(true) {}
  /// A failure holding `failure`; implicit, so a function can `return error(...)` (it plays the
  /// part of std::unexpected).
  result(const cudamem::error& failure) noexcept : error_(failure), has_value_(false) {}
  /// A failure holding `failure`, as std::expected's unexpect constructor.
  result(unexpect_t, const cudamem::error& failure) noexcept : result(failure) {}
  /// Copies (trivially, like the error it may hold).
  result(const result&) = default;
  /// Copies (trivially).
  result& operator=(const result&) = default;
  /// Holds `failure` from now on.
  result& operator=(const cudamem::error& failure) noexcept { return *this = result(failure); }

  /// Success from now on (drops the error).
  void emplace() noexcept { has_value_ = true; }
  /// Exchanges the states of two results.
  void swap(result& other) noexcept {
    const result held = *this;
    *this = other;
    other = held;
  }
  /// Exchanges the states of two results.
  friend void swap(result& a, result& b) noexcept { a.swap(b); }

  /// True on success.
  [[nodiscard]] bool has_value() const noexcept { return has_value_; }
  /// True on success.
  explicit operator bool() const noexcept { return has_value_; }
  /// Nothing; precondition has_value() (checked with an abort in debug builds).
  void operator*() const noexcept {
#ifndef NDEBUG
    if (!has_value_) detail::bad_result_access("status::operator*", &error_);
#endif
  }
  ///@{
  /// Nothing on success; on an error, prints the message and aborts (in every build: the part of
  /// std::expected's exception).
  void value() const& noexcept { check_value(); }
  void value() && noexcept { check_value(); }
  ///@}
  ///@{
  /// The error. Precondition: !has_value() (checked with an abort in debug builds).
  [[nodiscard]] const cudamem::error& error() const& noexcept { return check_error(), error_; }
  [[nodiscard]] cudamem::error& error() & noexcept { return check_error(), error_; }
  [[nodiscard]] const cudamem::error&& error() const&& noexcept { return check_error(), std::move(error_); }
  [[nodiscard]] cudamem::error&& error() && noexcept { return check_error(), std::move(error_); }
  ///@}
  ///@{
  /// The error, or `fallback` (converted to error) on success.
  template <class G = cudamem::error>
  [[nodiscard]] cudamem::error error_or(G&& fallback) const& {
    return has_value_ ? static_cast<cudamem::error>(std::forward<G>(fallback)) : error_;
  }
  template <class G = cudamem::error>
  [[nodiscard]] cudamem::error error_or(G&& fallback) && {
    return has_value_ ? static_cast<cudamem::error>(std::forward<G>(fallback)) : std::move(error_);
  }
  ///@}

  ///@{
  /// On success, `f()`, which returns a result; else this error as that result type.
  template <class F>
  auto and_then(F&& f) & {
    return and_then_impl(*this, std::forward<F>(f));
  }
  template <class F>
  auto and_then(F&& f) const& {
    return and_then_impl(*this, std::forward<F>(f));
  }
  template <class F>
  auto and_then(F&& f) && {
    return and_then_impl(std::move(*this), std::forward<F>(f));
  }
  template <class F>
  auto and_then(F&& f) const&& {
    return and_then_impl(std::move(*this), std::forward<F>(f));
  }
  ///@}
  ///@{
  /// On success, `f()` wrapped in a result (a status when `f` returns void); else this error.
  template <class F>
  auto transform(F&& f) & {
    return transform_impl(*this, std::forward<F>(f));
  }
  template <class F>
  auto transform(F&& f) const& {
    return transform_impl(*this, std::forward<F>(f));
  }
  template <class F>
  auto transform(F&& f) && {
    return transform_impl(std::move(*this), std::forward<F>(f));
  }
  template <class F>
  auto transform(F&& f) const&& {
    return transform_impl(std::move(*this), std::forward<F>(f));
  }
  ///@}
  ///@{
  /// On an error, `f(error())`, which returns a status; else success.
  template <class F>
  auto or_else(F&& f) & {
    return or_else_impl(*this, std::forward<F>(f));
  }
  template <class F>
  auto or_else(F&& f) const& {
    return or_else_impl(*this, std::forward<F>(f));
  }
  template <class F>
  auto or_else(F&& f) && {
    return or_else_impl(std::move(*this), std::forward<F>(f));
  }
  template <class F>
  auto or_else(F&& f) const&& {
    return or_else_impl(std::move(*this), std::forward<F>(f));
  }
  ///@}
  ///@{
  /// On an error, a status holding `f(error())`, which returns an error; else success.
  template <class F>
  result transform_error(F&& f) & {
    return transform_error_impl(*this, std::forward<F>(f));
  }
  template <class F>
  result transform_error(F&& f) const& {
    return transform_error_impl(*this, std::forward<F>(f));
  }
  template <class F>
  result transform_error(F&& f) && {
    return transform_error_impl(std::move(*this), std::forward<F>(f));
  }
  template <class F>
  result transform_error(F&& f) const&& {
    return transform_error_impl(std::move(*this), std::forward<F>(f));
  }
  ///@}

  /// Equal when both succeeded, or both failed with equal errors.
  friend bool operator==(const result& a, const result& b) noexcept {
    return a.has_value_ == b.has_value_ && (a.has_value_ || a.error_ == b.error_);
  }
  /// True when this failed with an error equal to `failure` (as comparing with std::unexpected).
  friend bool operator==(const result& a, const cudamem::error& failure) noexcept {
    return !a.has_value_ && a.error_ == failure;
  }

 private:
  template <class Self, class F>
  static auto and_then_impl(Self&& self, F&& f) {
    using next = std::remove_cvref_t<std::invoke_result_t<F>>;
    static_assert(detail::is_result<next>, "status::and_then: the function must return a cudamem::result");
    if (self.has_value_) return detail::invoke(std::forward<F>(f));
    return next(unexpect, std::forward<Self>(self).error_);
  }
  template <class Self, class F>
  static auto transform_impl(Self&& self, F&& f) {
    using next = std::remove_cv_t<std::invoke_result_t<F>>;
    if constexpr (std::is_void_v<next>) {
      if (!self.has_value_) return result(unexpect, std::forward<Self>(self).error_);
      detail::invoke(std::forward<F>(f));
      return result();
    } else {
      if (!self.has_value_) return result<next>(unexpect, std::forward<Self>(self).error_);
      return result<next>(detail::from_invoke_t{}, std::forward<F>(f));
    }
  }
  template <class Self, class F>
  static auto or_else_impl(Self&& self, F&& f) {
    using next = std::remove_cvref_t<std::invoke_result_t<F, decltype((std::forward<Self>(self).error_))>>;
    static_assert(detail::is_result<next> && std::is_void_v<typename next::value_type>,
                  "status::or_else: the function must return a cudamem::status");
    if (self.has_value_) return next();
    return detail::invoke(std::forward<F>(f), std::forward<Self>(self).error_);
  }
  template <class Self, class F>
  static result transform_error_impl(Self&& self, F&& f) {
    using next = std::remove_cv_t<std::invoke_result_t<F, decltype((std::forward<Self>(self).error_))>>;
    static_assert(std::is_same_v<next, cudamem::error>,
                  "status::transform_error: the function must return a cudamem::error (results have one error type)");
    if (self.has_value_) return result();
    return result(unexpect, detail::invoke(std::forward<F>(f), std::forward<Self>(self).error_));
  }
  void check_value() const noexcept {
    if (!has_value_) [[unlikely]]
      detail::bad_result_access("status::value()", &error_);
  }
  void check_error() const noexcept {
#ifndef NDEBUG
    if (has_value_) detail::bad_result_access("status::error()", nullptr);
#endif
  }

  union {
    char none_ = 0;
    cudamem::error error_;
  };
  bool has_value_;
};

/// An expected-style result: a T or an error, with the interface of std::expected<T, error> (a
/// subset that code written for std::expected compiles against), without exceptions:
///   - value() on an error prints the message and aborts, in every build (std::expected throws);
///     operator* and operator-> are unchecked (an abort in debug builds), as in std::expected.
///   - The error plays the part of std::unexpected: `return error(...)` and `r == some_error`.
///   - Not constexpr, and never trivially copyable (status is).
/// cudamem/interop/expected.hpp converts it to cuda::std::expected<T, error>. Why not
/// cuda::std::expected itself: docs/decisions.md (compile time).
template <class T>
class CUDAMEM_DETAIL_NODISCARD_RESULT result {
  static_assert(std::is_object_v<T> && !std::is_array_v<T>, "result<T>: T must be a non-array object type");
  static_assert(!std::is_same_v<std::remove_cv_t<T>, cudamem::error> &&
                    !std::is_same_v<std::remove_cv_t<T>, unexpect_t> &&
                    !std::is_same_v<std::remove_cv_t<T>, std::in_place_t>,
                "result<T>: T must not be error, unexpect_t or in_place_t");
  template <class>
  friend class result;

  // std::expected's rule for converting from result<U>: T must not itself be made from the result
  // (a bool is made from anything), or the conversion would be ambiguous.
  template <class U, class UF>
  static constexpr bool converts_from =
      std::is_constructible_v<T, UF> &&
      (std::is_same_v<std::remove_cv_t<T>, bool> ||
       !(std::is_constructible_v<T, result<U>&> || std::is_constructible_v<T, result<U>> ||
         std::is_constructible_v<T, const result<U>&> || std::is_constructible_v<T, const result<U>> ||
         std::is_convertible_v<result<U>&, T> || std::is_convertible_v<result<U>, T> ||
         std::is_convertible_v<const result<U>&, T> || std::is_convertible_v<const result<U>, T>));

 public:
  /// T.
  using value_type = T;
  /// cudamem::error.
  using error_type = cudamem::error;
  /// The result type for values of type U, as std::expected::rebind.
  template <class U>
  using rebind = result<U>;

  /// A success holding T() (only for default-constructible T).
  result() noexcept(std::is_nothrow_default_constructible_v<T>)
    requires std::is_default_constructible_v<T>
      : has_value_(true) {
    ::new (value_address()) T();
  }
  /// Copies the value or the error of `other` (only for copyable T).
  result(const result& other) noexcept(std::is_nothrow_copy_constructible_v<T>)
    requires std::is_copy_constructible_v<T>
      : has_value_(other.has_value_) {
    if (has_value_) ::new (value_address()) T(other.value_);
    else ::new (&error_) cudamem::error(other.error_);
  }
  /// Moves the value or copies the error of `other` (only for movable T).
  result(result&& other) noexcept(std::is_nothrow_move_constructible_v<T>)
    requires std::is_move_constructible_v<T>
      : has_value_(other.has_value_) {
    if (has_value_) ::new (value_address()) T(std::move(other.value_));
    else ::new (&error_) cudamem::error(other.error_);
  }
  /// The value of `other` converted to T, or its error; explicit where the conversion is.
  template <class U>
    requires converts_from<U, const U&>
  explicit(!std::is_convertible_v<const U&, T>) result(const result<U>& other) : has_value_(other.has_value_) {
    if (has_value_) ::new (value_address()) T(other.value_);
    else ::new (&error_) cudamem::error(other.error_);
  }
  /// The value of `other` moved and converted to T, or its error; explicit where the conversion is.
  template <class U>
    requires converts_from<U, U>
  explicit(!std::is_convertible_v<U, T>) result(result<U>&& other) : has_value_(other.has_value_) {
    if (has_value_) ::new (value_address()) T(std::move(other.value_));
    else ::new (&error_) cudamem::error(other.error_);
  }
  /// A success holding T made from `value`; explicit where that conversion is (as std::expected).
  template <class U = std::remove_cv_t<T>>
    requires(!std::is_same_v<std::remove_cvref_t<U>, std::in_place_t> &&
             !std::is_same_v<std::remove_cvref_t<U>, unexpect_t> && !std::is_same_v<std::remove_cvref_t<U>, result> &&
             !std::is_same_v<std::remove_cvref_t<U>, cudamem::error> && std::is_constructible_v<T, U> &&
             !(std::is_same_v<std::remove_cv_t<T>, bool> && detail::is_result<std::remove_cvref_t<U>>))
  explicit(!std::is_convertible_v<U, T>) result(U&& value) noexcept(std::is_nothrow_constructible_v<T, U>)
      : has_value_(true) {
    ::new (value_address()) T(std::forward<U>(value));
  }
  /// A success holding T(args...).
  template <class... Args>
    requires std::is_constructible_v<T, Args...>
  explicit result(std::in_place_t, Args&&... args) noexcept(std::is_nothrow_constructible_v<T, Args...>)
      : has_value_(true) {
    ::new (value_address()) T(std::forward<Args>(args)...);
  }
  /// A success holding T(list, args...).
  template <class V, class... Args>
    requires std::is_constructible_v<T, std::initializer_list<V>&, Args...>
  explicit result(std::in_place_t, std::initializer_list<V> list, Args&&... args) : has_value_(true) {
    ::new (value_address()) T(list, std::forward<Args>(args)...);
  }
  /// A failure holding `failure`; implicit, so a function can `return error(...)` (it plays the
  /// part of std::unexpected).
  result(const cudamem::error& failure) noexcept : has_value_(false) { ::new (&error_) cudamem::error(failure); }
  /// A failure holding `failure`, as std::expected's unexpect constructor.
  result(unexpect_t, const cudamem::error& failure) noexcept : result(failure) {}

  /// Destroys the value, if any.
  ~result() {
    if (has_value_) value_.~T();
  }

  /// Assigns value to value and error to error; between a value and an error, destroys one and
  /// makes the other. If making T throws, this keeps what it held (std::expected's guarantee).
  result& operator=(const result& other)
    requires(std::is_copy_constructible_v<T> && std::is_copy_assignable_v<T>)
  {
    if (has_value_ && other.has_value_) value_ = other.value_;
    else if (has_value_) become_error(other.error_);
    else if (other.has_value_) become_value(other.value_);
    else error_ = other.error_;
    return *this;
  }
  /// As copy assignment, moving the value.
  result& operator=(result&& other) noexcept(std::is_nothrow_move_assignable_v<T> &&
                                             std::is_nothrow_move_constructible_v<T>)
    requires(std::is_move_constructible_v<T> && std::is_move_assignable_v<T>)
  {
    if (has_value_ && other.has_value_) value_ = std::move(other.value_);
    else if (has_value_) become_error(other.error_);
    else if (other.has_value_) become_value(std::move(other.value_));
    else error_ = other.error_;
    return *this;
  }
  /// Holds T made from `value` from now on (assigned to the value, if there is one).
  template <class U = std::remove_cv_t<T>>
    requires(!std::is_same_v<std::remove_cvref_t<U>, result> &&
             !std::is_same_v<std::remove_cvref_t<U>, cudamem::error> && !detail::is_result<std::remove_cvref_t<U>> &&
             std::is_constructible_v<T, U> && std::is_assignable_v<T&, U>)
  result& operator=(U&& value) {
    if (has_value_) value_ = std::forward<U>(value);
    else become_value(std::forward<U>(value));
    return *this;
  }
  /// Holds `failure` from now on.
  result& operator=(const cudamem::error& failure) noexcept {
    if (has_value_) become_error(failure);
    else error_ = failure;
    return *this;
  }

  ///@{
  /// Destroys what this holds and makes the value T(args...); T must be made without throwing.
  template <class... Args>
    requires std::is_nothrow_constructible_v<T, Args...>
  T& emplace(Args&&... args) noexcept {
    if (has_value_) value_.~T();
    ::new (value_address()) T(std::forward<Args>(args)...);
    has_value_ = true;
    return value_;
  }
  template <class V, class... Args>
    requires std::is_nothrow_constructible_v<T, std::initializer_list<V>&, Args...>
  T& emplace(std::initializer_list<V> list, Args&&... args) noexcept {
    if (has_value_) value_.~T();
    ::new (value_address()) T(list, std::forward<Args>(args)...);
    has_value_ = true;
    return value_;
  }
  ///@}

  /// Exchanges the states of two results (values with swap, a value with an error by moving).
  void swap(result& other) noexcept(std::is_nothrow_move_constructible_v<T> && std::is_nothrow_swappable_v<T>)
    requires(std::is_swappable_v<T> && std::is_move_constructible_v<T>)
  {
    if (has_value_ && other.has_value_) {
      using std::swap;
      swap(value_, other.value_);
    } else if (!has_value_ && !other.has_value_) {
      std::swap(error_, other.error_);
    } else if (!has_value_) {
      other.swap(*this);
    } else {
      const cudamem::error held = other.error_;
      construct_over_error(other, std::move(value_));
      value_.~T();
      ::new (&error_) cudamem::error(held);
      has_value_ = false;
    }
  }
  /// Exchanges the states of two results.
  friend void swap(result& a, result& b) noexcept(noexcept(a.swap(b)))
    requires(std::is_swappable_v<T> && std::is_move_constructible_v<T>)
  {
    a.swap(b);
  }

  /// True when this holds a value.
  [[nodiscard]] bool has_value() const noexcept { return has_value_; }
  /// True when this holds a value.
  explicit operator bool() const noexcept { return has_value_; }

  ///@{
  /// The value. On an error, prints the message and aborts, in every build (the part of
  /// std::expected's exception).
  [[nodiscard]] T& value() & noexcept { return check_value(), value_; }
  [[nodiscard]] const T& value() const& noexcept { return check_value(), value_; }
  [[nodiscard]] T&& value() && noexcept { return check_value(), std::move(value_); }
  [[nodiscard]] const T&& value() const&& noexcept { return check_value(), std::move(value_); }
  ///@}
  ///@{
  /// The value. Precondition: has_value() (checked with an abort in debug builds only).
  [[nodiscard]] T& operator*() & noexcept { return assert_value(), value_; }
  [[nodiscard]] const T& operator*() const& noexcept { return assert_value(), value_; }
  [[nodiscard]] T&& operator*() && noexcept { return assert_value(), std::move(value_); }
  [[nodiscard]] const T&& operator*() const&& noexcept { return assert_value(), std::move(value_); }
  ///@}
  ///@{
  /// A pointer to the value. Precondition: has_value() (checked with an abort in debug builds only).
  [[nodiscard]] T* operator->() noexcept { return assert_value(), value_address(); }
  [[nodiscard]] const T* operator->() const noexcept { return assert_value(), __builtin_addressof(value_); }
  ///@}

  ///@{
  /// The error. Precondition: !has_value() (checked with an abort in debug builds).
  [[nodiscard]] const cudamem::error& error() const& noexcept { return check_error(), error_; }
  [[nodiscard]] cudamem::error& error() & noexcept { return check_error(), error_; }
  [[nodiscard]] const cudamem::error&& error() const&& noexcept { return check_error(), std::move(error_); }
  [[nodiscard]] cudamem::error&& error() && noexcept { return check_error(), std::move(error_); }
  ///@}

  ///@{
  /// The value (moved out of an rvalue result), or `fallback` converted to T when this holds an error.
  template <class U = std::remove_cv_t<T>>
  [[nodiscard]] T value_or(U&& fallback) const& {
    static_assert(std::is_copy_constructible_v<T> && std::is_convertible_v<U, T>,
                  "result::value_or: T must be copyable and the fallback convertible to T");
    return has_value_ ? value_ : static_cast<T>(std::forward<U>(fallback));
  }
  template <class U = std::remove_cv_t<T>>
  [[nodiscard]] T value_or(U&& fallback) && {
    static_assert(std::is_move_constructible_v<T> && std::is_convertible_v<U, T>,
                  "result::value_or: T must be movable and the fallback convertible to T");
    return has_value_ ? std::move(value_) : static_cast<T>(std::forward<U>(fallback));
  }
  ///@}
  ///@{
  /// The error, or `fallback` (converted to error) when this holds a value.
  template <class G = cudamem::error>
  [[nodiscard]] cudamem::error error_or(G&& fallback) const& {
    return has_value_ ? static_cast<cudamem::error>(std::forward<G>(fallback)) : error_;
  }
  template <class G = cudamem::error>
  [[nodiscard]] cudamem::error error_or(G&& fallback) && {
    return has_value_ ? static_cast<cudamem::error>(std::forward<G>(fallback)) : std::move(error_);
  }
  ///@}

  ///@{
  /// Calls `f(value())` (with this result's const and value category), which returns a result, when
  /// this holds a value; else returns this error as that result type.
  template <class F>
  auto and_then(F&& f) & {
    return and_then_impl(*this, std::forward<F>(f));
  }
  template <class F>
  auto and_then(F&& f) const& {
    return and_then_impl(*this, std::forward<F>(f));
  }
  template <class F>
  auto and_then(F&& f) && {
    return and_then_impl(std::move(*this), std::forward<F>(f));
  }
  template <class F>
  auto and_then(F&& f) const&& {
    return and_then_impl(std::move(*this), std::forward<F>(f));
  }
  ///@}
  ///@{
  /// `f(value())` wrapped in a result (a status when `f` returns void) when this holds a value;
  /// else this error.
  template <class F>
  auto transform(F&& f) & {
    return transform_impl(*this, std::forward<F>(f));
  }
  template <class F>
  auto transform(F&& f) const& {
    return transform_impl(*this, std::forward<F>(f));
  }
  template <class F>
  auto transform(F&& f) && {
    return transform_impl(std::move(*this), std::forward<F>(f));
  }
  template <class F>
  auto transform(F&& f) const&& {
    return transform_impl(std::move(*this), std::forward<F>(f));
  }
  ///@}
  ///@{
  /// Calls `f(error())`, which returns a `result<T>`, when this holds an error; else returns this
  /// value (moved out of an rvalue result).
  template <class F>
  auto or_else(F&& f) & {
    return or_else_impl(*this, std::forward<F>(f));
  }
  template <class F>
  auto or_else(F&& f) const& {
    return or_else_impl(*this, std::forward<F>(f));
  }
  template <class F>
  auto or_else(F&& f) && {
    return or_else_impl(std::move(*this), std::forward<F>(f));
  }
  template <class F>
  auto or_else(F&& f) const&& {
    return or_else_impl(std::move(*this), std::forward<F>(f));
  }
  ///@}
  ///@{
  /// A result holding `f(error())`, which returns an error, when this holds an error; else this
  /// value. For example `.transform_error([](const error& e) { return e.with_api("load"); })`.
  template <class F>
  result transform_error(F&& f) & {
    return transform_error_impl(*this, std::forward<F>(f));
  }
  template <class F>
  result transform_error(F&& f) const& {
    return transform_error_impl(*this, std::forward<F>(f));
  }
  template <class F>
  result transform_error(F&& f) && {
    return transform_error_impl(std::move(*this), std::forward<F>(f));
  }
  template <class F>
  result transform_error(F&& f) const&& {
    return transform_error_impl(std::move(*this), std::forward<F>(f));
  }
  ///@}

  // The result side of each comparison is deduced (R is this result), so that nothing converts to
  // a result on the way in: a comparison with a value would otherwise find itself again.
  /// Equal when both hold equal values, or both equal errors.
  template <class R, class U>
    requires(std::is_same_v<R, result> && !std::is_void_v<U> &&
             requires(const T& a, const U& b) { requires std::is_convertible_v<decltype(a == b), bool>; })
  friend bool operator==(const R& a, const result<U>& b) {
    if (a.has_value() != b.has_value()) return false;
    return a.has_value() ? static_cast<bool>(*a == *b) : a.error() == b.error();
  }
  /// True when this holds a value equal to `value`.
  template <class R, class U>
    requires(std::is_same_v<R, result> && !detail::is_result<U> && !std::is_same_v<U, cudamem::error> &&
             requires(const T& a, const U& b) { requires std::is_convertible_v<decltype(a == b), bool>; })
  friend bool operator==(const R& a, const U& value) {
    return a.has_value() && static_cast<bool>(*a == value);
  }
  /// True when this holds an error equal to `failure` (as comparing with std::unexpected).
  template <class R>
    requires std::is_same_v<R, result>
  friend bool operator==(const R& a, const cudamem::error& failure) noexcept {
    return !a.has_value() && a.error() == failure;
  }

 private:
  // transform builds the value from f's return value in place.
  template <class F, class... Args>
  result(detail::from_invoke_t, F&& f, Args&&... args) : has_value_(true) {
    ::new (value_address()) T(detail::invoke(std::forward<F>(f), std::forward<Args>(args)...));
  }

  template <class Self, class F>
  static auto and_then_impl(Self&& self, F&& f) {
    using next = std::remove_cvref_t<std::invoke_result_t<F, decltype((std::forward<Self>(self).value_))>>;
    static_assert(detail::is_result<next>, "result::and_then: the function must return a cudamem::result");
    if (self.has_value_) return static_cast<next>(detail::invoke(std::forward<F>(f), std::forward<Self>(self).value_));
    return next(unexpect, std::forward<Self>(self).error_);
  }
  template <class Self, class F>
  static auto transform_impl(Self&& self, F&& f) {
    using next = std::remove_cv_t<std::invoke_result_t<F, decltype((std::forward<Self>(self).value_))>>;
    if constexpr (std::is_void_v<next>) {
      if (!self.has_value_) return result<void>(unexpect, std::forward<Self>(self).error_);
      detail::invoke(std::forward<F>(f), std::forward<Self>(self).value_);
      return result<void>();
    } else {
      if (!self.has_value_) return result<next>(unexpect, std::forward<Self>(self).error_);
      return result<next>(detail::from_invoke_t{}, std::forward<F>(f), std::forward<Self>(self).value_);
    }
  }
  template <class Self, class F>
  static auto or_else_impl(Self&& self, F&& f) {
    using next = std::remove_cvref_t<std::invoke_result_t<F, decltype((std::forward<Self>(self).error_))>>;
    static_assert(detail::is_result<next> && std::is_same_v<typename next::value_type, T>,
                  "result<T>::or_else: the function must return a cudamem::result<T>");
    if (self.has_value_) return next(std::in_place, std::forward<Self>(self).value_);
    return static_cast<next>(detail::invoke(std::forward<F>(f), std::forward<Self>(self).error_));
  }
  template <class Self, class F>
  static result transform_error_impl(Self&& self, F&& f) {
    using next = std::remove_cv_t<std::invoke_result_t<F, decltype((std::forward<Self>(self).error_))>>;
    static_assert(std::is_same_v<next, cudamem::error>,
                  "result::transform_error: the function must return a cudamem::error (results have one error type)");
    if (self.has_value_) return result(std::in_place, std::forward<Self>(self).value_);
    return result(unexpect, detail::invoke(std::forward<F>(f), std::forward<Self>(self).error_));
  }

  T* value_address() noexcept { return __builtin_addressof(value_); }
  // Makes T over the storage of `target`'s error. If that throws, the error is put back first, so
  // `target` still holds it (error is trivially copyable; its copy cannot throw).
  template <class... Args>
  static void construct_over_error(result& target, Args&&... args) {
#if CUDAMEM_DETAIL_EXCEPTIONS
    const cudamem::error held = target.error_;
    try {
      ::new (target.value_address()) T(std::forward<Args>(args)...);
    } catch (...) {
      ::new (&target.error_) cudamem::error(held);
      throw;
    }
#else
    ::new (target.value_address()) T(std::forward<Args>(args)...);
#endif
    target.has_value_ = true;
  }
  // The standard's reinit-expected, error -> value: the error stays if making T throws.
  template <class... Args>
  void become_value(Args&&... args) {
    if constexpr (std::is_nothrow_constructible_v<T, Args...>) {
      ::new (value_address()) T(std::forward<Args>(args)...);
      has_value_ = true;
    } else if constexpr (std::is_nothrow_move_constructible_v<T>) {
      T made(std::forward<Args>(args)...);
      ::new (value_address()) T(std::move(made));
      has_value_ = true;
    } else {
      construct_over_error(*this, std::forward<Args>(args)...);
    }
  }
  // Value -> error: nothing here can throw. `failure` is copied first: it may live inside the value.
  void become_error(const cudamem::error& failure) noexcept {
    const cudamem::error held = failure;
    value_.~T();
    has_value_ = false;
    ::new (&error_) cudamem::error(held);
  }
  void check_value() const noexcept {
    if (!has_value_) [[unlikely]]
      detail::bad_result_access("result::value()", &error_);
  }
  void assert_value() const noexcept {
#ifndef NDEBUG
    if (!has_value_) detail::bad_result_access("result::operator*", &error_);
#endif
  }
  void check_error() const noexcept {
#ifndef NDEBUG
    if (has_value_) detail::bad_result_access("result::error()", nullptr);
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

/// Whether the last kernel launch on the calling thread failed: cudaGetLastError() (which also
/// clears a non-sticky error) as a status whose message names `kernel_name`, such as
/// "scale: kernel launch: cudaErrorInvalidConfiguration: invalid configuration argument". Call it
/// right after the launch: `scale<<<blocks, threads, 0, s.get()>>>(...);
/// CUDAMEM_TRY(cudamem::check_launch("scale"));`. It sees launch errors (a bad configuration, too
/// much shared memory, no kernel image for the device), not errors of the kernel's execution,
/// which the next synchronizing call reports; a sticky error from earlier work shows here too
/// (is_sticky()). Does not synchronize.
[[nodiscard]] inline status check_launch(const char* kernel_name) noexcept {
  const cudaError_t code = cudaGetLastError();
  if (code == cudaSuccess) [[likely]]
    return {};
  return error(code, kernel_name, "kernel launch");
}

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
// The installed handler; null selects the default. One per process, also across shared libraries
// (detail/process_wide.hpp); null rather than the default's address, so that the slot never points
// into a library that was unloaded.
struct CUDAMEM_DETAIL_PROCESS_WIDE release_handler_slot {
  release_handler handler = nullptr;
};
}  // namespace detail

/// Replaces the process-wide release handler (null restores the default, which prints one line to
/// stderr) and returns the previous one. Thread-safe; one handler per process, also when several
/// shared libraries use cudamem.
inline release_handler set_release_handler(release_handler handler) noexcept {
  if (handler == &detail::default_release_handler) handler = nullptr;
  const release_handler previous =
      __atomic_exchange_n(&detail::process_wide<detail::release_handler_slot>().handler, handler, __ATOMIC_ACQ_REL);
  return previous != nullptr ? previous : &detail::default_release_handler;
}

/// Passes `failure` to the current release handler. The library's destructors call it; a user's
/// own RAII types may too, so that their failed releases are reported the same way.
inline void report_release_failure(const error& failure) noexcept {
  const release_handler handler =
      __atomic_load_n(&detail::process_wide<detail::release_handler_slot>().handler, __ATOMIC_ACQUIRE);
  (handler != nullptr ? handler : &detail::default_release_handler)(failure);
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

/// For destructors: reports a failed release to the handler. Silent when the CUDA runtime has
/// already unloaded (cudaErrorCudartUnloading, the driver's CUDA_ERROR_DEINITIALIZED): an object
/// with static storage duration released at exit, after CUDA, has nothing left to free.
inline void check_release(cudaError_t code, const char* cuda_call) noexcept {
  if (code == cudaSuccess || code == cudaErrorCudartUnloading) [[likely]]
    return;
  if (!error::is_sticky_status(code)) (void)cudaGetLastError();
  report_release_failure(error(code, nullptr, cuda_call));
}
}  // namespace detail

}  // namespace cudamem

/// Propagates an error: `CUDAMEM_TRY(copy(a, b));` evaluates its argument (a status or result) once
/// and, when it holds an error, returns that error from the enclosing function, which must return a
/// status or a result. The value of a successful result is discarded.
#define CUDAMEM_TRY(...)                                                                                    \
  do {                                                                                                      \
    if (auto cudamem_try_status_ = (__VA_ARGS__); !cudamem_try_status_) return cudamem_try_status_.error(); \
  } while (0)
