// SPDX-License-Identifier: MIT
// copy_many on a device: every dispatch (the gather kernel, one engine call per piece, the synchronous loop) against
// a host reference, with random piece counts, sizes from 0 and 1 byte up and unaligned offsets, destinations
// poisoned and read back whole; captures in every mode, replayed; the staging of piece lists behind a long kernel;
// refusals that write nothing. Which dispatch ran is observed through the kernel's registration hook.
#include "common.cuh"

#include <cudamem/copy_many.hpp>

#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <utility>

using namespace cudamem;
using test::take;

namespace {

using dispatch_hook = detail::batch_dispatch;

// Counts the batches a dispatch (the gather kernel, or the driver's batch call) took and declined while it lives.
template <dispatch_hook& Slot>
struct dispatch_counter {
  static inline dispatch_hook real = nullptr;
  static inline int taken = 0, declined = 0;
  static result<bool> hook(const detail::batch_list& b, stream_ref s, const char* api) noexcept {
    result<bool> outcome = real(b, s, api);
    if (outcome && *outcome) ++taken;
    else if (outcome) ++declined;
    return outcome;
  }
  dispatch_counter() {
    REQUIRE(Slot != nullptr);  // nvcc translation units register the kernel; CUDA 12.8 headers have the batch call
    real = Slot;
    taken = declined = 0;
    Slot = &hook;
  }
  ~dispatch_counter() { Slot = real; }
  dispatch_counter(const dispatch_counter&) = delete;
  dispatch_counter& operator=(const dispatch_counter&) = delete;
};
using dispatch_watch = dispatch_counter<detail::copy_many_kernel>;
using batch_call_watch = dispatch_counter<detail::copy_many_batch>;
using batch_3d_watch = dispatch_counter<detail::copy_many_batch_3d>;
// Without a dispatch: the batches it would take go to the next one (kernel, batch call, one call per piece).
template <dispatch_hook& Slot>
struct without {
  dispatch_hook saved = Slot;
  without() { Slot = nullptr; }
  ~without() { Slot = saved; }
  without(const without&) = delete;
  without& operator=(const without&) = delete;
};
// A batch steered to one dispatch while it lives: 0 the gather kernel, 1 the batch call, 2 one copy per piece (the
// dispatches before it switched off), that dispatch's batches counted.
struct steered {
  std::optional<without<detail::copy_many_kernel>> no_kernel;
  std::optional<without<detail::copy_many_batch>> no_batch_call;
  std::optional<dispatch_watch> kernel;
  std::optional<batch_call_watch> batch_call;
  explicit steered(int path) {
    if (path >= 1) no_kernel.emplace();
    if (path == 2) no_batch_call.emplace();
    if (path == 0) kernel.emplace();
    if (path == 1) batch_call.emplace();
  }
};
// Whether the driver offers cudaMemcpyBatchAsync (CUDA 12.8 and later), as the driver itself answers.
bool driver_batches() {
  int version = 0;
  REQUIRE(cudaDriverGetVersion(&version) == cudaSuccess);
  return version >= 12080;
}

// Where each piece lies: destinations one after another with random gaps (then shuffled, so that they do not come in
// address order), sources anywhere in theirs (they may overlap one another).
struct layout {
  std::vector<std::size_t> dst_at, src_at, bytes;
  std::size_t dst_total = 0, src_total = 0;
};
layout random_layout(std::mt19937_64& rng, std::size_t count, std::size_t max_bytes, std::size_t granule,
                     bool in_order = false) {
  layout l;
  std::size_t cursor = 0;
  for (std::size_t k = 0; k < count; ++k) {
    const unsigned roll = rng() % 10;
    std::size_t bytes = roll == 0 ? 0 : roll == 1 ? 1 : std::uniform_int_distribution<std::size_t>(1, max_bytes)(rng);
    bytes = (bytes + granule - 1) / granule * granule;
    cursor += granule * (rng() % 4);
    l.dst_at.push_back(cursor);
    l.bytes.push_back(bytes);
    cursor += bytes;
  }
  l.dst_total = cursor + 64;
  l.src_total = max_bytes * 4 + 64;
  for (std::size_t k = 0; k < count; ++k)
    l.src_at.push_back(std::uniform_int_distribution<std::size_t>(0, (l.src_total - l.bytes[k]) / granule)(rng) *
                       granule);
  if (in_order) return l;
  std::vector<std::size_t> order(count);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::shuffle(order.begin(), order.end(), rng);
  layout shuffled = l;
  for (std::size_t k = 0; k < count; ++k) {
    shuffled.dst_at[k] = l.dst_at[order[k]];
    shuffled.src_at[k] = l.src_at[order[k]];
    shuffled.bytes[k] = l.bytes[order[k]];
  }
  return shuffled;
}
// The destination after the batch: poison, with each piece's source bytes copied in.
std::vector<unsigned char> expected_of(const layout& l, const std::vector<unsigned char>& source) {
  std::vector<unsigned char> out(l.dst_total, test::poison);
  for (std::size_t k = 0; k < l.bytes.size(); ++k)
    if (l.bytes[k] != 0) std::memcpy(&out[l.dst_at[k]], &source[l.src_at[k]], l.bytes[k]);
  return out;
}

// A batch of byte pieces from a buffer of kind Src into one of kind Dst, on `s` (null: synchronous), read back whole.
template <class Dst, class Src>
struct byte_batch {
  layout l;
  std::vector<unsigned char> source;
  buffer<unsigned char, Src> src;
  buffer<unsigned char, Dst> dst;
  std::vector<span<unsigned char, Dst>> dsts;
  std::vector<span<const unsigned char, Src>> srcs;

