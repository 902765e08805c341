// SPDX-License-Identifier: MIT
// The ledger's bookkeeping without a GPU: statistics_resources over a host-memory upstream, on made-up streams of
// made-up devices, against a model that keeps its own sums per (source, device, stream), per source and per device;
// the trace recorder's file, parsed back.
#include <cudamem/statistics.hpp>
#include <cudamem/trace.hpp>

#include "catch.hpp"

#include <unistd.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

using namespace cudamem;

namespace {

struct malloc_upstream {  // host memory, served as device memory: the ledger never touches it
  using kind = device;
  result<void*> allocate(stream_ref, std::size_t bytes, std::size_t) noexcept {
    if (bytes == 0) return nullptr;
    return std::malloc(bytes);
  }
  void deallocate(stream_ref, void* p, std::size_t, std::size_t) noexcept { std::free(p); }
};

stream_ref made_up_stream(std::uint64_t id, int device) {
  return detail::stream_identity::make(reinterpret_cast<cudaStream_t>(std::uintptr_t{0x1000} * id), device_id(device),
                                       id);
}

// What the ledger should say, summed here event by event.
struct model_cell {
  std::int64_t in_use = 0, blocks = 0;
  std::uint64_t peak = 0, peak_blocks = 0, allocated = 0, allocations = 0, freed = 0, frees = 0;
  std::uint64_t peak_r = 0, peak_blocks_r = 0, base_allocated = 0, base_allocations = 0, base_freed = 0, base_frees = 0;
  void add(std::size_t bytes, bool is_free) {
    if (is_free) {
      in_use -= std::int64_t(bytes), --blocks, freed += bytes, ++frees;
      return;
    }
    in_use += std::int64_t(bytes), ++blocks, allocated += bytes, ++allocations;
    if (in_use > 0) peak = std::max(peak, std::uint64_t(in_use)), peak_r = std::max(peak_r, std::uint64_t(in_use));
    if (blocks > 0)
      peak_blocks = std::max(peak_blocks, std::uint64_t(blocks)),
      peak_blocks_r = std::max(peak_blocks_r, std::uint64_t(blocks));
  }
  void reset() {
    base_allocated = allocated, base_allocations = allocations, base_freed = freed, base_frees = frees;
    peak_r = in_use > 0 ? std::uint64_t(in_use) : 0;
    peak_blocks_r = blocks > 0 ? std::uint64_t(blocks) : 0;
  }
  void check(const usage& u, since from) const {
    CHECK(u.bytes_in_use == in_use);
    CHECK(u.blocks_in_use == blocks);
    const bool r = from == since::reset;
    CHECK(u.peak_bytes == (r ? peak_r : peak));
    CHECK(u.peak_blocks == (r ? peak_blocks_r : peak_blocks));
    CHECK(u.allocated_bytes == allocated - (r ? base_allocated : 0));
    CHECK(u.allocations == allocations - (r ? base_allocations : 0));
    CHECK(u.freed_bytes == freed - (r ? base_freed : 0));
    CHECK(u.frees == frees - (r ? base_frees : 0));
  }
};

}  // namespace

