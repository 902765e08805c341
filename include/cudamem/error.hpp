// SPDX-License-Identifier: MIT
/// \file
/// Errors and results: every fallible call returns `result<T>` (a subset of std::expected<T, error>) or `status`
/// (`result<void>`); nothing throws. Also check_launch, the release handler and CUDAMEM_TRY.
///
///     errc, error_domain; to_string(errc), to_string(error_domain)
///     error: code(), domain(), native_code(), cuda_status(), api(), call(), message(), is_sticky(), with_api(api)
///     error::oom() -> const out_of_memory_info*   an allocation's failure: what was asked, what the device held
///     result<T>: has_value(), value(), error(), value_or, and_then, transform, or_else, transform_error (as expected)
///     status = result<void>                what a fallible call that produces nothing returns
///     CUDAMEM_TRY(expr)                    returns the error of a failed result or status
///     status check_launch(kernel_name)     a launch's error, after <<<>>>
///     set_release_handler(handler)         where destructors' failed releases go (default: print)
#pragma once

#include <cudamem/detail/config.hpp>
#include <cudamem/detail/process_wide.hpp>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <new>
#include <type_traits>
#include <utility>

// nvcc warns (#2810-D) at each move assignment of a [[nodiscard]] class: there the functions carry it.
#if defined(__CUDACC__)
#define CUDAMEM_DETAIL_NODISCARD_RESULT
#else
#define CUDAMEM_DETAIL_NODISCARD_RESULT [[nodiscard]]
#endif

namespace cudamem {

/// Why an operation failed, portably: `cuda` or `nccl` when that library reported it, else cudamem's own catch.
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
  system,            ///< the operating system returned an error (a socket call); error::native_code() is its errno
  out_of_memory_retry,  ///< given to a caching_pool's out-of-memory hook: the cache is given back, a retry follows
};
/// The name of an errc value, such as "extents_mismatch"; "unknown" for a value outside the enum.
[[nodiscard]] constexpr const char* to_string(errc code) noexcept {
  constexpr const char* names[] = {"cuda",          "invalid_argument", "out_of_range",
                                   "size_overflow", "extents_mismatch", "overlap",
                                   "not_supported", "out_of_memory",    "capture_active",
                                   "nccl",          "system",           "out_of_memory_retry"};
  const unsigned index = static_cast<unsigned>(code) - 1u;
  return index < sizeof names / sizeof *names ? names[index] : "unknown";
}

/// Who reported an error, and so what error::native_code() means.
enum class error_domain : unsigned char {
  library,  ///< cudamem caught it; the native code is the errc
  cuda,     ///< the CUDA runtime reported it; the native code is the cudaError_t
  nccl,     ///< NCCL reported it; the native code is the ncclResult_t
  system,   ///< the operating system reported it; the native code is the errno
};
/// "library", "cuda", "nccl", "system", "unknown"
[[nodiscard]] constexpr const char* to_string(error_domain domain) noexcept {
  constexpr const char* names[] = {"library", "cuda", "nccl", "system"};
  return static_cast<unsigned>(domain) < 4u ? names[static_cast<unsigned>(domain)] : "unknown";
}

/// What an allocation that failed for want of memory asked for, and what its device held at that moment
/// (error::oom()). Gathered only on the failure path; a figure CUDA could not give reads 0 and has() says so.
struct out_of_memory_info {
  /// The groups of figures, as bits of `known`.
  enum figure : unsigned {
    device_memory = 1,  ///< device_free_bytes, device_total_bytes (cudaMemGetInfo)
    pool = 2,           ///< pool_*: the device's current memory pool, cudaMallocAsync's (cudaMemPoolGetAttribute)
    graphs = 4,         ///< graph_*: memory of graphs' allocation nodes (cudaDeviceGetGraphMemAttribute)
    cache = 8,          ///< cached_bytes, largest_cached_block: a caching_pool's, before it gave them back
  };
  std::uint64_t requested_bytes = 0;       ///< what the failed allocation asked for (a caching pool: its size class)
  std::uint64_t device_free_bytes = 0;     ///< free memory of the device
  std::uint64_t device_total_bytes = 0;    ///< total memory of the device
  std::uint64_t pool_reserved_bytes = 0;   ///< cudaMemPoolAttrReservedMemCurrent
  std::uint64_t pool_used_bytes = 0;       ///< cudaMemPoolAttrUsedMemCurrent
  std::uint64_t graph_reserved_bytes = 0;  ///< cudaGraphMemAttrReservedMemCurrent
  std::uint64_t graph_used_bytes = 0;      ///< cudaGraphMemAttrUsedMemCurrent
  std::uint64_t cached_bytes = 0;          ///< bytes the caching pool held in its caches when the upstream refused
  std::uint64_t largest_cached_block = 0;  ///< the largest of those blocks
  int device = -1;                         ///< the device's ordinal; -1: host memory, or not known
  unsigned known = 0;                      ///< the figures read: bits of `figure`
  [[nodiscard]] bool has(figure f) const noexcept { return (known & f) != 0; }  ///< Whether figures `f` were read.
};

