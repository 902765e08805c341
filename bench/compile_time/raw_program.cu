// SPDX-License-Identifier: MIT
// compile_time.sh, "program" pair, raw side: what cudamem_program.cu does, written against the CUDA runtime alone:
// cudaMallocAsync, cudaMemcpyAsync, cudaMemsetAsync, a typed fill kernel, a kernel on a pitched pointer, and the small
// free list a user writes instead of a caching pool. Compiled, never run.
#include <cuda_runtime.h>

#include <cstddef>

__global__ void scale_rows(float* image, std::size_t pitch, std::size_t width, std::size_t height, float factor) {
  const std::size_t col = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  const std::size_t row = blockIdx.y;
  if (row < height && col < width)
    reinterpret_cast<float*>(reinterpret_cast<char*>(image) + row * pitch)[col] *= factor;
}

template <class T>
__global__ void fill_rows(T* first, std::size_t pitch, std::size_t width, std::size_t height, T value) {
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  for (std::size_t i = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < width * height; i += stride) {
    const std::size_t row = i / width;
    reinterpret_cast<T*>(reinterpret_cast<char*>(first) + row * pitch)[i - row * width] = value;
  }
}

namespace {
// A free list of blocks of one size per stream, as a user writes instead of a caching pool.
struct free_list {
  static constexpr int capacity = 64;
  void* blocks[capacity] = {};
  std::size_t sizes[capacity] = {};
  int count = 0;
  cudaError_t allocate(void** p, std::size_t bytes, cudaStream_t s) {
    for (int i = 0; i < count; ++i)
      if (sizes[i] >= bytes) {
        *p = blocks[i];
        blocks[i] = blocks[count - 1];
        sizes[i] = sizes[--count];
        return cudaSuccess;
      }
    return cudaMallocAsync(p, bytes, s);
  }
  cudaError_t deallocate(void* p, std::size_t bytes, cudaStream_t s) {
    if (count == capacity) return cudaFreeAsync(p, s);
    blocks[count] = p;
    sizes[count++] = bytes;
    return cudaSuccess;
  }
  cudaError_t release(cudaStream_t s) {
    cudaError_t first = cudaSuccess;
    while (count > 0) {
      const cudaError_t e = cudaFreeAsync(blocks[--count], s);
      if (first == cudaSuccess) first = e;
    }
    return first;
  }
};
}  // namespace

int main() {
  constexpr std::size_t count = 1 << 20, width = 1000, height = 100;
  cudaStream_t s = nullptr;
  if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) return 1;
  free_list pool;
  float* host = nullptr;
  void* data = nullptr;
  void* image = nullptr;
  std::size_t pitch = 0;
  bool ok = cudaMallocHost(reinterpret_cast<void**>(&host), count * sizeof(float)) == cudaSuccess &&
            pool.allocate(&data, count * sizeof(float), s) == cudaSuccess &&
            cudaMallocPitch(&image, &pitch, width * sizeof(float), height) == cudaSuccess &&
            cudaMemsetAsync(data, 0, count * sizeof(float), s) == cudaSuccess;
  if (ok) {
    fill_rows<float>
        <<<(width * height + 255) / 256, 256, 0, s>>>(static_cast<float*>(image), pitch, width, height, 1.0f);
    ok = cudaGetLastError() == cudaSuccess &&
         cudaMemcpyAsync(data, host, count * sizeof(float), cudaMemcpyHostToDevice, s) == cudaSuccess;
  }
  if (ok) {
    scale_rows<<<dim3((width + 255) / 256, height), 256, 0, s>>>(static_cast<float*>(image), pitch, width, height,
                                                                 2.0f);
    ok = cudaGetLastError() == cudaSuccess &&
         cudaMemcpyAsync(host, data, count * sizeof(float), cudaMemcpyDeviceToHost, s) == cudaSuccess;
  }
  if (data != nullptr) ok = pool.deallocate(data, count * sizeof(float), s) == cudaSuccess && ok;
  ok = pool.release(s) == cudaSuccess && ok;
  ok = cudaStreamSynchronize(s) == cudaSuccess && ok;
  cudaFree(image);
  cudaFreeHost(host);
  cudaStreamDestroy(s);
  return ok ? 0 : 1;
}
