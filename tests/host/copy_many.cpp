// SPDX-License-Identifier: MIT
// copy_many without a device: batches of pageable host pieces run on the host (memcpy), so every check of a batch
// is held here to a brute-force model (a byte map of who writes and reads each byte of an arena) over random piece
// sets, and the bytes of every accepted batch to the pieces copied one at a time.
#include <cudamem/copy_many.hpp>
#include <cudamem/cudamem.hpp>

#include "catch.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

using namespace cudamem;

namespace {
bool contains(const error& e, const std::string& text) {
  return std::string(e.message()).find(text) != std::string::npos;
}

constexpr std::size_t arena_elems = 2048;

struct piece {
  std::size_t dst_at, dst_count, src_at, src_count;
  bool dst_null = false, src_null = false;
};

// What the model expects of a batch: the first piece refused by its own checks and why, else whether the batch
// overlaps; with the byte map of destinations and sources.
struct expectation {
  bool ok = true;
  errc code = errc::invalid_argument;
  std::size_t piece = 0;  // for a refusal of one piece
};

// Elements [at, at + count) of the arena, as byte ranges of 2-byte elements.
bool ranges_meet(std::size_t a, std::size_t a_count, std::size_t b, std::size_t b_count) {
  std::vector<bool> used(arena_elems, false);
  for (std::size_t i = a; i < a + a_count; ++i) used[i] = true;
  for (std::size_t i = b; i < b + b_count; ++i)
    if (used[i]) return true;
  return false;
}

expectation model(const std::vector<piece>& pieces, std::vector<int>& writer, std::vector<int>& readers) {
  for (std::size_t k = 0; k < pieces.size(); ++k) {
    const piece& p = pieces[k];
    if (p.dst_count != p.src_count) return {false, errc::extents_mismatch, k};
    if (p.dst_count == 0) continue;
    if (p.dst_null || p.src_null) return {false, errc::invalid_argument, k};
    if (ranges_meet(p.dst_at, p.dst_count, p.src_at, p.src_count)) return {false, errc::overlap, k};
  }
  writer.assign(arena_elems, -1);
  readers.assign(arena_elems, 0);
  bool overlap = false;
  for (std::size_t k = 0; k < pieces.size(); ++k) {
    const piece& p = pieces[k];
    if (p.dst_count == 0) continue;
    for (std::size_t i = p.dst_at; i < p.dst_at + p.dst_count; ++i) {
      if (writer[i] >= 0) overlap = true;
      writer[i] = static_cast<int>(k);
    }
    for (std::size_t i = p.src_at; i < p.src_at + p.src_count; ++i) ++readers[i];
  }
  for (std::size_t i = 0; i < arena_elems; ++i)
    if (writer[i] >= 0 && readers[i] > 0) overlap = true;
  return overlap ? expectation{false, errc::overlap, pieces.size()} : expectation{};
}

// Whether the pieces named by a batch-level overlap message do overlap, by the byte map.
bool named_overlap_is_real(const error& e, const std::vector<piece>& pieces) {
  std::size_t a = 0, b = 0;
  const char* text = e.message();
  const piece* pa = nullptr;
  if (std::sscanf(text, "copy_many: the destinations of pieces %zu and %zu overlap", &a, &b) == 2) {
    if (a >= pieces.size() || b >= pieces.size() || a >= b) return false;
    pa = &pieces[a];
    return ranges_meet(pa->dst_at, pa->dst_count, pieces[b].dst_at, pieces[b].dst_count);
  }
  if (std::sscanf(text, "copy_many: the destination of piece %zu overlaps the source of piece %zu", &a, &b) == 2) {
    if (a >= pieces.size() || b >= pieces.size() || a == b) return false;
    return ranges_meet(pieces[a].dst_at, pieces[a].dst_count, pieces[b].src_at, pieces[b].src_count);
  }
  return false;
}

std::vector<piece> random_pieces(std::mt19937_64& rng) {
  const std::size_t count = std::uniform_int_distribution<std::size_t>(0, 48)(rng);
  const std::size_t longest = std::uniform_int_distribution<std::size_t>(1, 40)(rng);
  const bool apart = rng() % 2 == 0;  // sources from the upper half, destinations from the lower
  std::vector<piece> pieces(count);
  for (piece& p : pieces) {
    p.dst_count = std::uniform_int_distribution<std::size_t>(0, longest)(rng);
    p.src_count = rng() % 50 == 0 ? p.dst_count + 1 : p.dst_count;
    const std::size_t half = arena_elems / 2, span_room = (apart ? half : arena_elems) - longest - 2;
    p.dst_at = std::uniform_int_distribution<std::size_t>(0, span_room)(rng);
    p.src_at = std::uniform_int_distribution<std::size_t>(0, span_room)(rng) + (apart ? half : 0);
    p.dst_null = rng() % 80 == 0;
    p.src_null = rng() % 80 == 0;
  }
  if (count > 1 && rng() % 3 == 0)
    std::sort(pieces.begin(), pieces.end(), [](const piece& x, const piece& y) { return x.dst_at < y.dst_at; });
  return pieces;
}

// The views of `pieces` over `arena` (its elements are 2 bytes, so the checks count elements, not bytes).
std::pair<std::vector<host_span<std::uint16_t>>, std::vector<host_span<const std::uint16_t>>> views_of(
    const std::vector<piece>& pieces, std::vector<std::uint16_t>& arena) {
  std::vector<host_span<std::uint16_t>> dsts;
  std::vector<host_span<const std::uint16_t>> srcs;
  for (const piece& p : pieces) {
    dsts.push_back(make_host_span(p.dst_null ? nullptr : arena.data() + p.dst_at, p.dst_count));
    srcs.push_back(make_host_span<const std::uint16_t>(p.src_null ? nullptr : arena.data() + p.src_at, p.src_count));
  }
  return {dsts, srcs};
}
}  // namespace

