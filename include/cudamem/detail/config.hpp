// SPDX-License-Identifier: MIT
// cudamem: configuration shared by every header. Internal: include a public header instead.
#pragma once

#if __cplusplus < 202002L
#error "cudamem needs C++20 (-std=c++20)"
// A missing file is a fatal error for g++, clang and nvcc alike: compilation stops at the #error
// above instead of going on to hundreds of errors in C++20 code.
#include "cudamem-needs-c++20: compilation stopped"
#endif
#include <cuda_runtime_api.h>
#include <cudamem/version.hpp>

#include <type_traits>
#if defined(__CUDACC__)  // the execution-space annotation of what runs on both sides, for nvcc and plain compilers
#define CUDAMEM_HD __host__ __device__
#else
#define CUDAMEM_HD
#endif
// In an owner (buffer, pitched_buffer, host_registration), after its view() and data() for lvalues: implicit
// conversions to its views as view(), `View` (`(span<T, Kind>)`, parenthesized for the comma) from a non-const owner
// and `ConstView` from a const one (owners are deep-const); and, deleted for an rvalue owner, view(), data() and the
// conversions, whose views would dangle once the statement ends. For a const T the two views are one type.
// The deleted lines carry their fix in a comment: g++ quotes a deleted function's declaration, with that comment,
// in its "declared here" note, so the error says what to do.
// clang-format off
#define CUDAMEM_DETAIL_OWNER_VIEWS(View, ConstView)                                                                   \
  void view() const&& = delete;                      /* dangles: keep the temporary owner in a variable */          \
  void data() const&& = delete;                      /* dangles: keep the temporary owner in a variable */          \
  operator CUDAMEM_DETAIL_UNPAREN View()& noexcept { return view(); }                                                 \
  operator CUDAMEM_DETAIL_UNPAREN ConstView() const& noexcept { return view(); }                                      \
  operator CUDAMEM_DETAIL_UNPAREN View() const&& = delete; /* dangles: keep the temporary owner in a variable */    \
  operator CUDAMEM_DETAIL_UNPAREN ConstView() const&& /* dangles: keep the temporary owner in a variable */         \
    requires(!::std::is_const_v<T>)                                                                                   \
  = delete
// clang-format on
#define CUDAMEM_DETAIL_UNPAREN(...) __VA_ARGS__
// CUDAMEM_ASSERT(condition, message), for hot paths: a debug failure prints, then aborts or traps; NDEBUG: nothing.
#if defined(NDEBUG)
#define CUDAMEM_ASSERT(condition, message) ((void)0)
#else
#include <cstdio>
#include <cstdlib>
namespace cudamem::detail {
// Out of line and cold: an assertion costs each checked access a compare and a call, in host and device code alike.
[[noreturn]] CUDAMEM_HD __attribute__((noinline, cold)) inline void assertion_failed(const char* condition,
                                                                                     const char* message,
                                                                                     const char* file,
                                                                                     int line) noexcept {
#if defined(__CUDA_ARCH__)
  printf("%s:%d: cudamem assertion failed: %s (%s)\n", file, line, condition, message);
  __trap();
#else
  std::fprintf(stderr, "%s:%d: cudamem assertion failed: %s (%s)\n", file, line, condition, message);
  std::abort();
#endif
}
}  // namespace cudamem::detail
#define CUDAMEM_ASSERT(condition, message) \
  ((condition) ? (void)0 : ::cudamem::detail::assertion_failed(#condition, message, __FILE__, __LINE__))
#endif
