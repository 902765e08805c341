// SPDX-License-Identifier: MIT
// Must not compile: a copy between views of different element types (no conversion happens).
// Fix: copy between spans of one type, and convert in a kernel; or view both sides as std::byte
// to copy raw bytes.
#include <cudamem/cudamem.hpp>

int main() {
  auto floats = cudamem::device_buffer<float>::allocate(4);
  auto ints = cudamem::device_buffer<int>::allocate(4);
  if (!floats || !ints) return 1;
#ifdef CUDAMEM_EXPECT_COMPILE_ERROR
  const cudamem::device_span<int> src = ints->view();
#else
  auto more_floats = cudamem::device_buffer<float>::allocate(4);
  if (!more_floats) return 1;
  const cudamem::device_span<float> src = more_floats->view();
#endif
  const cudamem::device_span<float> dst = floats->view();
  return cudamem::copy(dst, src) ? 0 : 1;
}
