// SPDX-License-Identifier: MIT
// Must not compile: a stream-ordered batch whose sources are pageable (views of std::vectors). The batch would
// return before the bytes were read. Fix: stage the pieces in a pinned_buffer (or page-lock the vectors with
// host_register), or call the synchronous copy_many without a stream.
#include <cudamem/copy_many.hpp>
#include <cudamem/cudamem.hpp>

#include <vector>

int main() {
  auto device_buf = cudamem::device_buffer<int>::allocate(8);
  auto stream = cudamem::stream::create();
  std::vector<int> values(8, 1);
  if (!device_buf || !stream) return 1;
  const std::vector<cudamem::device_span<int>> dsts{device_buf->view().subspan_unchecked(0, 4),
                                                    device_buf->view().subspan_unchecked(4, 4)};
#ifdef CUDAMEM_EXPECT_COMPILE_ERROR
  const std::vector<cudamem::host_span<const int>> srcs{cudamem::make_host_span<const int>(values.data(), 4),
                                                        cudamem::make_host_span<const int>(values.data() + 4, 4)};
#else
  auto staging = cudamem::pinned_buffer<int>::allocate(values.size());
  if (!staging || !cudamem::copy(*staging, cudamem::span(values))) return 1;
  const std::vector<cudamem::pinned_span<const int>> srcs{staging->view().subspan_unchecked(0, 4),
                                                          staging->view().subspan_unchecked(4, 4)};
#endif
  auto done = cudamem::copy_many(dsts, srcs, *stream);
  return done && stream->synchronize() ? 0 : 1;
}
