// SPDX-License-Identifier: MIT
// Must not compile: a prefetch of a temporary managed buffer. The buffer is freed at the end of the statement while
// the prefetch is still queued on the stream. Fix: keep the buffer in a variable until the stream is done with it.
#include <cudamem/managed.hpp>

int main() {
  auto stream = cudamem::stream::create();
  if (!stream) return 1;
  const auto here = cudamem::memory_location::device(cudamem::device_id(0));
#ifdef CUDAMEM_EXPECT_COMPILE_ERROR
  auto done = cudamem::prefetch(cudamem::managed_buffer<float>::allocate(4).value(), here, *stream);
#else
  auto kept = cudamem::managed_buffer<float>::allocate(4);
  if (!kept) return 1;
  auto done = cudamem::prefetch(*kept, here, *stream);
#endif
  return done && stream->synchronize() ? 0 : 1;
}