TEST_CASE("the ledger's figures per source, device and stream match a model, since start and since a reset",
          "[statistics]") {
  malloc_upstream upstream;
  ledger book;
  statistics_resource<malloc_upstream> first(upstream, book, "first"), second(upstream, book, "second");
  statistics_resource<malloc_upstream>* sources[] = {&first, &second};
  const stream_ref streams[] = {made_up_stream(11, 0), made_up_stream(12, 0), made_up_stream(13, 1),
                                made_up_stream(14, 2)};
  const int stream_device[] = {0, 0, 1, 2};
  struct live_block {
    int source;
    void* p;
    std::size_t bytes;
  };
  std::vector<live_block> live;
  std::map<std::tuple<int, int, std::uint64_t>, model_cell> per_stream;
  std::map<int, model_cell> per_source, per_device;
  std::mt19937_64 random(std::random_device{}());
  const auto seed = random();
  INFO("seed " << seed);
  random.seed(seed);
  const auto count = [&](int source, int stream, std::size_t bytes, bool is_free) {
    const int device = stream_device[stream];
    per_stream[{source, device, 11 + std::uint64_t(stream)}].add(bytes, is_free);
    per_source[source].add(bytes, is_free);
    per_device[device].add(bytes, is_free);
  };
  const auto step = [&] {
    const int stream = int(random() % 4);
    if (live.empty() || random() % 5 < 3) {
      const int source = int(random() % 2);
      const std::size_t bytes = 1 + random() % 5000;
      auto got = sources[source]->allocate(streams[stream], bytes, 8);
      REQUIRE(got);
      live.push_back({source, *got, bytes});
      count(source, stream, bytes, false);
    } else {  // freed on any stream: the stream it is freed on counts the free
      const std::size_t at = random() % live.size();
      const live_block b = live[at];
      live.erase(live.begin() + std::ptrdiff_t(at));
      sources[b.source]->deallocate(streams[stream], b.p, b.bytes, 8);
      count(b.source, stream, b.bytes, true);
    }
  };
  const auto compare = [&](since from) {
    for (int s = 0; s < 2; ++s) per_source[s].check(sources[s]->usage(from), from);
    for (int d = 0; d < 3; ++d) per_device[d].check(book.device(device_id(d), from), from);
    std::size_t rows = 0;
    book.for_each_stream(
        [&](const ledger_row& row) {
          ++rows;
          const int source = std::string(row.source) == "first" ? 0 : 1;
          per_stream.at({source, row.device, row.stream}).check(row.usage, from);
        },
        from);
    CHECK(rows == per_stream.size());
    for (int s = 0; s < 2; ++s)
      for (int st = 0; st < 4; ++st) {
        auto it = per_stream.find({s, stream_device[st], 11 + std::uint64_t(st)});
        if (it != per_stream.end()) it->second.check(sources[s]->usage(streams[st], from), from);
        else CHECK(sources[s]->usage(streams[st], from).allocations == 0);
      }
    std::vector<std::string> names;
    book.for_each_source([&](const char* name, const usage&) { names.emplace_back(name); });
    CHECK(names == std::vector<std::string>{"first", "second"});
  };
  for (int i = 0; i < 3000; ++i) step();
  compare(since::start);
  book.reset();
  for (auto& [key, cell] : per_stream) cell.reset();
  for (auto& [key, cell] : per_source) cell.reset();
  for (auto& [key, cell] : per_device) cell.reset();
  compare(since::reset);
  for (int i = 0; i < 3000; ++i) step();
  compare(since::start);
  compare(since::reset);
  CHECK(book.balanced() == live.empty());
  while (!live.empty()) {
    const live_block b = live.back();
    live.pop_back();
    sources[b.source]->deallocate(streams[0], b.p, b.bytes, 8);
    count(b.source, 0, b.bytes, true);
  }
  compare(since::start);
  CHECK(book.balanced());
}

TEST_CASE("streams that peak in turn and then together: the source's and the device's peaks are the sum's",
          "[statistics]") {
  // Each stream alone reaches a working set and gives it back; then all reach half of it at once, each below its own
  // peak, their sum above every earlier one. Sizes are random; the model sums event by event. A ledger that let each
  // stream grow into all the room left below the source's peak, rather than a share of it, would miss the sum.
  malloc_upstream upstream;
  ledger book;
  statistics_resource<malloc_upstream> counted(upstream, book, "turns");
  std::mt19937_64 random(std::random_device{}());
  const auto seed = random();
  INFO("seed " << seed);
  random.seed(seed);
  constexpr int streams = 4;
  model_cell per_source, per_stream[streams];
  std::vector<std::pair<void*, std::size_t>> live[streams];
  const auto allocate = [&](int s) {
    const std::size_t bytes = 1 + random() % 4096;
    live[s].emplace_back(*counted.allocate(made_up_stream(20 + std::uint64_t(s), 0), bytes, 8), bytes);
    per_source.add(bytes, false), per_stream[s].add(bytes, false);
  };
  const auto free_all = [&](int s) {
    for (auto [p, bytes] : live[s]) {
      counted.deallocate(made_up_stream(20 + std::uint64_t(s), 0), p, bytes, 8);
      per_source.add(bytes, true), per_stream[s].add(bytes, true);
    }
    live[s].clear();
  };
  for (int round = 0; round < 3; ++round) {
    for (int s = 0; s < streams; ++s) {
      for (int i = 0; i < 64; ++i) allocate(s);
      free_all(s);
    }
    // A new stream's first allocation, while little is in use, hands out the room below the peaks.
    const stream_ref fresh = made_up_stream(40 + std::uint64_t(round), 0);
    counted.deallocate(fresh, *counted.allocate(fresh, 8, 8), 8, 8);
    per_source.add(8, false), per_source.add(8, true);
    for (int i = 0; i < 32; ++i)
      for (int s = 0; s < streams; ++s) allocate(s);
    per_source.check(counted.usage(), since::start);
    per_source.check(book.device(device_id(0)), since::start);
    for (int s = 0; s < streams; ++s)
      per_stream[s].check(counted.usage(made_up_stream(20 + std::uint64_t(s), 0)), since::start);
    for (int s = 0; s < streams; ++s) free_all(s);
  }
  CHECK(book.balanced());
}

