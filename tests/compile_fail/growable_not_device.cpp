// SPDX-License-Identifier: MIT
// Must not compile: a growable buffer of a kind other than device memory (the driver's virtual memory management maps
// device memory). Fix: growable_buffer<T> (device), or a pinned_buffer allocated at its final size.
#include <cudamem/growable.hpp>

int main() {
#ifdef CUDAMEM_EXPECT_COMPILE_ERROR
  auto g = cudamem::growable_buffer<float, cudamem::pinned>::create(1024);
#else
  auto g = cudamem::growable_buffer<float>::create(1024);
#endif
  return g ? 0 : 1;
}
