// SPDX-License-Identifier: MIT
// Must not compile: a buffer of a type whose bytes cannot be copied without its constructors.
// Fix: store a trivially copyable type (a plain struct, fixed-size arrays of values).
#include <cudamem/cudamem.hpp>

#include <string>

#ifdef CUDAMEM_EXPECT_COMPILE_ERROR
using name = std::string;
#else
struct name {
  char text[32];
};
#endif

int main() {
  auto names = cudamem::device_buffer<name>::allocate(4);
  return names ? 0 : 1;
}
