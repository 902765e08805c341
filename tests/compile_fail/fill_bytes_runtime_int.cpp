// SPDX-License-Identifier: MIT
// Must not compile: fill_bytes with an int known only at run time, which the compiler cannot check
// against 0-255. Fix: convert it with static_cast<unsigned char>, which says the truncation is meant.
#include <cudamem/cudamem.hpp>

int main(int argc, char**) {
  auto bytes = cudamem::device_buffer<unsigned char>::allocate(4);
  if (!bytes) return 1;
  const int value = argc;
#ifdef CUDAMEM_EXPECT_COMPILE_ERROR
  return cudamem::fill_bytes(*bytes, value) ? 0 : 1;
#else
  return cudamem::fill_bytes(*bytes, static_cast<unsigned char>(value)) ? 0 : 1;
#endif
}
