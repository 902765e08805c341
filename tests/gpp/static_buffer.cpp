// SPDX-License-Identifier: MIT
// A buffer with static storage duration is destroyed after main returns, possibly after the CUDA
// runtime has begun to unload. That teardown is not a failure: nothing may be reported.
// CTest fails this test when the output says "release failed".
#include <cudamem/cudamem.hpp>

#include <cstdio>
#include <utility>

namespace {
cudamem::device_buffer<int> leftover;
cudamem::pinned_buffer<int> leftover_pinned;
}  // namespace

int main() {
  if (auto count = cudamem::device_count(); !count || *count == 0) return 77;  // no device: skipped
  auto made = cudamem::device_buffer<int>::allocate(1024);
  auto made_pinned = cudamem::pinned_buffer<int>::allocate(1024);
  if (!made || !made_pinned) return 1;
  leftover = std::move(*made);
  leftover_pinned = std::move(*made_pinned);
  std::puts("buffers left for static destruction");
  return 0;
}
