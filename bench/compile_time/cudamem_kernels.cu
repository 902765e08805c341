// SPDX-License-Identifier: MIT
// compile_time.sh, "kernels" pair, cudamem side: kernels on a span and on a pitched view, including only the view
// headers. raw_kernels.cu writes the same kernels on raw pointers. Compiled, never run.
#include <cudamem/span.hpp>
#if __has_include(<cudamem/pitched_span.hpp>)
#include <cudamem/pitched_span.hpp>
#else
#include <cudamem/pitched.hpp>
#endif

__global__ void saxpy(cudamem::device_span<float> y, cudamem::device_span<const float> x, float a) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i < y.size()) y[i] = a * x[i] + y[i];
}

__global__ void transpose(cudamem::device_pitched_span<float> out, cudamem::device_pitched_span<const float> in) {
  const std::size_t col = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  const std::size_t row = blockIdx.y * std::size_t{blockDim.y} + threadIdx.y;
  if (row < in.height() && col < in.width()) out(col, row) = in(row, col);
}
