// SPDX-License-Identifier: MIT
// bench_peers' PyTorch rows: the caching allocator as PyTorch's C++ code calls it, apart from bench_peers.cu so that
// c10's headers and CCCL's newer ones never meet in one translation unit.
#include <c10/cuda/CUDACachingAllocator.h>

#include <cuda_runtime_api.h>

#include <cstddef>

void* torch_allocate(std::size_t bytes, cudaStream_t stream) {
  return c10::cuda::CUDACachingAllocator::raw_alloc_with_stream(bytes, stream);
}
void torch_deallocate(void* p) { c10::cuda::CUDACachingAllocator::raw_delete(p); }
void torch_init(int devices) { c10::cuda::CUDACachingAllocator::init(devices); }
void torch_empty_cache() { c10::cuda::CUDACachingAllocator::emptyCache(); }
const char* torch_version() { return CUDAMEM_BENCH_TORCH_VERSION; }