  byte_batch(std::mt19937_64& rng, std::size_t count, std::size_t max_bytes, std::size_t granule = 1,
             bool in_order = false)
      : l(random_layout(rng, count, max_bytes, granule, in_order)),
        source(test::random_vector<unsigned char>(l.src_total, rng())),
        src(take(buffer<unsigned char, Src>::allocate(l.src_total))),
        dst(take(buffer<unsigned char, Dst>::allocate(l.dst_total))) {
    REQUIRE_OK(copy(src, span(source)));
    for (std::size_t k = 0; k < count; ++k) {
      dsts.push_back(dst.view().subspan_unchecked(l.dst_at[k], l.bytes[k]));
      srcs.push_back(src.view().subspan_unchecked(l.src_at[k], l.bytes[k]));
    }
    poison();
  }
  void poison() { REQUIRE_OK(fill_bytes(dst, test::poison)); }
  // Whether the batch reaches the kernel's dispatch at all: two pieces with bytes or more.
  bool several() const {
    return std::count_if(l.bytes.begin(), l.bytes.end(), [](std::size_t b) { return b != 0; }) > 1;
  }
  void check() const {
    const auto got = test::read_back(dst.view());
    const auto want = expected_of(l, source);
    REQUIRE(got.size() == want.size());
    std::size_t first_wrong = got.size();
    for (std::size_t i = 0; i < got.size() && first_wrong == got.size(); ++i)
      if (got[i] != want[i]) first_wrong = i;
    INFO("first wrong byte at " << first_wrong << " of " << got.size());
    CHECK(first_wrong == got.size());
  }
  void run(stream_ref s) {
    REQUIRE_OK(copy_many(dsts, srcs, s));
    REQUIRE_OK(s.synchronize());
    check();
  }
};

std::mt19937_64 seeded() {
  const std::uint64_t seed = test::fresh_seed();
  UNSCOPED_INFO("seed " << seed);
  return std::mt19937_64(seed);
}

}  // namespace

TEST_CASE("copy_many: many small device pieces go through the gather kernel", "[copy_many]") {
  auto rng = seeded();
  auto s = take(stream::create());
  dispatch_watch watch;
  int dispatched = 0;
  for (const std::size_t count : {2, 3, 31, 33, 257, 1000, 4099}) {
    for (const std::size_t granule : {1, 4, 16}) {
      INFO(count << " pieces, sizes multiples of " << granule);
      byte_batch<device, device> batch(rng, count, 600, granule);
      batch.run(s);
      dispatched += batch.several() ? 1 : 0;
    }
  }
  CHECK(dispatched >= 15);
  CHECK(watch.taken == dispatched);
  CHECK(watch.declined == 0);
}

