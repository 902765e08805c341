// SPDX-License-Identifier: MIT
// Must not compile: cudamem in a C++17 translation unit (the case target is compiled with C++17;
// the control target with C++20, where this compiles). The #error must be the only diagnostic:
// compilation stops there, without follow-on errors from the C++20 code of the headers.
// Fix: compile with -std=c++20 (CMake: cudamem::cudamem asks for it; do not lower it).
#include <cudamem/cudamem.hpp>

int main() {
  auto buffer = cudamem::device_buffer<int>::allocate(4);
  return buffer ? 0 : 1;
}
