// SPDX-License-Identifier: MIT
// Must not compile: an integer (or null) where a stream is expected; 0 is not "the default stream".
// Fix: name the stream: cudamem::stream_ref::legacy(), stream_ref::per_thread(), or a stream.
#include <cudamem/stream.hpp>

int main() {
#ifdef CUDAMEM_EXPECT_COMPILE_ERROR
  cudamem::stream_ref s = 0;
#else
  cudamem::stream_ref s = cudamem::stream_ref::legacy();
#endif
  return s.synchronize() ? 0 : 1;
}