/// What went wrong: who reported it, its code, the failed call and a one-line message. Trivially copyable.
class error {
 public:
  static constexpr std::size_t max_message = 255;  ///< The longest message kept; a longer one ends in "...".
  static constexpr std::size_t max_name = 47;  ///< The longest api() and call() kept (they are copied).
  /// An error CUDA reported from `cuda_call`, inside the library function `api` (may be null).
  [[gnu::cold]] error(cudaError_t status, const char* api, const char* cuda_call) noexcept
      : error(error_domain::cuda, static_cast<int>(status), api, cuda_call, cudaGetErrorName(status),
              cudaGetErrorString(status)) {}
  /// Misuse caught by the library function `api` (null reads "cudamem"), described printf-style.
  [[gnu::format(printf, 4, 5), gnu::cold]] error(errc code, const char* api, const char* fmt, ...) noexcept;
  /// An error another library (NCCL) or the system reported from `call` in `api`: "api: call: name: description" (null:
  /// left out).
  [[gnu::cold]] error(error_domain domain, int native_code, const char* api, const char* call, const char* name,
                      const char* description) noexcept;
  [[nodiscard]] error_domain domain() const noexcept { return domain_; }  ///< Who reported it: library, cuda, nccl.
  [[nodiscard]] int native_code() const noexcept { return native_; }  ///< Its cudaError_t, ncclResult_t or errc.
  /// errc::cuda, errc::nccl, errc::system, or what cudamem caught (the native code).
  [[nodiscard]] errc code() const noexcept {
    switch (domain_) {
      case error_domain::cuda: return errc::cuda;
      case error_domain::nccl: return errc::nccl;
      case error_domain::system: return errc::system;
      default: return errc(native_);
    }
  }
  /// The CUDA status; cudaSuccess if CUDA did not report it.
  [[nodiscard]] cudaError_t cuda_status() const noexcept {
    return domain_ == error_domain::cuda ? static_cast<cudaError_t>(native_) : cudaSuccess;
  }
  [[nodiscard]] const char* api() const noexcept { return has_api_ ? api_ : nullptr; }  ///< "copy", or null.
  [[nodiscard]] const char* call() const noexcept { return call_; }  ///< The CUDA or NCCL function, else the api.
  [[nodiscard]] const char* message() const noexcept { return text_; }  ///< One line: which call failed, and why.
  [[nodiscard]] bool is_sticky() const noexcept { return is_sticky_status(cuda_status()); }  ///< Context lost.
  /// This error, naming the api `outer_api`.
  [[nodiscard]] error with_api(const char* outer_api) const noexcept;
  /// What an allocation that ran out of memory asked for and found, readable without parsing the message; null for
  /// every other error. Set by every cudamem resource's failed allocation (cudaErrorMemoryAllocation, out_of_memory).
  [[nodiscard]] const out_of_memory_info* oom() const noexcept { return has_oom_ ? &oom_ : nullptr; }
  /// This error carrying `info`, its figures at the end of the message (replacing those it had).
  [[nodiscard]] error with_out_of_memory(const out_of_memory_info& info) const noexcept;
  /// Whether a CUDA status corrupts the context: the process must be restarted to use CUDA again.
  [[nodiscard]] static constexpr bool is_sticky_status(cudaError_t s) noexcept {
    return s == cudaErrorIllegalAddress || s == cudaErrorLaunchFailure || s == cudaErrorHardwareStackError ||
           s == cudaErrorIllegalInstruction || s == cudaErrorMisalignedAddress || s == cudaErrorInvalidAddressSpace ||
           s == cudaErrorInvalidPc || s == cudaErrorAssert || s == cudaErrorLaunchTimeout ||
           s == cudaErrorECCUncorrectable || s == cudaErrorContained || s == cudaErrorTensorMemoryLeak ||
           s == cudaErrorMpsClientTerminated || s == cudaErrorExternalDevice;
  }
  /// Equal when the same reporter gave the same code (as std::error_code); api, call and message not compared.
  friend bool operator==(const error& a, const error& b) noexcept {
    return a.domain_ == b.domain_ && a.native_ == b.native_;
  }
  friend bool operator==(const error& e, errc code) noexcept { return e.code() == code; }  ///< True when code() is.
  /// True when CUDA reported `status`: `if (e == cudaErrorMemoryAllocation)`.
  friend bool operator==(const error& e, cudaError_t status) noexcept {
    return e.domain_ == error_domain::cuda && e.native_ == static_cast<int>(status);
  }