TEST_CASE("copy_many: pinned to device and back through every dispatch", "[copy_many]") {
  auto rng = seeded();
  auto s = take(stream::create());
  const bool batches = driver_batches();
  for (const int path : {0, 1, 2}) {
    INFO((path == 0 ? "gather kernel" : path == 1 ? "cudaMemcpyBatchAsync" : "one copy per piece"));
    const steered to(path);
    const std::size_t count = std::uniform_int_distribution<std::size_t>(50, 3000)(rng);
    byte_batch<device, pinned> in(rng, count, 300);
    in.run(s);
    byte_batch<pinned, device> out(rng, count, 300, 4);
    out.run(s);
    byte_batch<device, device> across(rng, count, 300, 16);
    across.run(s);
    if (path == 0) CHECK(dispatch_watch::taken == 3);
    if (path == 1) CHECK(batch_call_watch::taken == (batches ? 3 : 0));
  }
}

TEST_CASE("copy_many: destinations in address order (the one-pass check) through every dispatch", "[copy_many]") {
  auto rng = seeded();
  auto s = take(stream::create());
  const bool batches = driver_batches();
  for (const int path : {0, 1, 2}) {
    INFO((path == 0 ? "gather kernel" : path == 1 ? "cudaMemcpyBatchAsync" : "one copy per piece"));
    const steered to(path);
    int several = 0;
    for (const std::size_t granule : {1, 4, 16}) {
      const std::size_t count = std::uniform_int_distribution<std::size_t>(2, 3000)(rng);
      INFO(count << " pieces, sizes multiples of " << granule);
      byte_batch<device, pinned> in(rng, count, 300, granule, true);
      in.run(s);
      byte_batch<pinned, device> out(rng, count, 300, granule, true);
      out.run(s);
      byte_batch<device, device> across(rng, count, 300, granule, true);
      across.run(s);
      several += (in.several() ? 1 : 0) + (out.several() ? 1 : 0) + (across.several() ? 1 : 0);
    }
    if (path == 0) CHECK(dispatch_watch::taken == several);
    if (path == 1) CHECK(batch_call_watch::taken == (batches ? several : 0));
  }
  {
    INFO("the legacy default stream, and a capture: one copy per piece");
    byte_batch<device, pinned> legacy(rng, 700, 100, 1, true);
    {
      without<detail::copy_many_kernel> no_kernel;
      legacy.run(stream_ref::legacy());
    }
    byte_batch<device, device> captured(rng, 500, 100, 4, true);
    cudaGraph_t graph = nullptr;
    REQUIRE(cudaStreamBeginCapture(s.get(), cudaStreamCaptureModeThreadLocal) == cudaSuccess);
    const status queued = copy_many(captured.dsts, captured.srcs, s);
    REQUIRE(cudaStreamEndCapture(s.get(), &graph) == cudaSuccess);
    REQUIRE_OK(queued);
    cudaGraphExec_t exec = nullptr;
    REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
    REQUIRE(cudaGraphLaunch(exec, s.get()) == cudaSuccess);
    REQUIRE_OK(s.synchronize());
    (void)cudaGraphExecDestroy(exec), (void)cudaGraphDestroy(graph);
    captured.check();
  }
}

