// SPDX-License-Identifier: MIT
// Must not compile (g++): reading device memory on the host, through a span and through a ptr.
// Fix: copy it into host-accessible memory (a host or pinned buffer) first, or use managed memory.
#include <cudamem/cudamem.hpp>

int main() {
  auto device_buf = cudamem::device_buffer<int>::allocate(4);
  if (!device_buf || !cudamem::fill_bytes(*device_buf, 0)) return 1;
  const cudamem::device_span<int> values = device_buf->view();
#ifdef CUDAMEM_EXPECT_COMPILE_ERROR
  return values[0] + *values.data();
#else
  auto host_copy = cudamem::host_buffer<int>::allocate(values.size());
  if (!host_copy || !cudamem::copy(*host_copy, values)) return 1;
  const cudamem::host_span<int> readable = host_copy->view();
  return readable[0] + *readable.data();
#endif
}