 private:
  // Copies the names (max_name characters) and begins the message with "api: "; with_api keeps the rest.
  void start(const char* api, const char* call) noexcept;
  [[gnu::format(printf, 2, 3)]] void append(const char* fmt, ...) noexcept;
  // Appends to the message; one that gets too long is cut and ends in "...".
  [[gnu::format(printf, 2, 0)]] void vappend(const char* fmt, __builtin_va_list args) noexcept;
  void append_bytes(const char* label, std::uint64_t bytes) noexcept;  // "label 1.5 GiB"
  error_domain domain_;
  bool has_api_ = false;
  unsigned short detail_offset_ = 0;  // where the message continues after "api: "
  int native_;
  unsigned short length_ = 0;  // of text_, at most max_message
  unsigned short figures_at_ = 0;  // where oom_'s figures begin in the message
  bool has_oom_ = false;
  out_of_memory_info oom_;  // 80 bytes: a copy with the error, so it stays trivially copyable
  char api_[max_name + 1] = {};
  char call_[max_name + 1] = {};
  char text_[max_message + 1] = {};
};
static_assert(std::is_trivially_copyable_v<error>);
}  // namespace cudamem

// The formatting of errors and the messages of misuse are host code: nvcc's device pass (which defines __CUDA_ARCH__
// and compiles no host function) sees their declarations only, and not the C headers they use.
#if !defined(__CUDA_ARCH__)
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace cudamem {
inline error::error(errc code, const char* api, const char* fmt, ...) noexcept
    : domain_(error_domain::library), native_(static_cast<int>(code)) {
  if (api == nullptr) api = "cudamem";
  start(api, api);
  std::va_list args;
  va_start(args, fmt);
  vappend(fmt, args);
  va_end(args);
}
inline error::error(error_domain domain, int native_code, const char* api, const char* call, const char* name,
                    const char* description) noexcept
    : domain_(domain), native_(native_code) {
  if (call == nullptr) call = "?";
  start(api, call);
  append("%s", call);
  if (name != nullptr) append(": %s", name);
  if (description != nullptr) append(": %s", description);
}
inline error error::with_api(const char* outer_api) const noexcept {
  error outer = *this;
  if (outer_api == nullptr && domain_ == error_domain::library) outer_api = "cudamem";
  outer.start(outer_api, domain_ == error_domain::library ? outer_api : call_);
  const unsigned short begins = outer.length_;
  outer.append("%s", text_ + detail_offset_);
  const int figures_at = begins + (figures_at_ - detail_offset_);  // the figures' place in the longer prefix
  outer.figures_at_ = static_cast<unsigned short>(!has_oom_                    ? 0
                                                  : figures_at < outer.length_ ? figures_at
                                                                               : outer.length_);
  return outer;
}
inline error error::with_out_of_memory(const out_of_memory_info& info) const noexcept {
  error out = *this;
  if (out.has_oom_) out.length_ = out.figures_at_, out.text_[out.length_] = '\0';
  out.has_oom_ = true;
  out.oom_ = info;
  out.figures_at_ = out.length_;
  out.append_bytes("; asked", info.requested_bytes);
  if (info.device >= 0) out.append(" on device %d", info.device);
  if (info.has(out_of_memory_info::device_memory)) {
    out.append_bytes(": free", info.device_free_bytes);
    out.append_bytes(" of", info.device_total_bytes);
  }
  if (info.has(out_of_memory_info::pool)) {
    out.append_bytes(", pool reserved", info.pool_reserved_bytes);
    out.append_bytes(" used", info.pool_used_bytes);
  }
  if (info.has(out_of_memory_info::graphs)) {
    out.append_bytes(", graphs reserved", info.graph_reserved_bytes);
    out.append_bytes(" used", info.graph_used_bytes);
  }
  if (info.has(out_of_memory_info::cache)) {
    out.append_bytes(", cache held", info.cached_bytes);
    out.append_bytes(" (largest block", info.largest_cached_block);
    out.append(")");
  }
  return out;
}
inline void error::append_bytes(const char* label, std::uint64_t bytes) noexcept {
  if (bytes < 1024) return append("%s %llu B", label, static_cast<unsigned long long>(bytes));
  const char* const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes) / 1024.0;
  unsigned unit = 0;
  while (value >= 1024.0 && unit < 4) value /= 1024.0, ++unit;
  append("%s %.1f %s", label, value, units[unit]);
}
inline void error::start(const char* api, const char* call) noexcept {
  has_api_ = api != nullptr;
  std::snprintf(api_, sizeof api_, "%s", api != nullptr ? api : "");
  std::snprintf(call_, sizeof call_, "%s", call != nullptr ? call : "");
  length_ = 0, text_[0] = '\0';
  if (api != nullptr) append("%s: ", api);
  detail_offset_ = static_cast<unsigned short>(length_);
}
inline void error::append(const char* fmt, ...) noexcept {
  std::va_list args;
  va_start(args, fmt);
  vappend(fmt, args);
  va_end(args);
}
inline void error::vappend(const char* fmt, std::va_list args) noexcept {
  if (length_ >= max_message) return;
  const int written = std::vsnprintf(text_ + length_, sizeof text_ - length_, fmt, args);
  if (written < 0) return;
  const std::size_t length = length_ + static_cast<std::size_t>(written);
  length_ = static_cast<unsigned short>(length < max_message ? length : max_message);
  if (length > max_message) std::memcpy(text_ + max_message - 3, "...", 3);
}
}  // namespace cudamem
#endif