TEST_CASE("copy_many: in address order, what the one-pass check declines is refused as before", "[copy_many]") {
  constexpr std::size_t n = 4096;
  auto s = take(stream::create());
  auto dev = take(device_buffer<unsigned char>::allocate(n));
  auto host = take(pinned_buffer<unsigned char>::allocate(n));
  REQUIRE_OK(fill_bytes(dev, test::poison));
  const auto untouched = [&] {
    const auto got = test::read_back(dev.view());
    CHECK(std::count(got.begin(), got.end(), test::poison) == static_cast<std::ptrdiff_t>(n));
  };
  const auto d = dev.view();
  const auto h = std::as_const(host).view();
  const auto contains = [](const error& e, const char* text) {
    return std::string(e.message()).find(text) != std::string::npos;
  };
  {
    INFO("two destinations in order that overlap");
    std::vector<device_span<unsigned char>> dsts{d.subspan_unchecked(0, 64), d.subspan_unchecked(32, 64),
                                                 d.subspan_unchecked(200, 8)};
    std::vector<pinned_span<const unsigned char>> srcs{h.subspan_unchecked(0, 64), h.subspan_unchecked(64, 64),
                                                       h.subspan_unchecked(128, 8)};
    auto refused = copy_many(dsts, srcs, s);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().code() == errc::overlap);
    CHECK(contains(refused.error(), "copy_many: the destinations of pieces 0 and 1 overlap"));
  }
  {
    INFO("a source that is another piece's destination");
    std::vector<device_span<unsigned char>> dsts{d.subspan_unchecked(0, 64), d.subspan_unchecked(64, 64)};
    std::vector<device_span<const unsigned char>> srcs{d.subspan_unchecked(1024, 64), d.subspan_unchecked(0, 64)};
    auto refused = copy_many(dsts, srcs, s);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().code() == errc::overlap);
    CHECK(contains(refused.error(), "copy_many: the destination of piece 0 overlaps the source of piece 1"));
  }
  {
    INFO("extents that differ, and a null piece");
    std::vector<device_span<unsigned char>> dsts{d.subspan_unchecked(0, 64), d.subspan_unchecked(64, 64)};
    std::vector<pinned_span<const unsigned char>> srcs{h.subspan_unchecked(0, 64), h.subspan_unchecked(64, 63)};
    auto refused = copy_many(dsts, srcs, s);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().code() == errc::extents_mismatch);
    CHECK(contains(refused.error(), "copy_many: piece 1: "));
    srcs[1] = pinned_span<const unsigned char>(pinned_ptr<const unsigned char>(nullptr), 64);
    refused = copy_many(dsts, srcs, s);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().code() == errc::invalid_argument);
    CHECK(contains(refused.error(), "copy_many: piece 1: "));
  }
  REQUIRE_OK(s.synchronize());
  untouched();
}

TEST_CASE("copy_many: large pieces, managed memory and the legacy stream", "[copy_many]") {
  auto rng = seeded();
  auto s = take(stream::create());
  dispatch_watch watch;
  batch_call_watch batch_call;
  {
    INFO("pieces of up to 1 MiB: the copy engines, through the driver's batch call where it has one");
    byte_batch<device, pinned> large(rng, 40, std::size_t{1} << 20);
    large.run(s);
    CHECK(batch_call.taken == (driver_batches() ? 1 : 0));
  }
  {
    INFO("managed memory: one call per piece");
    byte_batch<managed, device> to_managed(rng, 300, 200);
    to_managed.run(s);
    byte_batch<device, managed> from_managed(rng, 300, 200);
    from_managed.run(s);
  }
  const int declined = watch.declined;
  CHECK(watch.taken == 0);
  CHECK(declined == 3);  // managed memory, and pieces far over the kernel's average limit
  {
    INFO("the legacy default stream");
    byte_batch<device, device> legacy(rng, 500, 100);
    legacy.run(stream_ref::legacy());
    CHECK(watch.taken == 1);
    // The batch call refuses the default streams: a large batch there is one call per piece.
    without<detail::copy_many_kernel> no_kernel;
    const int before = batch_call.taken;
    byte_batch<device, device> large_legacy(rng, 20, std::size_t{1} << 20);
    large_legacy.run(stream_ref::legacy());
    CHECK(batch_call.taken == before);
  }
}

