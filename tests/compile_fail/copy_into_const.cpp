// SPDX-License-Identifier: MIT
// Must not compile: a copy into a view of const elements.
// Fix: copy into a mutable view (a span<T> or the buffer itself); span<const T> is for sources.
#include <cudamem/cudamem.hpp>

int main() {
  auto dst_buf = cudamem::device_buffer<int>::allocate(4);
  auto src_buf = cudamem::device_buffer<int>::allocate(4);
  if (!dst_buf || !src_buf) return 1;
  const cudamem::device_span<const int> src = src_buf->view();
#ifdef CUDAMEM_EXPECT_COMPILE_ERROR
  const cudamem::device_span<const int> dst = dst_buf->view();
#else
  const cudamem::device_span<int> dst = dst_buf->view();
#endif
  return cudamem::copy(dst, src) ? 0 : 1;
}
