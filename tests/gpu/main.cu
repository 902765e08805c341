// SPDX-License-Identifier: MIT
// Test runner for GPU tests: exits 77 (CTest: skipped) when the devices the tests need are absent.
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
  return Catch::Session().run(argc, argv);
}