TEST_CASE("copy_many checks a batch as the byte map does, and copies what it accepts", "[copy_many]") {
  std::mt19937_64 rng(std::random_device{}());
  const std::uint64_t seed = rng();
  INFO("seed " << seed);
  rng.seed(seed);
  int accepted = 0, refused_piece = 0, refused_batch = 0;
  for (int round = 0; round < 3000; ++round) {
    const auto pieces = random_pieces(rng);
    std::vector<std::uint16_t> arena(arena_elems);
    for (auto& cell : arena) cell = static_cast<std::uint16_t>(rng());
    const std::vector<std::uint16_t> before = arena;
    std::vector<int> writer, readers;
    const expectation want = model(pieces, writer, readers);
    auto [dsts, srcs] = views_of(pieces, arena);
    // The two forms, alternately: two ranges, and a range of pairs.
    status done;
    if (round % 2 == 0) {
      done = copy_many(dsts, srcs);
    } else {
      std::vector<std::pair<host_span<std::uint16_t>, host_span<const std::uint16_t>>> pairs;
      for (std::size_t k = 0; k < dsts.size(); ++k) pairs.emplace_back(dsts[k], srcs[k]);
      done = copy_many(pairs);
    }
    INFO("round " << round << ", " << pieces.size() << " pieces");
    if (want.ok) {
      ++accepted;
      REQUIRE(done);
      std::vector<std::uint16_t> expected = before;  // one piece at a time; no destination is any piece's source
      for (const piece& p : pieces)
        if (p.dst_count != 0) std::memcpy(&expected[p.dst_at], &before[p.src_at], p.dst_count * 2);
      REQUIRE(arena == expected);
      continue;
    }
    REQUIRE_FALSE(done);
    INFO(done.error().message());
    CHECK(done.error() == want.code);
    CHECK(arena == before);  // a refused batch writes nothing
    if (want.piece < pieces.size()) {
      ++refused_piece;
      CHECK(contains(done.error(), "copy_many: piece " + std::to_string(want.piece) + ": "));
    } else {
      ++refused_batch;
      CHECK(named_overlap_is_real(done.error(), pieces));
    }
  }
  // The random sets reach every outcome.
  CHECK(accepted > 100);
  CHECK(refused_piece > 100);
  CHECK(refused_batch > 100);
}

TEST_CASE("copy_many refuses ranges of different lengths and skips empty pieces", "[copy_many]") {
  std::vector<int> a{1, 2, 3, 4}, b{5, 6, 7, 8};
  std::vector<host_span<int>> dsts{make_host_span(a.data(), 2), make_host_span(a.data() + 2, 2)};
  std::vector<host_span<const int>> srcs{make_host_span<const int>(b.data(), 2)};
  auto refused = copy_many(dsts, srcs);
  REQUIRE_FALSE(refused);
  CHECK(refused.error() == errc::extents_mismatch);
  CHECK(contains(refused.error(), "copy_many: 2 destinations and 1 sources"));
  CHECK(a == std::vector<int>{1, 2, 3, 4});

  // Empty pieces, null or not, anywhere (also where another piece writes) are no work.
  srcs = {make_host_span<const int>(b.data() + 1, 3), make_host_span<const int>(nullptr, 0),
          make_host_span<const int>(a.data(), 0)};
  dsts = {make_host_span(a.data() + 1, 3), make_host_span<int>(nullptr, 0), make_host_span(a.data() + 2, 0)};
  REQUIRE(copy_many(dsts, srcs));
  CHECK(a == std::vector<int>{1, 6, 7, 8});

  // No pieces: nothing to do.
  dsts.clear(), srcs.clear();
  CHECK(copy_many(dsts, srcs));
}

