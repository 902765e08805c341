// SPDX-License-Identifier: MIT
// Must not compile (nvcc): reading device memory in a __host__ function. The device-only
// accessors are __device__, so nvcc refuses the call from the host side.
// Fix: read it in a kernel, or copy it into host-accessible memory first.
#include <cudamem/cudamem.hpp>

#ifdef CUDAMEM_EXPECT_COMPILE_ERROR
int first_element(cudamem::device_span<int> values) { return values[0]; }
#else
int first_element(cudamem::device_span<int> values) {
  int first = 0;
  auto status = cudamem::copy(cudamem::make_host_span(&first, 1), *values.first(1));
  return status ? first : -1;
}
#endif

int main() {
  auto device_buf = cudamem::device_buffer<int>::allocate(4);
  if (!device_buf || !cudamem::fill_bytes(*device_buf, 0)) return 1;
  return first_element(*device_buf);
}