TEST_CASE("blocks allocated on one thread and freed on others balance, and every count arrives",
          "[statistics][concurrent]") {
  malloc_upstream upstream;
  ledger book;
  statistics_resource<malloc_upstream> counted(upstream, book, "threads");
  constexpr int threads = 4, per_thread = 2000;
  std::vector<std::vector<std::pair<void*, std::size_t>>> made(threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)  // each on its own stream, all on device 0
    workers.emplace_back([&, t] {
      const stream_ref s = made_up_stream(100 + std::uint64_t(t), 0);
      for (int i = 0; i < per_thread; ++i) {
        const std::size_t bytes = std::size_t(64 + i % 7);
        made[std::size_t(t)].emplace_back(*counted.allocate(s, bytes, 8), bytes);
      }
    });
  for (auto& w : workers) w.join();
  workers.clear();
  std::uint64_t expected_bytes = 0;
  for (auto& list : made)
    for (auto& [p, bytes] : list) expected_bytes += bytes;
  CHECK(counted.usage().bytes_in_use == std::int64_t(expected_bytes));
  CHECK(counted.usage().peak_bytes == expected_bytes);  // nothing was freed yet: the peak is the sum
  for (int t = 0; t < threads; ++t)  // thread t frees what thread t+1 made, on that thread's stream: foreign counts
    workers.emplace_back([&, t] {
      const std::uint64_t owner = std::uint64_t((t + 1) % threads);
      const stream_ref s = made_up_stream(100 + owner, 0);
      for (auto& [p, bytes] : made[owner]) counted.deallocate(s, p, bytes, 8);
    });
  for (auto& w : workers) w.join();
  const usage all = counted.usage();
  CHECK(all.allocations == std::uint64_t(threads * per_thread));
  CHECK(all.frees == std::uint64_t(threads * per_thread));
  CHECK(all.allocated_bytes == expected_bytes);
  CHECK(all.freed_bytes == expected_bytes);
  CHECK(all.bytes_in_use == 0);
  for (int t = 0; t < threads; ++t) CHECK(counted.usage(made_up_stream(100 + std::uint64_t(t), 0)).bytes_in_use == 0);
  CHECK(book.device(device_id(0)).bytes_in_use == 0);
  CHECK(book.balanced());
}

TEST_CASE("the default streams and uncounted calls", "[statistics]") {
  malloc_upstream upstream;
  ledger book;
  statistics_resource<malloc_upstream> counted(upstream, book, "defaults");
  void* p = *counted.allocate(stream_ref::legacy(), 100, 8);
  void* q = *counted.allocate(stream_ref::per_thread(), 200, 8);
  CHECK(*counted.allocate(stream_ref::legacy(), 0, 8) == nullptr);  // zero bytes: no block, nothing counted
  counted.deallocate(stream_ref::legacy(), nullptr, 0, 8);
  CHECK(counted.usage(stream_ref::legacy()).bytes_in_use == 100);
  CHECK(counted.usage(stream_ref::per_thread()).bytes_in_use == 200);
  std::vector<std::uint64_t> keys;
  book.for_each_stream([&](const ledger_row& row) { keys.push_back(row.stream); });
  CHECK(keys == std::vector<std::uint64_t>{ledger::legacy_stream, ledger::per_thread_stream});
  CHECK(counted.usage().allocations == 2);
  counted.deallocate(stream_ref::legacy(), p, 100, 8);
  counted.deallocate(stream_ref::per_thread(), q, 200, 8);
  CHECK(book.balanced());
  static_assert(!statistics_resource<malloc_upstream>::selects_device);
  CHECK(counted == counted);
}

