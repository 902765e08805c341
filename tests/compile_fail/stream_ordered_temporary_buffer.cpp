// SPDX-License-Identifier: MIT
// Must not compile: a stream-ordered copy from a temporary buffer. The buffer is freed at the end of
// the statement while the copy is still queued on the stream. Fix: keep the buffer in a variable
// until the stream is done with it.
#include <cudamem/cudamem.hpp>

int main() {
  auto device_buf = cudamem::device_buffer<float>::allocate(4);
  auto stream = cudamem::stream::create();
  if (!device_buf || !stream) return 1;
#ifdef CUDAMEM_EXPECT_COMPILE_ERROR
  auto done = cudamem::copy(*device_buf, cudamem::pinned_buffer<float>::allocate(4).value(), *stream);
#else
  auto staging = cudamem::pinned_buffer<float>::allocate(4);
  if (!staging) return 1;
  auto done = cudamem::copy(*device_buf, *staging, *stream);
#endif
  return done && stream->synchronize() ? 0 : 1;
}
