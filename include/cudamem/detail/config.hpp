// cudamem: configuration shared by every header. Internal: include a public header instead.
#pragma once

#include <cuda_runtime_api.h>

#define CUDAMEM_VERSION_MAJOR 0
#define CUDAMEM_VERSION_MINOR 1
#define CUDAMEM_VERSION_PATCH 0
#define CUDAMEM_VERSION (CUDAMEM_VERSION_MAJOR * 10000 + CUDAMEM_VERSION_MINOR * 100 + CUDAMEM_VERSION_PATCH)

#if __cplusplus < 202002L
#error "cudamem needs C++20 (-std=c++20)"
#endif

// One spelling of the execution-space annotations for nvcc and for plain host compilers.
#if defined(__CUDACC__)
#define CUDAMEM_HD __host__ __device__
#define CUDAMEM_HOST __host__
#else
#define CUDAMEM_HD
#define CUDAMEM_HOST
#endif

#if defined(__CUDA_ARCH__)
#define CUDAMEM_IN_DEVICE_CODE 1
#else
#define CUDAMEM_IN_DEVICE_CODE 0
#endif
