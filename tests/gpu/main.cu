// SPDX-License-Identifier: MIT
// Test runner for GPU tests: exits 77 (CTest: skipped) when the devices the tests need are absent, or when a test
// skipped itself (CUDAMEM_SKIP) and none failed.
#define CATCH_CONFIG_RUNNER
#include "catch.hpp"

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>

int main(int argc, char* argv[]) {
  int needed = 1;
  if (const char* env = std::getenv("CUDAMEM_TEST_MIN_DEVICES")) needed = std::atoi(env);
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count < needed) {
    std::printf("skipped: needs %d CUDA device(s), found %d (%s)\n", needed, status == cudaSuccess ? count : 0,
                status == cudaSuccess ? "no error" : cudaGetErrorString(status));
    return 77;
  }
  const int failed = Catch::Session().run(argc, argv);
  // 4: Catch2 3's code for a run in which every test was skipped.
  if (cudamem_test::skipped_tests() > 0 && (failed == 0 || failed == 4)) {
    std::printf("skipped: %d test(s) could not run their condition, and none failed\n", cudamem_test::skipped_tests());
    return 77;
  }
  return failed;
}