namespace cudamem {
/// Tag type for constructing a result that holds an error, as std::unexpect_t.
struct unexpect_t {
  explicit unexpect_t() = default;  ///< Explicit, so that `{}` never converts to the tag by accident.
};
inline constexpr unexpect_t unexpect{};  ///< The tag value: `result<T>(unexpect, failure)` holds `failure`.
template <class T>
class result;

namespace detail {
template <class T>
inline constexpr bool is_result = false;
template <class T>
inline constexpr bool is_result<result<T>> = true;
template <class U, class... Types>  // U, without reference and cv, is one of Types
inline constexpr bool is_any_of = (std::is_same_v<std::remove_cvref_t<U>, Types> || ...);
// What value() and operator* of an rvalue result<T> give: T, moved out, so that a reference bound to it extends the
// life of a temporary (std::expected gives T&&, which dangles once the result goes); T&& for a T that cannot move.
template <class T>
using moved_out_t = std::conditional_t<std::is_move_constructible_v<T>, T, T&&>;
// std::invoke without <functional> (costlier to compile than this header): callables and member pointers.
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
// Reading what a result does not hold (value(), always; operator* and error(), in debug builds) aborts.
[[noreturn, gnu::cold]] void bad_result_access(const char* what, const error* failure) noexcept;
// Tags of result<T>'s private constructors: from another result; from a function's value, made in place.
struct from_result_t {};
struct from_invoke_t {};
// What result<T> and status (Derived) share, once per value category (Self); every result<U> befriends it.
template <class Derived>
class result_base {
  Derived& self() noexcept { return static_cast<Derived&>(*this); }
  const Derived& self() const noexcept { return static_cast<const Derived&>(*this); }
  void check_error() const noexcept {
    check(false, false, std::is_same_v<Derived, result<void>> ? "status::error()" : "result::error()");
  }
  template <class Self>
  using value_of = typename std::remove_cvref_t<Self>::value_type;
  // and_then, and transform (`map`: f's value made in place), as they act on `self`'s value.
  template <bool map, class Self, class F>
  static auto then(Self&& self, F&& f) {
    using made = std::remove_cv_t<decltype(on_value(std::forward<Self>(self), std::forward<F>(f)))>;
    using next = std::conditional_t<map, result<made>, std::remove_cvref_t<made>>;
    static_assert(map || is_result<next>, "result::and_then: the function must return a cudamem::result");
    if (!self.has_value_) return next(unexpect, self.error_);
    if constexpr (!map) return static_cast<next>(on_value(std::forward<Self>(self), std::forward<F>(f)));
    else if constexpr (std::is_void_v<made>) return on_value(std::forward<Self>(self), std::forward<F>(f)), next();
    else return next(from_invoke_t{}, std::forward<F>(f), std::forward<Self>(self));
  }
  // or_else, and transform_error (`map`: f returns the new error), as they act on `self`'s error.
  template <bool map, class Self, class F>
  static auto otherwise(Self&& self, F&& f) {
    using made = std::remove_cv_t<decltype(detail::invoke(std::forward<F>(f), std::forward<Self>(self).error_))>;
    using next = std::conditional_t<map, Derived, std::remove_cvref_t<made>>;
    static_assert(!map || std::is_same_v<made, cudamem::error>,
                  "result::transform_error: the function must return a cudamem::error (results have one error type)");
    static_assert(map || (is_result<next> && std::is_same_v<typename next::value_type, value_of<Self>>),
                  "result::or_else: the function must return a result of the same type (a status for a status)");
    if (!self.has_value_) return next(detail::invoke(std::forward<F>(f), std::forward<Self>(self).error_));
    if constexpr (std::is_void_v<value_of<Self>>) return next();
    else return next(std::in_place, std::forward<Self>(self).value_);
  }

 protected:
  // Aborts unless this holds a value (`want_value`), or an error: when `always`, else in debug builds only.
  void check(bool want_value, [[maybe_unused]] bool always, const char* what) const noexcept {
#ifdef NDEBUG
    if (!always) return;
#endif
    if (self().has_value_ != want_value) [[unlikely]]
      bad_result_access(what, self().has_value_ ? nullptr : &self().error_);
  }
  template <class Self, class F>
  static decltype(auto) on_value([[maybe_unused]] Self&& self, F&& f) {  // f(value), or f() for a status
    if constexpr (std::is_void_v<value_of<Self>>) return std::forward<F>(f)();
    else return detail::invoke(std::forward<F>(f), std::forward<Self>(self).value_);
  }

