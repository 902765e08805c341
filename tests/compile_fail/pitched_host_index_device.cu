// SPDX-License-Identifier: MIT
// Must not compile (nvcc): host code indexing a pitched view of device memory, whose accessors are
// __device__ there. Fix: index it in a kernel, or copy the rows to a pinned pitched buffer first.
#include <cudamem/cudamem.hpp>

int main() {
  auto image = cudamem::device_pitched_buffer<float>::allocate(8, 4);
  if (!image || !cudamem::fill_bytes(*image, 0)) return 1;
  const cudamem::device_pitched_span<float> rows = image->view();
#ifdef CUDAMEM_EXPECT_COMPILE_ERROR
  return static_cast<int>(rows(1, 2));
#else
  auto readable = cudamem::pinned_pitched_buffer<float>::allocate(rows.width(), rows.height());
  if (!readable || !cudamem::copy(*readable, rows)) return 1;
  return static_cast<int>(readable->view()(1, 2));
#endif
}
