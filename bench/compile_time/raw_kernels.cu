// SPDX-License-Identifier: MIT
// compile_time.sh, "kernels" pair, raw side: the kernels of cudamem_kernels.cu on raw pointers, pitches and sizes.
// Compiled, never run.
#include <cuda_runtime.h>

#include <cstddef>

__global__ void saxpy(float* y, const float* x, std::size_t n, float a) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

__global__ void transpose(float* out, std::size_t out_pitch, const float* in, std::size_t in_pitch, std::size_t width,
                          std::size_t height) {
  const std::size_t col = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  const std::size_t row = blockIdx.y * std::size_t{blockDim.y} + threadIdx.y;
  if (row < height && col < width)
    reinterpret_cast<float*>(reinterpret_cast<char*>(out) + col * out_pitch)[row] =
        reinterpret_cast<const float*>(reinterpret_cast<const char*>(in) + row * in_pitch)[col];
}