 public:
  using error_type = cudamem::error;  ///< cudamem::error.
  template <class U>
  using rebind = result<U>;  ///< The result type for values of type U, as std::expected::rebind.
  [[nodiscard]] bool has_value() const noexcept { return self().has_value_; }  ///< True when this holds a value.
  explicit operator bool() const noexcept { return self().has_value_; }  ///< True when this holds a value.
  /// The error. Precondition: !has_value() (checked with an abort in debug builds).
  [[nodiscard]] const cudamem::error& error() const& noexcept { return check_error(), self().error_; }
  [[nodiscard]] cudamem::error& error() & noexcept { return check_error(), self().error_; }
  [[nodiscard]] const cudamem::error&& error() const&& noexcept { return check_error(), std::move(self().error_); }
  [[nodiscard]] cudamem::error&& error() && noexcept { return check_error(), std::move(self().error_); }
  /// The error, or `fallback` (converted to error) when this holds a value (one overload: errors are trivially copied).
  template <class G = cudamem::error>
  [[nodiscard]] cudamem::error error_or(G&& fallback) const {
    return self().has_value_ ? static_cast<cudamem::error>(std::forward<G>(fallback)) : self().error_;
  }
  /// As std::expected's, passing on this result's value category; a status's and_then and transform call `f()`.
  auto and_then(auto&& f) & { return then<false>(self(), std::forward<decltype(f)>(f)); }
  auto and_then(auto&& f) const& { return then<false>(self(), std::forward<decltype(f)>(f)); }
  auto and_then(auto&& f) && { return then<false>(std::move(self()), std::forward<decltype(f)>(f)); }
  auto and_then(auto&& f) const&& { return then<false>(std::move(self()), std::forward<decltype(f)>(f)); }
  auto transform(auto&& f) & { return then<true>(self(), std::forward<decltype(f)>(f)); }
  auto transform(auto&& f) const& { return then<true>(self(), std::forward<decltype(f)>(f)); }
  auto transform(auto&& f) && { return then<true>(std::move(self()), std::forward<decltype(f)>(f)); }
  auto transform(auto&& f) const&& { return then<true>(std::move(self()), std::forward<decltype(f)>(f)); }
  auto or_else(auto&& f) & { return otherwise<false>(self(), std::forward<decltype(f)>(f)); }
  auto or_else(auto&& f) const& { return otherwise<false>(self(), std::forward<decltype(f)>(f)); }
  auto or_else(auto&& f) && { return otherwise<false>(std::move(self()), std::forward<decltype(f)>(f)); }
  auto or_else(auto&& f) const&& { return otherwise<false>(std::move(self()), std::forward<decltype(f)>(f)); }
  Derived transform_error(auto&& f) & { return otherwise<true>(self(), std::forward<decltype(f)>(f)); }
  Derived transform_error(auto&& f) const& { return otherwise<true>(self(), std::forward<decltype(f)>(f)); }
  Derived transform_error(auto&& f) && { return otherwise<true>(std::move(self()), std::forward<decltype(f)>(f)); }
  Derived transform_error(auto&& f) const&& { return otherwise<true>(std::move(self()), std::forward<decltype(f)>(f)); }
  /// Exchanges the states of two results, where the result's member swap exists.
  friend void swap(Derived& a, Derived& b) noexcept(noexcept(a.swap(b)))
    requires requires { a.swap(b); }
  {
    a.swap(b);
  }
  /// True when this holds an error equal to `failure`, as std::unexpected (R is deduced: nothing converts to a result).
  template <class R>
    requires std::is_same_v<R, Derived>
  friend bool operator==(const R& a, const cudamem::error& failure) noexcept {
    return !a.has_value() && a.error() == failure;
  }
};
}  // namespace detail

/// `result<void>` (alias status): success, or an error, with the interface of std::expected<void, error>.
template <>
class [[nodiscard]] result<void> : public detail::result_base<result<void>> {
  template <class>
  friend class detail::result_base;

 public:
  using value_type = void;  ///< void: a success carries no value.
  result() noexcept : has_value_(true) {}  ///< Success.
  explicit result(std::in_place_t) noexcept : has_value_(true) {}  ///< Success, as std::expected's.
  /// A failure holding `failure`; implicit, so that a function can `return error(...)`.
  result(const cudamem::error& failure) noexcept : has_value_(false), error_(failure) {}
  result(unexpect_t, const cudamem::error& failure) noexcept : result(failure) {}  ///< A failure, as std::expected's.
  result& operator=(const cudamem::error& failure) noexcept { return *this = result(failure); }  ///< Holds `failure`.
  void emplace() noexcept { has_value_ = true; }  ///< Success from now on (drops the error).
  void swap(result& other) noexcept { std::swap(*this, other); }  ///< Exchanges the states of two results.
  void operator*() const noexcept { check(true, false, "status::operator*"); }  ///< Nothing; debug builds check.
  /// Nothing on success; on an error, prints the message and aborts, in every build (one overload: nothing moves).
  void value() const noexcept { check(true, true, "status::value()"); }
  /// Both succeeded, or failed with equal errors.
  friend bool operator==(const result& a, const result& b) noexcept {
    return a.has_value_ == b.has_value_ && (a.has_value_ || a.error_ == b.error_);
  }

