// SPDX-License-Identifier: MIT
// Must not compile: a view of a temporary buffer, which is freed at the end of the statement and
// leaves the view dangling. Fix: keep the buffer, then view it.
#include <cudamem/cudamem.hpp>

int main() {
#ifdef CUDAMEM_EXPECT_COMPILE_ERROR
  cudamem::device_span<int> view = *cudamem::device_buffer<int>::allocate(16);
#else
  auto owner = cudamem::device_buffer<int>::allocate(16);
  if (!owner) return 1;
  cudamem::device_span<int> view = *owner;
#endif
  return view.size() == 16 ? 0 : 1;
}
