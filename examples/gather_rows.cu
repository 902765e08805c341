// SPDX-License-Identifier: MIT
// gather_rows: an embedding lookup with batched copies. The rows a batch of token ids names are gathered from a
// table in device memory into one contiguous batch by one copy_many call (one kernel for the whole batch, not one
// cudaMemcpyAsync per row); a kernel updates the batch; a second copy_many scatters the rows back. Build: see
// README.md.
#include <cudamem/copy_many.hpp>
#include <cudamem/cudamem.hpp>

#include <cstdio>
#include <utility>
#include <vector>

namespace {
using namespace cudamem;

__global__ void add_one(device_span<float> values) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i < values.size()) values[i] += 1.0f;
}

// The pieces that copy row from_row(r) of `from` into row to_row(r) of `to`, for r in [0, count): rows of `width`
// floats. subspan is checked: a row past either side is an error here, never a stray read or write.
template <class To, class From, class ToRow, class FromRow>
result<std::vector<std::pair<To, From>>> row_pieces(To to, From from, std::size_t width, std::size_t count,
                                                    ToRow to_row, FromRow from_row) {
  std::vector<std::pair<To, From>> pieces;
  pieces.reserve(count);
  for (std::size_t r = 0; r < count; ++r) {
    auto dst = to.subspan(to_row(r) * width, width);
    auto src = from.subspan(from_row(r) * width, width);
    if (!dst) return dst.error();
    if (!src) return src.error();
    pieces.emplace_back(*dst, *src);
  }
  return pieces;
}

int fail(const char* what, const error& e) {
  std::fprintf(stderr, "gather_rows: %s: %s\n", what, e.message());
  return 1;
}
}  // namespace

int main() {
  if (auto devices = device_count(); !devices || *devices == 0) {
    std::fprintf(stderr, "gather_rows: no CUDA driver or no GPU\n");
    return 1;
  }
  constexpr std::size_t width = 64, rows = 50'000, batch_rows = 4096;
  std::vector<float> values(width * rows);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 100'003);
  std::vector<std::size_t> ids(batch_rows);  // distinct ids: the scatter's destinations must not overlap
  for (std::size_t r = 0; r < batch_rows; ++r) ids[r] = (r * 7919) % rows;

  auto s = stream::create();
  if (!s) return fail("stream::create", s.error());
  auto table = device_buffer<float>::allocate(values.size(), *s);
  auto batch = device_buffer<float>::allocate(width * batch_rows, *s);
  if (!table || !batch) return fail("allocate", (!table ? table : batch).error());
  if (auto ok = copy(*table, span(values)); !ok) return fail("copy", ok.error());

  // Gather: batch row r <- table row ids[r]. Checked as a whole (extents, overlap) before anything is enqueued.
  const auto in_order = [](std::size_t r) { return r; };
  const auto by_id = [&ids](std::size_t r) { return ids[r]; };
  auto gather = row_pieces(batch->view(), device_span<const float>(*table), width, batch_rows, in_order, by_id);
  if (!gather) return fail("gather pieces", gather.error());
  if (auto ok = copy_many(*gather, *s); !ok) return fail("copy_many (gather)", ok.error());
  add_one<<<(width * batch_rows + 255) / 256, 256, 0, s->get()>>>(*batch);
  if (auto ok = check_launch("add_one"); !ok) return fail("add_one", ok.error());
  // Scatter: table row ids[r] <- batch row r.
  auto scatter = row_pieces(table->view(), device_span<const float>(*batch), width, batch_rows, by_id, in_order);
  if (!scatter) return fail("scatter pieces", scatter.error());
  if (auto ok = copy_many(*scatter, *s); !ok) return fail("copy_many (scatter)", ok.error());
  if (auto ok = s->synchronize(); !ok) return fail("synchronize", ok.error());

  std::vector<float> back(values.size());
  if (auto ok = copy(span(back), *table); !ok) return fail("copy", ok.error());
  std::vector<bool> touched(rows, false);
  for (std::size_t id : ids) touched[id] = true;
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < values.size(); ++i) wrong += back[i] != values[i] + (touched[i / width] ? 1.0f : 0.0f);
  if (wrong != 0) {
    std::fprintf(stderr, "gather_rows: %zu values wrong\n", wrong);
    return 1;
  }

  // A bad id (one past the table) is refused before anything moves.
  ids.back() = rows;
  if (row_pieces(batch->view(), device_span<const float>(*table), width, batch_rows, in_order, by_id)) {
    std::fprintf(stderr, "gather_rows: a row past the table was accepted\n");
    return 1;
  }
  std::printf("gather_rows: gathered, updated and scattered back %zu rows of %zu floats, all correct\n", batch_rows,
              width);
  return 0;
}
