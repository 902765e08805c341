// SPDX-License-Identifier: MIT
// Must not compile: a typed fill whose value converts to the element type only by narrowing
// (3.7 into int would store 3). Fix: pass a value of the element type.
#include <cudamem/cudamem.hpp>

int main() {
  auto ints = cudamem::device_buffer<int>::allocate(4);
  auto stream = cudamem::stream::create();
  if (!ints || !stream) return 1;
#ifdef CUDAMEM_EXPECT_COMPILE_ERROR
  auto done = cudamem::fill(*ints, 3.7, *stream);
#else
  auto done = cudamem::fill(*ints, 3, *stream);
#endif
  return done && stream->synchronize() ? 0 : 1;
}
