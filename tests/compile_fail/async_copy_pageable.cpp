// SPDX-License-Identifier: MIT
// Must not compile: a stream-ordered copy whose host side is pageable (a std::vector). The copy
// would return before the bytes were read, and CUDA silently makes pageable copies synchronous.
// Fix: stage through a pinned_buffer (or page-lock the vector with host_register), or call the
// synchronous copy without a stream.
#include <cudamem/cudamem.hpp>

#include <vector>

int main() {
  auto device_buf = cudamem::device_buffer<int>::allocate(4);
  auto stream = cudamem::stream::create();
  std::vector<int> values(4, 1);
  if (!device_buf || !stream) return 1;
#ifdef CUDAMEM_EXPECT_COMPILE_ERROR
  auto done = cudamem::copy(*device_buf, cudamem::span(values), *stream);
#else
  auto staging = cudamem::pinned_buffer<int>::allocate(values.size());
  if (!staging || !cudamem::copy(*staging, cudamem::span(values))) return 1;
  auto done = cudamem::copy(*device_buf, *staging, *stream);
#endif
  return done && stream->synchronize() ? 0 : 1;
}
