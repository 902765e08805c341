// SPDX-License-Identifier: MIT
// Must not compile (nvcc): the member form of a stream-ordered copy from pageable host memory.
// Fix: page-lock the memory for the duration with host_register (or use a pinned_buffer), or
// call the synchronous copy_from without a stream.
#include <cudamem/cudamem.hpp>

#include <vector>

int main() {
  auto device_buf = cudamem::device_buffer<int>::allocate(4);
  auto stream = cudamem::stream::create();
  std::vector<int> values(4, 1);
  if (!device_buf || !stream) return 1;
#ifdef CUDAMEM_EXPECT_COMPILE_ERROR
  auto done = cudamem::copy_from_host(*device_buf, cudamem::span(values), *stream);
#else
  auto locked = cudamem::host_register(cudamem::span(values));
  if (!locked) return 1;
  auto done = cudamem::copy_from_host(*device_buf, *locked, *stream);
#endif
  return done && stream->synchronize() ? 0 : 1;
}
