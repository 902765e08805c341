// SPDX-License-Identifier: MIT
// libFuzzer harness: copy_many's checks of a whole batch against a model written out here, over one heap arena: a
// piece's own source is compared by footprint (first byte to one past the last), as copy does; pieces with one
// another by the bytes they touch (a byte map), where the documented rule says the library can tell. Batches are all 1D
// or all 2D (rows of a pitch), of pageable host memory, so that the synchronous form runs them on the host and no
// device is needed. A batch the model accepts must copy exactly what copying its pieces one at a time does; one it
// refuses must fail with the model's error, name the right piece, and leave the arena as it was.
#include <cudamem/copy_many.hpp>
#include <cudamem/pitched.hpp>

#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {
using namespace cudamem;

#define EXPECT(condition)                                                                                  \
  do {                                                                                                     \
    if (!(condition)) {                                                                                    \
      std::fprintf(stderr, "copy_many fuzzer: the model disagrees: %s (line %d)\n", #condition, __LINE__); \
      std::abort();                                                                                        \
    }                                                                                                      \
  } while (0)

constexpr std::size_t arena_bytes = 1024;

struct side {
  std::size_t at, width, height, pitch;
  bool null;
  std::size_t footprint() const { return width == 0 || height == 0 ? 0 : pitch * (height - 1) + width; }
};
struct piece {
  side dst, src;
};

side draw_side(FuzzedDataProvider& in, bool flat, std::size_t width, std::size_t height) {
  side s{0, width, flat ? 1 : height, 0, in.ConsumeIntegralInRange<int>(0, 40) == 0};
  s.pitch = flat ? width : in.ConsumeIntegralInRange<std::size_t>(width > 2 ? width - 2 : 0, width + 24);
  s.at = in.ConsumeIntegralInRange<std::size_t>(0, arena_bytes - s.footprint());  // at most 408 of 1024 bytes
  return s;
}

bool meet(const side& a, const side& b) {
  const std::size_t fa = a.footprint(), fb = b.footprint();
  return fa != 0 && fb != 0 && a.at < b.at + fb && b.at < a.at + fa;
}
bool empty(const side& s) { return s.width == 0 || s.height == 0; }
bool strided(const side& s) { return s.height > 1 && s.pitch != s.width; }

// The documented rule for two pieces' sides whose footprints meet: they conflict when they share a byte (the byte
// map) where the library can tell, which is for two contiguous sides, or sides on one pitch whose rows (a contiguous
// side: its whole run) are no longer than it; elsewhere a meeting footprint conflicts.
bool decidable(const side& a, const side& b) {
  if (!strided(a) && !strided(b)) return true;
  if (strided(a) && strided(b) && a.pitch != b.pitch) return false;
  const std::size_t pitch = strided(a) ? a.pitch : b.pitch;
  for (const side* s : {&a, &b})
    if ((strided(*s) ? s->width : s->footprint()) > pitch) return false;
  return true;
}
bool share_a_byte(const side& a, const side& b) {
  std::vector<unsigned char> used(arena_bytes, 0);
  for (std::size_t r = 0; r < a.height; ++r)
    for (std::size_t c = 0; c < a.width; ++c) used[a.at + r * (a.height > 1 ? a.pitch : 0) + c] = 1;
  for (std::size_t r = 0; r < b.height; ++r)
    for (std::size_t c = 0; c < b.width; ++c)
      if (used[b.at + r * (b.height > 1 ? b.pitch : 0) + c] != 0) return true;
  return false;
}
bool conflict(const side& a, const side& b) { return meet(a, b) && (!decidable(a, b) || share_a_byte(a, b)); }

struct expectation {
  bool ok = true;
  errc code = errc::invalid_argument;
  std::size_t piece = 0;  // a refusal of one piece; pieces.size(): of the batch
};
expectation model(const std::vector<piece>& pieces) {
  for (std::size_t k = 0; k < pieces.size(); ++k) {
    const piece& p = pieces[k];
    if (p.dst.width != p.src.width) return {false, errc::extents_mismatch, k};
    for (const side* s : {&p.dst, &p.src}) {
      if (empty(*s)) continue;
      if (s->null) return {false, errc::invalid_argument, k};
      // The row must fit its pitch at every height; a one-row operand of pitch 0 is a span (copy_2d's 1D form).
      if (s->pitch < s->width && !(s->height == 1 && s->pitch == 0)) return {false, errc::invalid_argument, k};
    }
    // A piece and its own source: copy's exact rule, refused where they share a byte.
    if (!empty(p.dst) && meet(p.dst, p.src) && share_a_byte(p.dst, p.src)) return {false, errc::overlap, k};
  }
  bool overlap = false;
  for (std::size_t k = 0; k < pieces.size(); ++k)
    for (std::size_t j = 0; j < pieces.size(); ++j)
      if (j != k && !empty(pieces[k].dst) && !empty(pieces[j].dst))
        overlap = overlap || conflict(pieces[k].dst, pieces[j].dst) || conflict(pieces[k].dst, pieces[j].src);
  return overlap ? expectation{false, errc::overlap, pieces.size()} : expectation{};
}

// Whether the pieces a batch-level message names do overlap.
bool named_pieces_meet(const char* text, const std::vector<piece>& pieces) {
  std::size_t a = 0, b = 0;
  if (std::sscanf(text, "copy_many: the destinations of pieces %zu and %zu overlap", &a, &b) == 2)
    return a < b && b < pieces.size() && conflict(pieces[a].dst, pieces[b].dst);
  if (std::sscanf(text, "copy_many: the destination of piece %zu overlaps the source of piece %zu", &a, &b) == 2)
    return a != b && a < pieces.size() && b < pieces.size() && conflict(pieces[a].dst, pieces[b].src);
  return false;
}

unsigned char* address(std::vector<unsigned char>& arena, const side& s) {
  return s.null ? nullptr : arena.data() + s.at;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  const bool flat = in.ConsumeBool();
  const std::size_t count = in.ConsumeIntegralInRange<std::size_t>(0, 40);
  std::vector<piece> pieces;
  for (std::size_t k = 0; k < count && in.remaining_bytes() > 0; ++k) {
    const std::size_t width = in.ConsumeIntegralInRange<std::size_t>(0, 48);
    const std::size_t height = in.ConsumeIntegralInRange<std::size_t>(0, 6);
    const std::size_t src_width = in.ConsumeIntegralInRange<int>(0, 30) == 0 ? width + 1 : width;
    pieces.push_back({draw_side(in, flat, width, height), draw_side(in, flat, src_width, height)});
  }
  std::vector<unsigned char> arena(arena_bytes);
  for (std::size_t i = 0; i < arena_bytes; ++i) arena[i] = static_cast<unsigned char>(i * 131 + 7);
  const std::vector<unsigned char> before = arena;
  const expectation want = model(pieces);

  status done;
  if (flat) {
    std::vector<host_span<unsigned char>> dsts;
    std::vector<host_span<const unsigned char>> srcs;
    for (const piece& p : pieces) {
      dsts.push_back(make_host_span(address(arena, p.dst), p.dst.width));
      srcs.push_back(make_host_span<const unsigned char>(address(arena, p.src), p.src.width));
    }
    done = copy_many(dsts, srcs);
  } else {
    std::vector<host_pitched_span<unsigned char>> dsts;
    std::vector<host_pitched_span<const unsigned char>> srcs;
    for (const piece& p : pieces) {
      dsts.emplace_back(host_ptr<unsigned char>(address(arena, p.dst)), p.dst.width, p.dst.height, p.dst.pitch);
      srcs.emplace_back(host_ptr<const unsigned char>(address(arena, p.src)), p.src.width, p.src.height, p.src.pitch);
    }
    done = copy_many(dsts, srcs);
  }

  if (want.ok) {
    EXPECT(done);
    std::vector<unsigned char> expected = before;
    for (const piece& p : pieces)
      for (std::size_t r = 0; !empty(p.dst) && r < p.dst.height; ++r)
        std::memcpy(&expected[p.dst.at + r * p.dst.pitch], &before[p.src.at + r * p.src.pitch], p.dst.width);
    EXPECT(arena == expected);
    return 0;
  }
  EXPECT(!done);
  EXPECT(done.error() == want.code);
  EXPECT(arena == before);
  if (want.piece < pieces.size()) {
    const std::string named = "copy_many: piece " + std::to_string(want.piece) + ": ";
    EXPECT(std::string(done.error().message()).rfind(named, 0) == 0);
  } else {
    EXPECT(named_pieces_meet(done.error().message(), pieces));
  }
  return 0;
}