TEST_CASE("copy_many: elements wider than a byte, two ranges and pairs", "[copy_many]") {
  auto rng = seeded();
  auto s = take(stream::create());
  constexpr std::size_t n = 1 << 16;
  const auto values = test::random_vector<std::uint32_t>(n, rng());
  auto src = take(device_buffer<std::uint32_t>::allocate(n));
  auto dst = take(device_buffer<std::uint32_t>::allocate(n));
  REQUIRE_OK(copy(src, span(values)));
  // Rows of a table gathered in a random order: dst row r is src row perm[r].
  constexpr std::size_t row = 64, rows = n / row;
  std::vector<std::size_t> perm(rows);
  std::iota(perm.begin(), perm.end(), std::size_t{0});
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<std::pair<device_span<std::uint32_t>, device_span<const std::uint32_t>>> pairs;
  for (std::size_t r = 0; r < rows; ++r)
    pairs.emplace_back(dst.view().subspan_unchecked(r * row, row), src.view().subspan_unchecked(perm[r] * row, row));
  for (const bool as_pairs : {true, false}) {
    REQUIRE_OK(fill_bytes(dst, test::poison));
    if (as_pairs) {
      REQUIRE_OK(copy_many(pairs, s));
    } else {
      std::vector<device_span<std::uint32_t>> dsts;
      std::vector<device_span<const std::uint32_t>> srcs;
      for (const auto& [d, from] : pairs) dsts.push_back(d), srcs.push_back(from);
      REQUIRE_OK(copy_many(dsts, srcs, s));
    }
    REQUIRE_OK(s.synchronize());
    const auto back = test::read_back(dst.view());
    bool same = true;
    for (std::size_t r = 0; r < rows; ++r)
      same = same && std::memcmp(&back[r * row], &values[perm[r] * row], row * sizeof(std::uint32_t)) == 0;
    CHECK(same);
  }
}

TEST_CASE("copy_many: the synchronous forms, pageable memory included", "[copy_many]") {
  auto rng = seeded();
  byte_batch<device, host> in(rng, 200, 100);
  REQUIRE_OK(copy_many(in.dsts, in.srcs));
  in.check();
  byte_batch<host, device> out(rng, 200, 100);
  REQUIRE_OK(copy_many(out.dsts, out.srcs));
  out.check();
  byte_batch<device, device> across(rng, 1, 100);  // one piece: as copy
  REQUIRE_OK(copy_many(across.dsts, across.srcs));
  across.check();
}

TEST_CASE("copy_many: a captured batch replays with the data of each replay", "[copy_many][graph]") {
  const auto mode =
      GENERATE(cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal, cudaStreamCaptureModeRelaxed);
  INFO("capture mode " << static_cast<int>(mode));
  auto rng = seeded();
  auto s = take(stream::create());
  dispatch_watch watch;
  batch_call_watch batch_call;
  byte_batch<device, device> batch(rng, 300, 200);
  byte_batch<device, pinned> from_pinned(rng, 100, 200);
  REQUIRE(cudaStreamBeginCapture(s.get(), mode) == cudaSuccess);
  const status captured = copy_many(batch.dsts, batch.srcs, s);
  const status captured_pinned = copy_many(from_pinned.dsts, from_pinned.srcs, s);
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(s.get(), &graph) == cudaSuccess);
  REQUIRE_OK(captured);
  REQUIRE_OK(captured_pinned);
  CHECK(watch.taken == 0);  // a captured batch is one copy node per piece
  CHECK(batch_call.taken == 0);
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  for (int replay = 0; replay < 2; ++replay) {
    INFO("replay " << replay);
    // Nothing ran at capture; each replay copies the sources as they are then.
    batch.source = test::random_vector<unsigned char>(batch.l.src_total, rng());
    REQUIRE_OK(copy(batch.src, span(batch.source)));
    from_pinned.source = test::random_vector<unsigned char>(from_pinned.l.src_total, rng());
    REQUIRE_OK(copy(from_pinned.src, span(from_pinned.source)));
    batch.poison();
    from_pinned.poison();
    REQUIRE(cudaGraphLaunch(exec, s.get()) == cudaSuccess);
    REQUIRE_OK(s.synchronize());
    batch.check();
    from_pinned.check();
  }
  CHECK(cudaGraphExecDestroy(exec) == cudaSuccess);
  CHECK(cudaGraphDestroy(graph) == cudaSuccess);
}

