// SPDX-License-Identifier: MIT
// Must not compile (nvcc): a kernel writing pageable host memory, which the device cannot reach.
// Fix: pass the kernel device memory, or page-locked host memory (pinned_span: mapped, zero-copy).
#include <cudamem/cudamem.hpp>

#ifdef CUDAMEM_EXPECT_COMPILE_ERROR
__global__ void set_first(cudamem::host_span<int> values) { values[0] = 1; }
#else
__global__ void set_first(cudamem::pinned_span<int> values) { values[0] = 1; }
#endif

int main() {
  auto pinned_buf = cudamem::pinned_buffer<int>::allocate(4);
  if (!pinned_buf) return 1;
  set_first<<<1, 1>>>(pinned_buf->view());
  return cudaDeviceSynchronize() == cudaSuccess ? 0 : 1;
}
