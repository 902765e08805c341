// SPDX-License-Identifier: MIT
// Must not compile: a batch whose destination and source views have different element types (no conversion
// happens). Fix: views of one element type on both sides, or std::byte views (as_bytes / as_writable_bytes).
#include <cudamem/copy_many.hpp>
#include <cudamem/cudamem.hpp>

#include <utility>
#include <vector>

int main() {
  auto floats = cudamem::device_buffer<float>::allocate(4);
  auto ints = cudamem::device_buffer<int>::allocate(4);
  auto more_floats = cudamem::device_buffer<float>::allocate(4);
  if (!floats || !ints || !more_floats) return 1;
#ifdef CUDAMEM_EXPECT_COMPILE_ERROR
  using source = cudamem::device_span<const int>;
  const source whole = ints->view();
#else
  using source = cudamem::device_span<const float>;
  const source whole = more_floats->view();
#endif
  const std::vector<std::pair<cudamem::device_span<float>, source>> pieces{
      {floats->view().subspan_unchecked(0, 2), whole.subspan_unchecked(0, 2)},
      {floats->view().subspan_unchecked(2, 2), whole.subspan_unchecked(2, 2)}};
  return cudamem::copy_many(pieces) ? 0 : 1;
}