TEST_CASE("copy_many: piece lists queued behind a long kernel are not overwritten by later batches", "[copy_many]") {
  auto rng = seeded();
  auto s = take(stream::create());
  auto scratch = take(device_buffer<int>::allocate(1));
  dispatch_watch watch;
  std::vector<std::unique_ptr<byte_batch<device, device>>> batches;
  for (int b = 0; b < 20; ++b) batches.push_back(std::make_unique<byte_batch<device, device>>(rng, 700, 64));
  REQUIRE_OK(s.synchronize());
  // Every batch waits behind the kernel, so each list the host writes would land on one still to be read.
  test::delay_then_write<<<1, 32, 0, s.get()>>>(scratch.view(), 1, 1'000'000'000ull);  // about half a second
  REQUIRE(cudaGetLastError() == cudaSuccess);
  for (auto& batch : batches) REQUIRE_OK(copy_many(batch->dsts, batch->srcs, s));
  // The kernel should still hold the stream, so that the lists were all written meanwhile; on a loaded machine (other
  // tests on the GPU) it may not, and then this run shows only that the data is right.
  if (take(s.ready())) WARN("the delay kernel ended before the batches were queued behind it");
  REQUIRE_OK(s.synchronize());
  for (auto& batch : batches) batch->check();
  CHECK(watch.taken >= 2);  // two lists or more were queued at once; a batch that found no free block ran otherwise
  CHECK(watch.taken + watch.declined == 20);
}

TEST_CASE("copy_many: a refused batch writes nothing", "[copy_many]") {
  auto rng = seeded();
  auto s = take(stream::create());
  byte_batch<device, device> batch(rng, 50, 100, 4);
  const auto untouched = [&] { CHECK(test::all_bytes(test::read_back(batch.dst.view()), test::poison)); };
  auto dsts = batch.dsts;
  auto srcs = batch.srcs;
  // A destination overlapping another: piece b moved to start inside piece a.
  std::size_t a = 0;
  while (batch.l.bytes[a] < 2) ++a;
  std::size_t b = a + 1;
  while (b < dsts.size() && batch.l.bytes[b] == 0) ++b;
  REQUIRE(b < dsts.size());
  dsts[b] = make_span<device>(dsts[a].data().get() + 1, dsts[b].size(), dsts[b].device());
  auto refused = copy_many(dsts, srcs, s);
  REQUIRE_FALSE(refused);
  CHECK(refused.error() == errc::overlap);
  CHECK(std::string(refused.error().message()).find("the destinations of pieces") != std::string::npos);
  REQUIRE_OK(s.synchronize());
  untouched();
  // Device memory of a device the process does not have.
  dsts = batch.dsts;
  dsts[b] = make_span<device>(dsts[b].data().get(), dsts[b].size(), device_id(4096));
  refused = copy_many(dsts, srcs, s);
  REQUIRE_FALSE(refused);
  CHECK(refused.error() == errc::out_of_range);
  CHECK(std::string(refused.error().message()).find("piece " + std::to_string(b) + ":") != std::string::npos);
  // Extents that differ, in the last piece.
  dsts = batch.dsts;
  dsts.back() = make_span<device>(dsts.back().data().get(), dsts.back().size() + 1, dsts.back().device());
  refused = copy_many(dsts, srcs, s);
  REQUIRE_FALSE(refused);
  CHECK(refused.error() == errc::extents_mismatch);
  CHECK(std::string(refused.error().message()).find("piece " + std::to_string(dsts.size() - 1) + ":") !=
        std::string::npos);
  // A moved-from stream.
  auto moved = std::move(s);
  refused = copy_many(batch.dsts, batch.srcs, s);
  REQUIRE_FALSE(refused);
  REQUIRE_OK(moved.synchronize());
  untouched();
}

TEST_CASE("copy_many: pitched pieces, bands of two grids", "[copy_many][pitched]") {
  auto rng = seeded();
  auto s = take(stream::create());
  constexpr std::size_t width = 300, height = 64;
  auto src = take(device_pitched_buffer<int>::allocate(width, height));
  auto dst = take(device_pitched_buffer<int>::allocate(width, height));
  const auto values = test::random_vector<int>(width * height, rng());
  REQUIRE_OK(copy(src, span(values)));
  REQUIRE_OK(fill_bytes(dst, test::poison));
  // Bands of 8 rows: dst band k is src band (k * 3) % 8, columns [7, 7 + 250).
  std::vector<device_pitched_span<int>> dsts;
  std::vector<device_pitched_span<const int>> srcs;
  for (std::size_t k = 0; k < 8; ++k) {
    dsts.push_back(dst.view().subspan_unchecked(k * 8, 7, 8, 250));
    srcs.push_back(src.view().subspan_unchecked(((k * 3) % 8) * 8, 7, 8, 250));
  }
  dispatch_watch watch;
  REQUIRE_OK(copy_many(dsts, srcs, s));
  REQUIRE_OK(s.synchronize());
  CHECK(watch.taken == 1);  // pitched pieces through the gather kernel
  std::vector<int> back(width * height);
  REQUIRE_OK(copy(span(back), dst));
  int poison_cell = 0;
  std::memset(&poison_cell, test::poison, sizeof poison_cell);
  bool same = true;
  for (std::size_t r = 0; r < height; ++r)
    for (std::size_t c = 0; c < width; ++c) {
      const std::size_t from = ((r / 8 * 3) % 8) * 8 + r % 8;
      const int want = c >= 7 && c < 257 ? values[from * width + c] : poison_cell;
      same = same && back[r * width + c] == want;
    }
  CHECK(same);
}

TEST_CASE("copy_many: halo strips of one grid, rows and columns", "[copy_many][pitched]") {
  auto rng = seeded();
  auto s = take(stream::create());
  constexpr std::size_t width = 130, height = 70, halo = 2;
  auto grid = take(device_pitched_buffer<float>::allocate(width, height));
  auto next = take(device_pitched_buffer<float>::allocate(width, height));
  const auto values = test::random_vector<float>(width * height, rng());
  REQUIRE_OK(copy(next, span(values)));
  REQUIRE_OK(fill_bytes(grid, test::poison));
  // The grid's halo (2 cells wide, on every side) from the inner edge of the next grid's opposite side.
  const auto g = grid.view();
  const pitched_span<const float, device> n = next.view();
  const std::vector<std::pair<device_pitched_span<float>, device_pitched_span<const float>>> strips{
      {g.subspan_unchecked(0, 0, height, halo), n.subspan_unchecked(0, width - 2 * halo, height, halo)},
      {g.subspan_unchecked(0, width - halo, height, halo), n.subspan_unchecked(0, halo, height, halo)},
      {g.subspan_unchecked(0, halo, halo, width - 2 * halo),
       n.subspan_unchecked(height - 2 * halo, halo, halo, width - 2 * halo)},
      {g.subspan_unchecked(height - halo, halo, halo, width - 2 * halo),
       n.subspan_unchecked(halo, halo, halo, width - 2 * halo)}};
  const auto check_halo = [&] {
    std::vector<float> back(width * height);
    REQUIRE_OK(copy(span(back), grid));
    float poison_cell = 0;
    std::memset(&poison_cell, test::poison, sizeof poison_cell);
    std::size_t wrong = 0;
    for (std::size_t r = 0; r < height; ++r)
      for (std::size_t c = 0; c < width; ++c) {
        const bool left = c < halo, right = c >= width - halo, top = !left && !right && r < halo,
                   bottom = !left && !right && r >= height - halo;
        const std::size_t from_r = top ? r + height - 2 * halo : bottom ? r - height + 2 * halo : r;
        const std::size_t from_c = left ? c + width - 2 * halo : right ? c - width + 2 * halo : c;
        const float want = left || right || top || bottom ? values[from_r * width + from_c] : poison_cell;
        if (std::memcmp(&back[r * width + c], &want, sizeof want) != 0) ++wrong;
      }
    CHECK(wrong == 0);
  };
  for (const int path : {0, 1, 2}) {
    INFO((path == 0 ? "gather kernel" : path == 1 ? "cudaMemcpy3DBatchAsync" : "one 2D copy per strip"));
    dispatch_watch watch;
    std::optional<batch_3d_watch> batch_3d;
    std::optional<without<detail::copy_many_kernel>> no_kernel;
    std::optional<without<detail::copy_many_batch_3d>> no_batch_3d;
    if (path >= 1) no_kernel.emplace();
    if (path == 1) batch_3d.emplace();
    if (path == 2) no_batch_3d.emplace();
    REQUIRE_OK(fill_bytes(grid, test::poison));
    REQUIRE_OK(copy_many(strips, s));
    REQUIRE_OK(s.synchronize());
    CHECK(watch.taken == (path == 0 ? 1 : 0));
    if (path == 1) CHECK(batch_3d_watch::taken == (driver_batches() ? 1 : 0));
    check_halo();
  }
}

TEST_CASE("copy_many: tiles between pinned and device memory through the 3D batch call", "[copy_many][pitched]") {
  auto rng = seeded();
  auto s = take(stream::create());
  constexpr std::size_t width = 300, height = 64, tile = 50;
  auto dev = take(device_pitched_buffer<unsigned char>::allocate(width, height));
  auto host = take(pinned_buffer<unsigned char>::allocate(width * height));
  const auto values = test::random_vector<unsigned char>(width * height, rng());
  std::memcpy(host.data().get(), values.data(), values.size());
  // Tiles of `tile` x `tile` bytes, every other one, from the pinned image (pitch `width`) into the pitched buffer.
  std::vector<std::pair<device_pitched_span<unsigned char>, pinned_pitched_span<const unsigned char>>> tiles;
  const auto image = make_pitched(std::as_const(host).data(), width, height, width);
  REQUIRE_OK(image);
  for (std::size_t c = 0; c + tile <= width; c += 2 * tile)
    tiles.emplace_back(dev.view().subspan_unchecked(0, c, tile, tile),
                       image->subspan_unchecked(height - tile, c, tile, tile));
  for (const bool batch : {true, false}) {
    INFO((batch ? "cudaMemcpy3DBatchAsync" : "one 2D copy per tile"));
    without<detail::copy_many_kernel> no_kernel;
    std::optional<batch_3d_watch> watch;
    std::optional<without<detail::copy_many_batch_3d>> no_batch_3d;
    if (batch) watch.emplace();
    else no_batch_3d.emplace();
    REQUIRE_OK(fill_bytes(dev, test::poison));
    REQUIRE_OK(copy_many(tiles, s));
    REQUIRE_OK(s.synchronize());
    if (batch) CHECK(batch_3d_watch::taken == (driver_batches() ? 1 : 0));
    std::vector<unsigned char> back(width * height);
    REQUIRE(cudaMemcpy2D(back.data(), width, dev.data().get(), dev.pitch_bytes(), width, height,
                         cudaMemcpyDeviceToHost) == cudaSuccess);
    std::size_t wrong = 0;
    for (std::size_t r = 0; r < height; ++r)
      for (std::size_t c = 0; c < width; ++c) {
        const bool in_tile = r < tile && (c / tile) % 2 == 0 && (c / tile) * tile + tile <= width;
        const unsigned char want = in_tile ? values[(height - tile + r) * width + c] : test::poison;
        if (back[r * width + c] != want) ++wrong;
      }
    CHECK(wrong == 0);
  }
}

TEST_CASE("copy_many: pieces on another device go through the peer copies", "[copy_many][multi_gpu]") {
  REQUIRE(take(device_count()) >= 2);
  auto rng = seeded();
  auto s = take(stream::create(device_id(0)));
  dispatch_watch watch;
  const std::size_t count = 200;
  const layout l = random_layout(rng, count, 300, 1);
  const auto source = test::random_vector<unsigned char>(l.src_total, rng());
  auto src = take(device_buffer<unsigned char>::allocate(l.src_total, device_id(0)));
  auto dst = take(device_buffer<unsigned char>::allocate(l.dst_total, device_id(1)));
  REQUIRE_OK(copy(src, span(source)));
  REQUIRE_OK(fill_bytes(dst, test::poison));
  std::vector<device_span<unsigned char>> dsts;
  std::vector<device_span<const unsigned char>> srcs;
  for (std::size_t k = 0; k < count; ++k) {
    dsts.push_back(dst.view().subspan_unchecked(l.dst_at[k], l.bytes[k]));
    srcs.push_back(src.view().subspan_unchecked(l.src_at[k], l.bytes[k]));
  }
  REQUIRE_OK(copy_many(dsts, srcs, s));
  REQUIRE_OK(s.synchronize());
  CHECK(test::read_back(dst.view()) == expected_of(l, source));
  CHECK(watch.taken == 0);  // no peer_access guard: the kernel cannot reach device 1
}