// Each thread remembers the last cell it counted into; an adaptor made in the bytes of a destroyed one, counting on the
// same stream, must not inherit that memory.
TEST_CASE("an adaptor made where an earlier one was counts into cells of its own", "[statistics]") {
  using counted_type = statistics_resource<malloc_upstream>;
  malloc_upstream upstream;
  ledger book;
  const stream_ref s = made_up_stream(9, 0);
  alignas(counted_type) unsigned char storage[sizeof(counted_type)];
  auto* first = ::new (static_cast<void*>(storage)) counted_type(upstream, book, "first");
  first->deallocate(s, *first->allocate(s, 100, 8), 100, 8);  // this thread's last cell: first's on s
  first->~counted_type();
  auto* second = ::new (static_cast<void*>(storage)) counted_type(upstream, book, "second");
  second->deallocate(s, *second->allocate(s, 30, 8), 30, 8);
  CHECK(second->usage(s).allocated_bytes == 30);
  CHECK(second->usage(s).frees == 1);
  CHECK(second->usage().allocations == 1);
  second->~counted_type();
  std::map<std::string, std::uint64_t> allocated;
  book.for_each_source([&](const char* name, const usage& u) { allocated[name] = u.allocated_bytes; });
  CHECK(allocated == std::map<std::string, std::uint64_t>{{"first", 100}, {"second", 30}});
  CHECK(book.balanced());
}

TEST_CASE("sources beyond the ledger's capacity share its last one", "[statistics]") {
  malloc_upstream upstream;
  ledger book;
  std::vector<std::unique_ptr<statistics_resource<malloc_upstream>>> many;
  for (std::size_t i = 0; i < ledger::max_sources + 3; ++i)
    many.push_back(std::make_unique<statistics_resource<malloc_upstream>>(upstream, book, "s"));
  const stream_ref s = made_up_stream(7, 0);
  for (auto& r : many) r->deallocate(s, *r->allocate(s, 10, 8), 10, 8);
  std::size_t sources = 0;
  std::uint64_t last_allocations = 0;
  std::string last_name;
  book.for_each_source([&](const char* name, const usage& u) {
    ++sources;
    last_name = name, last_allocations = u.allocations;
  });
  CHECK(sources == ledger::max_sources);
  CHECK(last_name == "other sources");
  CHECK(last_allocations == 4);  // the last source's own and the three beyond
  CHECK(book.balanced());
}

// ---------------------------------------------------------------------------------------------------------------
// The trace: a minimal JSON reader (objects, arrays, strings without escapes beyond \" and \\, numbers, literals).
namespace {
struct json {
  enum kind_t { null, number, string, array, object } kind = null;
  double num = 0;
  std::string str;
  std::vector<json> items;
  std::vector<std::pair<std::string, json>> members;
  const json& operator[](const std::string& key) const {
    for (auto& [k, v] : members)
      if (k == key) return v;
    static const json none;
    return none;
  }
};
struct json_reader {
  const std::string& text;
  std::size_t at = 0;
  bool ok = true;
  void space() {
    while (at < text.size() && std::isspace(static_cast<unsigned char>(text[at]))) ++at;
  }
  bool eat(char c) {
    space();
    if (at < text.size() && text[at] == c) return ++at, true;
    return false;
  }
  std::string read_string() {
    std::string out;
    if (!eat('"')) return ok = false, out;
    while (at < text.size() && text[at] != '"') {
      if (text[at] == '\\') ++at;
      out += text[at++];
    }
    if (!eat('"')) ok = false;
    return out;
  }
  json value() {
    json v;
    space();
    if (at >= text.size()) return ok = false, v;
    if (text[at] == '{') {
      ++at;
      v.kind = json::object;
      if (eat('}')) return v;
      do {
        std::string key = read_string();
        if (!eat(':')) return ok = false, v;
        v.members.emplace_back(key, value());
      } while (ok && eat(','));
      if (!eat('}')) ok = false;
    } else if (text[at] == '[') {
      ++at;
      v.kind = json::array;
      if (eat(']')) return v;
      do v.items.push_back(value());
      while (ok && eat(','));
      if (!eat(']')) ok = false;
    } else if (text[at] == '"') {
      v.kind = json::string;
      v.str = read_string();
    } else {
      char* end = nullptr;
      v.num = std::strtod(text.c_str() + at, &end);
      if (end == text.c_str() + at) return ok = false, v;
      v.kind = json::number;
      at = std::size_t(end - text.c_str());
    }
    return v;
  }
};
}  // namespace

