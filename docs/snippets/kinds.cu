// SPDX-License-Identifier: MIT
// Memory kinds (docs/kinds.md): what compiles. What does not is in tests/compile_fail/.
#include <cudamem/cudamem.hpp>

#include <vector>

namespace example {
using namespace cudamem;

// [kernel]
// Pinned memory is mapped for the device: a kernel may read and write it directly (zero-copy).
__global__ void bump(pinned_span<int> values) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i < values.size()) values[i] += 1;
}
// [/kernel]

// [widen]
status kinds_in_use(stream_ref s) {
  auto pinned_values = pinned_buffer<int>::allocate(256);
  if (!pinned_values) return pinned_values.error();
  for (int& v : *pinned_values) v = 1;  // pinned memory is host memory too

  host_span<const int> as_host = pinned_values->view();  // widening pinned -> host (and adding const)
  std::vector<int> copy_of(as_host.size());
  CUDAMEM_TRY(copy(span(copy_of), as_host));  // synchronous: any host kind is fine

  bump<<<1, 256, 0, s.get()>>>(*pinned_values);
  CUDAMEM_TRY(check_launch("bump"));  // a launch reports its errors only through cudaGetLastError
  auto managed_values = managed_buffer<int>::allocate(256);
  if (!managed_values) return managed_values.error();
  CUDAMEM_TRY(copy(*managed_values, *pinned_values, s));  // managed: the driver picks the direction
  CUDAMEM_TRY(s.synchronize());
  return (*managed_values)[0] == 2 ? status() : error(errc::invalid_argument, "kinds_in_use", "unexpected value");
}
// [/widen]
}  // namespace example

int main() {
  if (auto count = cudamem::device_count(); !count || *count == 0) return 77;  // no device: skipped
  return example::kinds_in_use(cudamem::stream_ref::legacy()) ? 0 : 1;
}
