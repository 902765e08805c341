// SPDX-License-Identifier: MIT
// Batched copies (docs/copies.md, "Batched copies"): gathering rows of a table.
#include <cudamem/copy_many.hpp>
#include <cudamem/cudamem.hpp>

#include <cstddef>
#include <utility>
#include <vector>

namespace example {
using namespace cudamem;

// [gather]
// Row r of `out` becomes row ids[r] of `table` (rows of `width` floats): one call, one kernel for small rows.
status gather_rows(device_span<float> out, device_span<const float> table, std::size_t width,
                   const std::vector<std::size_t>& ids, stream_ref s) {
  std::vector<std::pair<device_span<float>, device_span<const float>>> rows;
  rows.reserve(ids.size());
  for (std::size_t r = 0; r < ids.size(); ++r) {
    auto to = out.subspan(r * width, width);  // checked slices: a bad id is an error, not a stray read
    auto from = table.subspan(ids[r] * width, width);
    if (!to) return to.error();
    if (!from) return from.error();
    rows.emplace_back(*to, *from);
  }
  return copy_many(rows, s);  // checked as a whole first (extents, overlap); returns at once
}
// [/gather]

}  // namespace example

int main() {
  using namespace cudamem;
  if (auto count = device_count(); !count || *count == 0) return 77;  // no device: skipped
  constexpr std::size_t width = 48, rows = 1000;
  std::vector<float> values(width * rows);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
  auto table = device_buffer<float>::allocate(values.size());
  auto out = device_buffer<float>::allocate(width * 300);
  auto s = stream::create();
  if (!table || !out || !s || !copy(*table, span(values))) return 1;
  std::vector<std::size_t> ids;
  for (std::size_t r = 0; r < 300; ++r) ids.push_back((r * 7919) % rows);
  if (!example::gather_rows(*out, *table, width, ids, *s) || !s->synchronize()) return 1;
  std::vector<float> back(width * 300);
  if (!copy(span(back), *out)) return 1;
  for (std::size_t r = 0; r < ids.size(); ++r)
    for (std::size_t c = 0; c < width; ++c)
      if (back[r * width + c] != values[ids[r] * width + c]) return 1;
  ids.back() = rows;  // one past the table: refused before anything is copied
  return example::gather_rows(*out, *table, width, ids, *s) ? 1 : 0;
}
