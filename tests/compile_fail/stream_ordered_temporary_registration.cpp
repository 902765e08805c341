// SPDX-License-Identifier: MIT
// Must not compile: a stream-ordered copy from a temporary host registration. The memory is
// unregistered at the end of the statement while the copy is still queued. Fix: keep the
// registration in a variable until the stream is done with it.
#include <cudamem/cudamem.hpp>

#include <vector>

int main() {
  std::vector<float> values(4, 1.0f);
  auto device_buf = cudamem::device_buffer<float>::allocate(values.size());
  auto stream = cudamem::stream::create();
  if (!device_buf || !stream) return 1;
#ifdef CUDAMEM_EXPECT_COMPILE_ERROR
  auto done = cudamem::copy(*device_buf, *cudamem::host_register(cudamem::span(values)), *stream);
#else
  auto registration = cudamem::host_register(cudamem::span(values));
  if (!registration) return 1;
  auto done = cudamem::copy(*device_buf, *registration, *stream);
#endif
  return done && stream->synchronize() ? 0 : 1;
}