 private:
  bool has_value_;  // first: a success is written and tested at the front of a 456-byte status, not at its end
  union {
    char none_ = 0;
    cudamem::error error_;
  };
};

/// A T or an error: a subset of std::expected<T, error> without exceptions (value() on an error aborts; the
/// error plays the part of std::unexpected). See docs/errors.md; interop/expected.hpp converts it.
template <class T>
class CUDAMEM_DETAIL_NODISCARD_RESULT result : public detail::result_base<result<T>> {
  static_assert(std::is_object_v<T> && !std::is_array_v<T>, "result<T>: T must be a non-array object type");
  static_assert(!detail::is_any_of<T, cudamem::error, unexpect_t, std::in_place_t>,
                "result<T>: T must not be error, unexpect_t or in_place_t");
  template <class>
  friend class detail::result_base;
  // std::expected's rule for converting from result<U>: T must not be made from the result itself (bool may).
  template <class... R>
  static constexpr bool made_from = ((std::is_constructible_v<T, R> || std::is_convertible_v<R, T>) || ...);
  template <class U, class UF>
  static constexpr bool converts_from =
      std::is_constructible_v<T, UF> && (std::is_same_v<std::remove_cv_t<T>, bool> ||
                                         !made_from<result<U>&, result<U>, const result<U>&, const result<U>>);

