// SPDX-License-Identifier: MIT
// The tests build against Catch2 3 where the system has it (Ubuntu 24.04, Debian 13) and against
// Catch2 2.13 where that is what it ships (Debian 12). Test sources include this header only.
// With Catch2 3 it includes just the parts the tests use: catch_all.hpp takes nvcc's front end
// minutes per file.
#pragma once

#if defined(CUDAMEM_CATCH2_V3)
#include <catch2/catch_session.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#else
#include <catch2/catch.hpp>
#endif

// A test that cannot run its condition (too few devices, a pair that cannot peer) calls CUDAMEM_SKIP("why") in its
// body: with Catch2 3.3 or later that is SKIP, which reports the test skipped; with older versions, which have no
// SKIP, the reason is printed as a warning and the test returns. Either way the count below goes up, and the GPU test
// runner (tests/gpu/main.cu) exits 77, which CTest reports as skipped, when something was skipped and nothing failed.
namespace cudamem_test {
inline int& skipped_tests() noexcept {
  static int count = 0;
  return count;
}
}  // namespace cudamem_test
#if defined(SKIP)
#define CUDAMEM_SKIP(...)              \
  do {                                 \
    ++::cudamem_test::skipped_tests(); \
    SKIP(__VA_ARGS__);                 \
  } while (0)
#else
#define CUDAMEM_SKIP(...)              \
  do {                                 \
    ++::cudamem_test::skipped_tests(); \
    WARN("SKIPPED: " << __VA_ARGS__);  \
    return;                            \
  } while (0)
#endif
