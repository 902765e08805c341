// SPDX-License-Identifier: MIT
// Must not compile: a stream-ordered copy into a temporary pitched buffer, which is freed at the end of
// the statement while the copy is still queued. Fix: keep the buffer in a variable until the stream is
// done with it.
#include <cudamem/cudamem.hpp>

int main() {
  auto image = cudamem::device_pitched_buffer<float>::allocate(8, 4);
  auto stream = cudamem::stream::create();
  if (!image || !stream) return 1;
#ifdef CUDAMEM_EXPECT_COMPILE_ERROR
  auto done = cudamem::copy(cudamem::pinned_pitched_buffer<float>::allocate(8, 4).value(), *image, *stream);
#else
  auto staging = cudamem::pinned_pitched_buffer<float>::allocate(8, 4);
  if (!staging) return 1;
  auto done = cudamem::copy(*staging, *image, *stream);
#endif
  return done && stream->synchronize() ? 0 : 1;
}