TEST_CASE("a batch of one piece is checked and named as piece 0", "[copy_many]") {
  std::vector<int> a{1, 2, 3, 4};
  const std::vector<std::tuple<host_span<int>, host_span<const int>>> overlapping{
      {make_host_span(a.data(), 3), make_host_span<const int>(a.data() + 1, 3)}};
  auto refused = copy_many(overlapping);
  REQUIRE_FALSE(refused);
  CHECK(refused.error() == errc::overlap);
  CHECK(contains(refused.error(), "copy_many: piece 0: source and destination overlap"));
  CHECK(a == std::vector<int>{1, 2, 3, 4});
  const std::vector<std::tuple<host_span<int>, host_span<const int>>> apart{
      {make_host_span(a.data(), 2), make_host_span<const int>(a.data() + 2, 2)}};
  REQUIRE(copy_many(apart));
  CHECK(a == std::vector<int>{3, 4, 3, 4});
}

TEST_CASE("copy_many refuses a destination that overlaps another piece's source, in either order", "[copy_many]") {
  std::vector<int> a(8, 0);
  for (int round = 0; round < 2; ++round) {
    // Piece 0 writes [0, 2) reading [4, 6); piece 1 writes [6, 8) reading [1, 3): it reads what piece 0 writes.
    std::vector<host_span<int>> dsts{make_host_span(a.data(), 2), make_host_span(a.data() + 6, 2)};
    std::vector<host_span<const int>> srcs{make_host_span<const int>(a.data() + 4, 2),
                                           make_host_span<const int>(a.data() + 1, 2)};
    if (round == 1) std::swap(dsts[0], dsts[1]), std::swap(srcs[0], srcs[1]);
    auto refused = copy_many(dsts, srcs);
    REQUIRE_FALSE(refused);
    CHECK(refused.error() == errc::overlap);
    const std::string want = round == 0 ? "the destination of piece 0 overlaps the source of piece 1"
                                        : "the destination of piece 1 overlaps the source of piece 0";
    CHECK(contains(refused.error(), want));
  }
}

TEST_CASE("copy_many compares strips of one grid by the bytes they touch", "[copy_many][pitched]") {
  // A grid of 6 rows of 10 cells: its left and right columns have overlapping footprints, but no common byte.
  constexpr std::size_t width = 10, height = 6;
  std::vector<int> grid(width * height, 0), other(width * height);
  for (std::size_t i = 0; i < other.size(); ++i) other[i] = static_cast<int>(i) + 1;
  const auto strip = [](std::vector<int>& cells, std::size_t col, std::size_t cols) {
    return host_pitched_span<int>(host_ptr<int>(cells.data() + col), cols, height, width * sizeof(int));
  };
  const auto from = [&](std::size_t col, std::size_t cols) {
    return host_pitched_span<const int>(strip(other, col, cols));
  };
  // Halo columns: the left one from the other grid's column 8, the right one from its column 1.
  std::vector<std::pair<host_pitched_span<int>, host_pitched_span<const int>>> halo{{strip(grid, 0, 1), from(8, 1)},
                                                                                    {strip(grid, 9, 1), from(1, 1)}};
  REQUIRE(copy_many(halo));
  for (std::size_t r = 0; r < height; ++r)
    for (std::size_t c = 0; c < width; ++c) {
      const int want = c == 0 ? other[r * width + 8] : c == 9 ? other[r * width + 1] : 0;
      CHECK(grid[r * width + c] == want);
    }
  // Strips that do share cells: columns [2, 5) and [4, 6).
  const std::vector<int> before = grid;
  halo = {{strip(grid, 2, 3), from(0, 3)}, {strip(grid, 4, 2), from(7, 2)}};
  auto refused = copy_many(halo);
  REQUIRE_FALSE(refused);
  CHECK(refused.error() == errc::overlap);
  CHECK(contains(refused.error(), "the destinations of pieces 0 and 1 overlap"));
  CHECK(grid == before);
  // A strip one piece writes and another reads: column 0 of the grid.
  const std::vector<int> other_before = other;
  halo = {{strip(grid, 0, 1), from(8, 1)}, {strip(other, 5, 1), strip(grid, 0, 1)}};
  refused = copy_many(halo);
  REQUIRE_FALSE(refused);
  CHECK(contains(refused.error(), "the destination of piece 0 overlaps the source of piece 1"));
  CHECK(grid == before);
  CHECK(other == other_before);
  // Strips of the same grid in rows, one read, another written: rows 0-1 into rows 3-4.
  const auto rows = [&](std::size_t row) {
    return host_pitched_span<int>(host_ptr<int>(grid.data() + row * width + 2), 5, 2, width * sizeof(int));
  };
  halo = {{rows(3), rows(0)}, {strip(grid, 9, 1), from(0, 1)}};
  REQUIRE(copy_many(halo));
  for (std::size_t r = 3; r < 5; ++r)
    for (std::size_t c = 2; c < 7; ++c) CHECK(grid[r * width + c] == before[(r - 3) * width + c]);
}
