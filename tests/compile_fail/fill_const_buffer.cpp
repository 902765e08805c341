// SPDX-License-Identifier: MIT
// Must not compile: writing through a const buffer. Owners are deep-const: a const buffer gives
// only const views, so fills and copies into it are refused. Fix: write through a non-const buffer.
#include <cudamem/cudamem.hpp>

namespace {
cudamem::status clear(const cudamem::device_buffer<int>& read_only, cudamem::device_buffer<int>& writable) {
#ifdef CUDAMEM_EXPECT_COMPILE_ERROR
  (void)writable;
  return cudamem::fill_bytes(read_only, 0);
#else
  (void)read_only;
  return cudamem::fill_bytes(writable, 0);
#endif
}
}  // namespace

int main() {
  auto a = cudamem::device_buffer<int>::allocate(4);
  auto b = cudamem::device_buffer<int>::allocate(4);
  if (!a || !b) return 1;
  return clear(*a, *b) ? 0 : 1;
}