 public:
  using value_type = T;  ///< T.
  // The constructors, assignments and emplace are std::expected's, with the same constraints.
  result() noexcept(std::is_nothrow_default_constructible_v<T>)
    requires std::is_default_constructible_v<T>
      : has_value_(true), value_() {}  ///< A success holding T().
  result(const result& other) noexcept(std::is_nothrow_copy_constructible_v<T>)
    requires std::is_copy_constructible_v<T>
      : result(detail::from_result_t{}, other) {}  ///< A copy of `other`'s value or error.
  result(result&& other) noexcept(std::is_nothrow_move_constructible_v<T>)
    requires std::is_move_constructible_v<T>
      : result(detail::from_result_t{}, std::move(other)) {}  ///< Moves `other`'s value or error.
  /// The value of `other` converted to T, or its error; explicit where the conversion is.
  template <class U>
    requires converts_from<U, const U&>
  explicit(!std::is_convertible_v<const U&, T>) result(const result<U>& other)
      : result(detail::from_result_t{}, other) {}
  template <class U>
    requires converts_from<U, U>
  explicit(!std::is_convertible_v<U, T>) result(result<U>&& other)
      : result(detail::from_result_t{}, std::move(other)) {}  ///< \overload
  /// A success holding T made from `value`; explicit where T's constructor is.
  template <class U = std::remove_cv_t<T>>
    requires(!detail::is_any_of<U, std::in_place_t, unexpect_t, result, cudamem::error> &&
             std::is_constructible_v<T, U> &&
             !(std::is_same_v<std::remove_cv_t<T>, bool> && detail::is_result<std::remove_cvref_t<U>>))
  explicit(!std::is_convertible_v<U, T>) result(U&& value) noexcept(std::is_nothrow_constructible_v<T, U>)
      : has_value_(true), value_(std::forward<U>(value)) {}
  /// A success holding T(args...), made in place.
  template <class... Args>
    requires std::is_constructible_v<T, Args...>
  explicit result(std::in_place_t, Args&&... args) noexcept(std::is_nothrow_constructible_v<T, Args...>)
      : has_value_(true), value_(std::forward<Args>(args)...) {}
  template <class V, class... Args>
    requires std::is_constructible_v<T, std::initializer_list<V>&, Args...>
  explicit result(std::in_place_t, std::initializer_list<V> list, Args&&... args)
      : has_value_(true), value_(list, std::forward<Args>(args)...) {}  ///< \overload
  /// A failure holding `failure`; implicit, so that a function can `return error(...)`.
  result(const cudamem::error& failure) noexcept : has_value_(false), error_(failure) {}
  result(unexpect_t, const cudamem::error& failure) noexcept : result(failure) {}  ///< A failure, as std::expected's.
  ~result() { has_value_ ? value_.~T() : void(); }  ///< Destroys the value, if any.
  /// Assigns like to like, else destroys and makes; if making T throws, this keeps what it held.
  result& operator=(const result& other)
    requires(std::is_copy_constructible_v<T> && std::is_copy_assignable_v<T>)
  {
    return other.has_value_ ? assign_value(other.value_) : (*this = other.error_);
  }
  result& operator=(result&& other) noexcept(std::is_nothrow_move_assignable_v<T> &&
                                             std::is_nothrow_move_constructible_v<T>)
    requires(std::is_move_constructible_v<T> && std::is_move_assignable_v<T>)
  {
    return other.has_value_ ? assign_value(std::move(other.value_)) : (*this = other.error_);
  }  ///< \overload
  template <class U = std::remove_cv_t<T>>
    requires(!detail::is_any_of<U, cudamem::error> && !detail::is_result<std::remove_cvref_t<U>> &&
             std::is_constructible_v<T, U> && std::is_assignable_v<T&, U>)
  result& operator=(U&& value) {
    return assign_value(std::forward<U>(value));
  }  ///< \overload
  result& operator=(const cudamem::error& failure) noexcept {
    const cudamem::error held = failure;  // copied before the value is destroyed: it may live inside it
    if (has_value_) value_.~T();
    has_value_ = false;
    ::new (&error_) cudamem::error(held);
    return *this;
  }  ///< \overload
  /// Destroys what this holds and makes the value T(args...); T must be made without throwing.
  template <class... Args>
    requires std::is_nothrow_constructible_v<T, Args...>
  T& emplace(Args&&... args) noexcept {
    return remake(std::forward<Args>(args)...);
  }
  template <class V, class... Args>
    requires std::is_nothrow_constructible_v<T, std::initializer_list<V>&, Args...>
  T& emplace(std::initializer_list<V> list, Args&&... args) noexcept {
    return remake(list, std::forward<Args>(args)...);
  }  ///< \overload
  /// Exchanges the states of two results (values with swap, a value with an error by moving).
  void swap(result& other) noexcept(std::is_nothrow_move_constructible_v<T> && std::is_nothrow_swappable_v<T>)
    requires(std::is_swappable_v<T> && std::is_move_constructible_v<T>)
  {
    if (has_value_ == other.has_value_) {
      using std::swap;
      return has_value_ ? swap(value_, other.value_) : std::swap(error_, other.error_);
    }
    if (!has_value_) return other.swap(*this);
    const cudamem::error held = other.error_;
    other.become_value(std::move(value_));
    *this = held;
  }
  /// The value. On an error, prints the message and aborts, in every build (std::expected throws). An rvalue result
  /// gives its value by value, moved out (std::expected: T&&), so `const T& v = *make();` does not dangle.
  [[nodiscard]] T& value() & noexcept { return check_value(), value_; }
  [[nodiscard]] const T& value() const& noexcept { return check_value(), value_; }  ///< \overload
  [[nodiscard]] detail::moved_out_t<T> value() && noexcept(std::is_nothrow_move_constructible_v<T>) {
    return check_value(), std::move(value_);
  }  ///< \overload
  [[nodiscard]] const T&& value() const&& noexcept { return check_value(), std::move(value_); }  ///< \overload
  /// The value. Precondition: has_value() (checked with an abort in debug builds only). Rvalues: as value().
  [[nodiscard]] T& operator*() & noexcept { return assert_value(), value_; }
  [[nodiscard]] const T& operator*() const& noexcept { return assert_value(), value_; }  ///< \overload
  [[nodiscard]] detail::moved_out_t<T> operator*() && noexcept(std::is_nothrow_move_constructible_v<T>) {
    return assert_value(), std::move(value_);
  }  ///< \overload
  [[nodiscard]] const T&& operator*() const&& noexcept { return assert_value(), std::move(value_); }  ///< \overload
  /// A pointer to the value. Precondition: has_value() (checked with an abort in debug builds only).
  [[nodiscard]] T* operator->() noexcept { return __builtin_addressof(**this); }
  [[nodiscard]] const T* operator->() const noexcept { return __builtin_addressof(**this); }  ///< \overload
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
  }  ///< \overload
  /// Equal when both hold equal values, or both equal errors (R is deduced: nothing converts to a result).
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

 private:
  template <class R>
  result(detail::from_result_t, R&& other) : has_value_(other.has_value()) {
    if (has_value_) ::new (__builtin_addressof(value_)) T(*std::forward<R>(other));
    else ::new (&error_) cudamem::error(other.error());
  }
  template <class F, class Self>
  result(detail::from_invoke_t, F&& f, Self&& self)
      : has_value_(true), value_(result::on_value(std::forward<Self>(self), std::forward<F>(f))) {}
  void check_value() const noexcept { this->check(true, true, "result::value()"); }
  void assert_value() const noexcept { this->check(true, false, "result::operator*"); }
  template <class U>
  result& assign_value(U&& value) {
    if (has_value_) value_ = std::forward<U>(value);
    else become_value(std::forward<U>(value));
    return *this;
  }
  template <class... Args>
  T& remake(Args&&... args) noexcept {
    if (has_value_) value_.~T();
    has_value_ = true;
    return *::new (__builtin_addressof(value_)) T(std::forward<Args>(args)...);
  }
  // Error -> value, the standard's reinit-expected: if making T throws, the error is put back.
  template <class... Args>
  void become_value(Args&&... args) {
    if constexpr (!std::is_nothrow_constructible_v<T, Args...> && std::is_nothrow_move_constructible_v<T>)
      return become_value(T(std::forward<Args>(args)...));  // may throw: made before the error is touched
    struct restore {
      result& target;
      const cudamem::error held;
      ~restore() {
        if (!target.has_value_) ::new (&target.error_) cudamem::error(held);
      }
    } guard{*this, error_};
    ::new (__builtin_addressof(value_)) T(std::forward<Args>(args)...);
    has_value_ = true;
  }
  bool has_value_;  // first, as status's
  union {
    T value_;
    cudamem::error error_;
  };
};

