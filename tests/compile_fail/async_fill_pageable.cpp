// SPDX-License-Identifier: MIT
// Must not compile: a stream-ordered fill of pageable host memory.
// Fix: allocate the memory as a pinned_buffer (or page-lock it with host_register), or call the
// synchronous fill_bytes without a stream.
#include <cudamem/cudamem.hpp>

#include <vector>

int main() {
  auto stream = cudamem::stream::create();
  if (!stream) return 1;
#ifdef CUDAMEM_EXPECT_COMPILE_ERROR
  std::vector<int> values(4, 1);
  auto done = cudamem::fill_bytes(cudamem::span(values), 0, *stream);
#else
  auto values = cudamem::pinned_buffer<int>::allocate(4);
  if (!values) return 1;
  auto done = cudamem::fill_bytes(*values, 0, *stream);
#endif
  return done && stream->synchronize() ? 0 : 1;
}
