// SPDX-License-Identifier: MIT
// Must not compile: fill_bytes with an integer constant outside 0-255 (memset would write its low
// byte, 0x00 for 256). Fix: a value from 0 to 255, or static_cast<unsigned char> if truncation is meant.
#include <cudamem/cudamem.hpp>

int main() {
  auto bytes = cudamem::device_buffer<unsigned char>::allocate(4);
  if (!bytes) return 1;
#ifdef CUDAMEM_EXPECT_COMPILE_ERROR
  return cudamem::fill_bytes(*bytes, 256) ? 0 : 1;
#else
  return cudamem::fill_bytes(*bytes, 255) ? 0 : 1;
#endif
}
