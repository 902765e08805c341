// SPDX-License-Identifier: MIT
// Must not compile: the typed fill in a file a plain host compiler builds. It launches a kernel, which only nvcc can
// compile. Fix: move the call into a .cu file, or set bytes with fill_bytes (shown in the other branch).
#include <cudamem/cudamem.hpp>

int main() {
  auto buffer = cudamem::device_buffer<int>::allocate(16);
  auto stream = cudamem::stream::create();
  if (!buffer || !stream) return 1;
#ifdef CUDAMEM_EXPECT_COMPILE_ERROR
  return cudamem::fill(*buffer, 7, *stream) ? 0 : 1;
#else
  return cudamem::fill_bytes(*buffer, 0, *stream) ? 0 : 1;
#endif
}
