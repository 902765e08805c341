// SPDX-License-Identifier: MIT
// CuPy's MemoryPointer operations, typed (docs/cupy-mapping.md).
#include <cudamem/cudamem.hpp>

#include <vector>

namespace example {
using namespace cudamem;

// [memory_pointer]
status memory_pointer_operations(stream_ref s) {
  std::vector<float> host(1024, 1.5f);
  auto staging = pinned_buffer<float>::allocate(host.size());
  auto a = device_buffer<float>::allocate(host.size(), s);
  auto b = device_buffer<float>::allocate(host.size(), s);
  if (!staging) return staging.error();
  if (!a) return a.error();
  if (!b) return b.error();

  CUDAMEM_TRY(copy_from_host(*a, span(host)));       // a.copy_from_host(mem, size)
  CUDAMEM_TRY(copy_from_device(*b, *a, s));          // b.copy_from_device_async(a, size, stream)
  CUDAMEM_TRY(fill_bytes(*a, 0, s));                 // a.memset_async(0, size, stream)
  CUDAMEM_TRY(copy(*a, *b, s));                      // a.copy_from_async(b, size, stream)
  CUDAMEM_TRY(copy_to_host(*staging, *a, s));        // a.copy_to_host_async(mem, size, stream)
  CUDAMEM_TRY(s.synchronize());

  device_ptr<float> p = a->data() + 10;              // MemoryPointer + offset (in elements here)
  auto tail = a->view().subspan(10);                 // ... with a size, bounds-checked
  if (!tail) return tail.error();
  std::vector<float> out(tail->size());
  CUDAMEM_TRY(copy_to_host(span(out), *tail));       // tail.copy_to_host(mem, size)
  return out[0] == 1.5f && p == tail->data() ? status() : error(errc::invalid_argument, "cupy", "mismatch");
}
// [/memory_pointer]
}  // namespace example

int main() {
  if (auto count = cudamem::device_count(); !count || *count == 0) return 77;  // no device: skipped
  cudamem::stream_ref s = cudamem::stream_ref::legacy();
  return example::memory_pointer_operations(s) ? 0 : 1;
}
