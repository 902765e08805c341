// SPDX-License-Identifier: MIT
// Must not compile: copy_to_host into device memory (CuPy's name promises a host destination). Fix: copy, which
// takes any direction, or copy_from_device (shown in the other branch).
#include <cudamem/cudamem.hpp>

int main() {
  auto to = cudamem::device_buffer<int>::allocate(16);
  auto from = cudamem::device_buffer<int>::allocate(16);
  if (!to || !from) return 1;
#ifdef CUDAMEM_EXPECT_COMPILE_ERROR
  return cudamem::copy_to_host(*to, *from) ? 0 : 1;
#else
  return cudamem::copy_from_device(*to, *from) ? 0 : 1;
#endif
}