TEST_CASE("the trace recorder writes a Chrome trace that parses back with every allocation and free", "[statistics]") {
  char path[] = "/tmp/cudamem_trace_XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  malloc_upstream upstream;
  ledger book;
  statistics_resource<malloc_upstream> counted(upstream, book, "na\"me");
  trace_recorder recorder;
  REQUIRE(recorder.open(path, book));
  CHECK(recorder.open(path, book).error() == errc::invalid_argument);  // once
  const stream_ref a = made_up_stream(5, 0), b = made_up_stream(6, 1);
  struct done {
    bool is_free;
    std::size_t bytes;
    int device;
    std::uint64_t stream;
  };
  std::vector<done> expected;
  std::vector<std::pair<void*, std::size_t>> held;
  for (std::size_t i = 1; i <= 20; ++i) {
    const stream_ref s = i % 3 == 0 ? b : a;
    held.emplace_back(*counted.allocate(s, i * 100, 8), i * 100);
    expected.push_back({false, i * 100, i % 3 == 0 ? 1 : 0, i % 3 == 0 ? 6u : 5u});
  }
  for (auto& [p, bytes] : held) {
    counted.deallocate(a, p, bytes, 8);
    expected.push_back({true, bytes, 0, 5});
  }
  CHECK(recorder.events() == 40);
  REQUIRE(recorder.close());
  void* after = *counted.allocate(a, 10, 8);  // not recorded: closed
  counted.deallocate(a, after, 10, 8);

  std::ifstream in(path);
  std::stringstream content;
  content << in.rdbuf();
  std::remove(path);
  const std::string text = content.str();
  json_reader reader{text};
  const json root = reader.value();
  REQUIRE(reader.ok);
  reader.space();
  CHECK(reader.at == text.size());
  const json& events = root["traceEvents"];
  REQUIRE(events.kind == json::array);
  std::vector<done> seen;
  double last_ts = -1;
  std::map<int, double> device_counter;
  for (const json& e : events.items) {
    REQUIRE(e.kind == json::object);
    const std::string ph = e["ph"].str;
    if (ph == "i") {
      CHECK(e["ts"].num >= last_ts);
      last_ts = e["ts"].num;
      const json& args = e["args"];
      CHECK(args["source"].str == "na\"me");
      CHECK(e["pid"].num == args["device"].num);
      CHECK(e["tid"].num == args["stream"].num);
      CHECK(args["address"].kind == json::string);
      seen.push_back({e["name"].str == "free", std::size_t(args["bytes"].num), int(args["device"].num),
                      std::uint64_t(args["stream"].num)});
    } else if (ph == "C") {
      const bool of_device = e["name"].str.rfind("device ", 0) == 0;
      CHECK((of_device || e["name"].str.rfind("stream ", 0) == 0));
      if (of_device) device_counter[int(e["pid"].num)] = e["args"]["bytes"].num;
    } else {
      CHECK(ph == "M");
    }
  }
  REQUIRE(seen.size() == expected.size());
  for (std::size_t i = 0; i < seen.size(); ++i) {
    CHECK(seen[i].is_free == expected[i].is_free);
    CHECK(seen[i].bytes == expected[i].bytes);
    CHECK(seen[i].device == expected[i].device);
    CHECK(seen[i].stream == expected[i].stream);
  }
  // Device 0 allocated its share and freed everything (b's blocks too): its counter ends at minus device 1's share.
  std::int64_t device1 = 0;
  for (const done& d : expected)
    if (!d.is_free && d.device == 1) device1 += std::int64_t(d.bytes);
  CHECK(device_counter[0] == double(-device1));
  CHECK(device_counter[1] == double(device1));
  CHECK(book.balanced());
}

TEST_CASE("the trace recorder refuses a path it cannot create", "[statistics]") {
  ledger book;
  trace_recorder recorder;
  auto opened = recorder.open("/nonexistent-directory/trace.json", book);
  REQUIRE_FALSE(opened);
  CHECK(opened.error() == errc::not_supported);
  CHECK(std::string(opened.error().message()).find("/nonexistent-directory/trace.json") != std::string::npos);
  CHECK_FALSE(recorder.is_open());
  CHECK(recorder.open(nullptr, book).error() == errc::invalid_argument);
}
