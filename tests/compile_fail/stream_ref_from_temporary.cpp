// SPDX-License-Identifier: MIT
// Must not compile: a stream_ref to a temporary stream, which is destroyed at the end of the
// statement, so the reference would dangle.
// Fix: keep the stream in a variable for as long as work uses it, and take its ref() there.
#include <cudamem/stream.hpp>

int main() {
#ifdef CUDAMEM_EXPECT_COMPILE_ERROR
  cudamem::stream_ref s = *cudamem::stream::create();
  return s.synchronize() ? 0 : 1;
#else
  auto owner = cudamem::stream::create();
  if (!owner) return 1;
  cudamem::stream_ref s = *owner;
  return s.synchronize() ? 0 : 1;
#endif
}