using status = result<void>;  ///< What a fallible operation that produces no value returns: success, or an error.
using release_handler = void (*)(const error&) noexcept;  ///< Called with a destructor's failed release (cudaFree...).
namespace detail {
void default_release_handler(const error& failure) noexcept;
// The handler, one per process; null (never a pointer into a library since unloaded) selects the default.
struct CUDAMEM_DETAIL_PROCESS_WIDE release_handler_slot {
  release_handler handler = nullptr;
};
inline release_handler* handler_slot() noexcept { return &process_wide<release_handler_slot>().handler; }
}  // namespace detail

/// Replaces the process-wide release handler (null: the default, printing to stderr); returns the previous.
inline release_handler set_release_handler(release_handler handler) noexcept {
  if (handler == &detail::default_release_handler) handler = nullptr;
  const release_handler previous = __atomic_exchange_n(detail::handler_slot(), handler, __ATOMIC_ACQ_REL);
  return previous != nullptr ? previous : &detail::default_release_handler;
}
/// Passes `failure` to the current release handler, as the library's destructors do (and a user's may).
inline void report_release_failure(const error& failure) noexcept {
  const release_handler handler = __atomic_load_n(detail::handler_slot(), __ATOMIC_ACQUIRE);
  (handler != nullptr ? handler : &detail::default_release_handler)(failure);
}

namespace detail {
// check()'s failure, out of line and cold: the success path of every wrapped call stays a few instructions long.
[[gnu::cold, gnu::noinline]] inline status failed(cudaError_t code, const char* api, const char* cuda_call) noexcept {
  if (!error::is_sticky_status(code)) (void)cudaGetLastError();
  return error(code, api, cuda_call);
}
// A CUDA status as a status; a non-sticky error is also cleared from CUDA's last-error slot.
inline status check(cudaError_t code, const char* api, const char* cuda_call) noexcept {
  if (code == cudaSuccess) [[likely]]
    return {};
  return failed(code, api, cuda_call);
}
// A driver call's result (its CUresult read as a cudaError_t, as in detail/driver.hpp) as a status. The driver does not
// write the runtime's last-error slot, so nothing is cleared there: a pending error of the caller's stays theirs.
inline status check_driver(cudaError_t code, const char* api, const char* driver_call) noexcept {
  if (code == cudaSuccess) [[likely]]
    return {};
  return error(code, api, driver_call);
}
// For destructors: a failed release goes to the handler; nothing once CUDA has unloaded (the runtime's
// cudaErrorCudartUnloading and the driver's CUDA_ERROR_DEINITIALIZED are both 4).
inline void check_release(cudaError_t code, const char* cuda_call) noexcept {
  if (code == cudaErrorCudartUnloading) return;
  if (const status released = check(code, nullptr, cuda_call); !released) report_release_failure(released.error());
}
inline void check_driver_release(cudaError_t code, const char* driver_call) noexcept {
  if (code == cudaErrorCudartUnloading) return;
  if (const status released = check_driver(code, nullptr, driver_call); !released)
    report_release_failure(released.error());
}
}  // namespace detail

/// Whether the last kernel launch on this thread failed: cudaGetLastError() (clearing a non-sticky error) as a
/// status naming `kernel_name`. Launch errors only (and sticky ones from earlier work); does not synchronize.
[[nodiscard]] inline status check_launch(const char* kernel_name) noexcept {
  return detail::check(cudaGetLastError(), kernel_name, "kernel launch");
}

}  // namespace cudamem

#if !defined(__CUDA_ARCH__)  // host code, as error's members above
namespace cudamem::detail {
[[noreturn]] inline void bad_result_access(const char* what, const error* failure) noexcept {
  if (failure != nullptr) std::fprintf(stderr, "cudamem: %s called on an error: %s\n", what, failure->message());
  else std::fprintf(stderr, "cudamem: %s called on a success\n", what);
  std::abort();
}
inline void default_release_handler(const error& failure) noexcept {
  std::fprintf(stderr, "cudamem: release failed: %s\n", failure.message());
}
}  // namespace cudamem::detail
#endif

/// `CUDAMEM_TRY(copy(a, b));` evaluates its argument once; an error in it is returned from the caller.
#define CUDAMEM_TRY(...)                                                             \
  do {                                                                               \
    if (auto cudamem_try_status_ = (__VA_ARGS__); !cudamem_try_status_) [[unlikely]] \
      return cudamem_try_status_.error();                                            \
  } while (0)
