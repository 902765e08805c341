// SPDX-License-Identifier: MIT
// Copies and fills (docs/copies.md).
#include <cudamem/cudamem.hpp>

#include <vector>

namespace example {
using namespace cudamem;

// [sync]
status synchronous(std::vector<double>& host_values) {
  auto d = device_buffer<double>::allocate(host_values.size());
  if (!d) return d.error();
  CUDAMEM_TRY(copy(*d, span(host_values)));   // H2D; pageable is fine for synchronous copies
  CUDAMEM_TRY(fill_bytes(span(host_values), 0));
  CUDAMEM_TRY(copy(span(host_values), *d));   // D2H; complete on return
  return {};
}
// [/sync]

// [async]
status stream_ordered(stream_ref s, std::size_t n) {
  auto staging = pinned_buffer<float>::allocate(n);   // page-locked: may be stream-ordered
  auto d = device_buffer<float>::allocate(n, s);      // ordered on s, freed on s
  if (!staging) return staging.error();
  if (!d) return d.error();
  for (float& x : *staging) x = 1.0f;
  CUDAMEM_TRY(copy(*d, *staging, s));                 // returns at once
  CUDAMEM_TRY(fill(*d, 2.5f, s));                     // typed fill: a kernel (.cu files only)
  CUDAMEM_TRY(copy(*staging, *d, s));
  return s.synchronize();
}
// [/async]

// [slices]
status middle_rows(device_span<int> all, std::vector<int>& out) {
  auto middle = all.subspan(all.size() / 4, all.size() / 2);  // checked: result<span>
  if (!middle) return middle.error();
  out.resize(middle->size());
  return copy_to_host(span(out), *middle);                    // CuPy: copy_to_host
}
// [/slices]

// [bytes]
status raw_bytes(device_span<float> floats, device_span<unsigned> words) {
  // Different element types do not copy; their bytes do, when the sizes agree.
  auto to = as_writable_bytes(words);  // a result: the byte count is checked
  auto from = as_bytes(floats);
  if (!to) return to.error();
  if (!from) return from.error();
  return copy(*to, *from);
}
// [/bytes]
}  // namespace example

int main() {
  using namespace cudamem;
  if (auto count = device_count(); !count || *count == 0) return 77;  // no device: skipped
  std::vector<double> values(100, 3.0);
  if (!example::synchronous(values) || values[0] != 3.0) return 1;
  if (!example::stream_ordered(stream_ref::legacy(), 1000)) return 1;
  auto d = device_buffer<int>::allocate(100);
  auto f = device_buffer<float>::allocate(100);
  auto w = device_buffer<unsigned>::allocate(100);
  if (!d || !f || !w) return 1;
  std::vector<int> out;
  if (!fill_bytes(*d, 0) || !example::middle_rows(*d, out) || out.size() != 50) return 1;
  return example::raw_bytes(*f, *w) ? 0 : 1;
}
