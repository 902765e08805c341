// SPDX-License-Identifier: MIT
// The caching pool's logic and the allocator registry's table, without a GPU: a fake upstream that hands out host
// memory and records what it was given, and a fake stream order whose streams are made-up handles with made-up ids
// and whose "events" complete when the test says so.
#include <cudamem/pool.hpp>

#include "catch.hpp"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

using namespace cudamem;

namespace {

// The device the fake order made current (its on_device), which the fake upstream allocates on.
thread_local int fake_current_device = 0;

// Host memory with the upstream interface; counts calls, records each block's device and the streams and devices
// it freed on, and can be told to run out.
struct fake_upstream {
  using kind = device;
  std::map<void*, std::size_t> live;
  std::map<void*, int> devices;  // of every block handed out
  std::vector<std::pair<cudaStream_t, int>> frees;  // (stream, current device) of each deallocate
  std::size_t allocations = 0, limit_bytes = ~std::size_t{0};
  std::mutex mutex;

  result<void*> allocate(stream_ref, std::size_t bytes, std::size_t) noexcept {
    const std::lock_guard<std::mutex> lock(mutex);
    std::size_t in_use = 0;
    for (auto& [p, n] : live) in_use += n;
    if (bytes > limit_bytes - in_use) return error(cudaErrorMemoryAllocation, nullptr, "fake_upstream");
    void* p = std::malloc(bytes);
    live.emplace(p, bytes);
    devices[p] = fake_current_device;
    ++allocations;
    return p;
  }
  void deallocate(stream_ref s, void* p, std::size_t bytes, std::size_t) noexcept {
    const std::lock_guard<std::mutex> lock(mutex);
    auto it = live.find(p);
    CHECK(it != live.end());
    if (it == live.end()) return;
    CHECK(it->second == bytes);
    live.erase(it);
    frees.emplace_back(s.get(), fake_current_device);
    std::free(p);
  }
  int device_of(void* p) {
    const std::lock_guard<std::mutex> lock(mutex);
    return devices.at(p);
  }
};
static_assert(memory_resource_for<fake_upstream, device>);

// Streams are handles 0x1000, 0x2000, ...; each has an id (reassignable, to model a destroyed stream whose handle
// comes back) and a "busy" flag: a mark recorded while busy completes only when the test calls finish(). The pool
// calls mark from several threads at once in the concurrency test: the mutex keeps the fake consistent.
struct fake_world {
  std::map<cudaStream_t, std::uint64_t> ids;
  std::map<std::uint64_t, bool> pending;  // id -> its last mark is not done
  std::set<std::uint64_t> busy;
  std::set<std::uint64_t> capturing;
  std::map<cudaStream_t, int> devices;  // of each stream (absent: device 0)
  bool refuse_marks = false;      // mark() fails as CUDA would refuse a record
  bool no_own_stream = false;     // give_back() finds no stream of the pool's own to free on
  fake_upstream* upstream = nullptr;  // answers device_of() where set
  int marks = 0, waits = 0, device_waits = 0, destroyed = 0;
  std::atomic<int> id_queries{0}, pointer_queries{0};
  std::mutex mutex;

  stream_ref stream(std::uintptr_t handle, std::uint64_t id, int device = 0) {
    auto h = reinterpret_cast<cudaStream_t>(handle);
    ids[h] = id;
    if (device != 0) devices[h] = device;
    return stream_ref::from_native_handle(h, device_id(device));
  }
  static cudaStream_t own_stream(int device) {  // the pool's own stream of `device`, as the fake order makes it
    return reinterpret_cast<cudaStream_t>(std::uintptr_t{0xf0000} + std::uintptr_t(device));
  }
  // A stream object's reference: it carries the id, so the pool asks nothing.
  stream_ref object(std::uintptr_t handle, std::uint64_t id) {
    auto h = reinterpret_cast<cudaStream_t>(handle);
    ids[h] = id;
    return detail::stream_identity::make(h, device_id(0), id);
  }
  void finish(std::uint64_t id) {
    busy.erase(id);
    pending[id] = false;
  }
};

struct fake_order {
  using marker = std::uint64_t;  // the stream id, 0 before the first mark
  fake_world* world;
  status usable(stream_ref s, const char* api) const noexcept {
    if (!s.valid()) return detail::handle_moved_from(api, "stream");
    if (world->capturing.count(world->ids.at(s.get()))) return error(errc::capture_active, api, "capturing");
    return {};
  }
  result<std::uint64_t> id(stream_ref s, const char*) const noexcept {
    ++world->id_queries;
    return world->ids.at(s.get());
  }
  result<int> device(stream_ref s, const char*) const noexcept {
    auto it = world->devices.find(s.get());
    return it == world->devices.end() ? 0 : it->second;
  }
  result<int> device_of(void* p) const noexcept {
    ++world->pointer_queries;
    if (world->upstream == nullptr) return error(cudaErrorInvalidValue, "caching_pool", "cudaPointerGetAttributes");
    return world->upstream->device_of(p);
  }
  int current_device() const noexcept { return fake_current_device; }
  status mark(marker& m, int, stream_ref s) const noexcept {
    const std::lock_guard<std::mutex> lock(world->mutex);
    if (world->refuse_marks) return error(cudaErrorInvalidResourceHandle, "caching_pool", "cudaEventRecord");
    m = world->ids.at(s.get());
    world->pending[m] = world->busy.count(m) != 0;
    ++world->marks;
    return {};
  }
  // The fake's streams are never owned by live stream objects as far as release() can tell: it waits by device.
  result<bool> mark_live(marker&, int, cudaStream_t, std::uint64_t) const noexcept { return false; }
  bool passed(marker m) const noexcept {
    const std::lock_guard<std::mutex> lock(world->mutex);
    return !world->pending[m];
  }
  bool wait(marker m) const noexcept {
    const std::lock_guard<std::mutex> lock(world->mutex);
    ++world->waits;
    world->finish(m);
    return true;
  }
  bool wait_device(int) const noexcept {
    const std::lock_guard<std::mutex> lock(world->mutex);
    ++world->device_waits;
    for (auto& [id, pending] : world->pending) pending = false;
    world->busy.clear();
    return true;
  }
  void destroy(marker m) const noexcept {
    if (m != 0) ++world->destroyed;
  }
  static int relaxed() noexcept { return 0; }
  template <class F>
  decltype(auto) on_device(int device, F&& f) const noexcept {
    struct restore {
      int was = fake_current_device;
      ~restore() { fake_current_device = was; }
    } current;
    if (device >= 0) fake_current_device = device;
    return f();
  }
  // As the CUDA order's: a stream of the pool's own per device, none when the world says so.
  template <class Free>
  bool give_back(int device, Free&& free) const noexcept {
    if (world->no_own_stream) return false;
    return on_device(device, [&] {
      free(stream_ref::from_native_handle(fake_world::own_stream(device), device_id(device)));
      return true;
    });
  }
};

using pool_type = caching_pool<fake_upstream, fake_order>;

// What most tests here start from: a world of made-up streams, an upstream, and a pool over them.
struct pool_fixture {
  fake_world world;
  fake_upstream upstream;
  pool_type pool{upstream, fake_order{&world}};
  pool_fixture() { world.upstream = &upstream; }
};

}  // namespace

TEST_CASE("size classes: four per power of two from 256 bytes, never smaller than asked", "[pool]") {
  CHECK(detail::class_of(1, "t")->bytes == 256);
  CHECK(detail::class_of(256, "t")->bytes == 256);
  CHECK(detail::class_of(257, "t")->bytes == 320);
  CHECK(detail::class_of(512, "t")->bytes == 512);
  CHECK(detail::class_of(513, "t")->bytes == 640);
  CHECK(detail::class_of(std::size_t{1} << 20, "t")->bytes == std::size_t{1} << 20);
  CHECK(detail::class_of((std::size_t{1} << 20) + 1, "t")->bytes == (std::size_t{1} << 20) + (std::size_t{1} << 18));
  std::set<std::size_t> indices;
  for (std::size_t bytes = 1; bytes < (std::size_t{1} << 24); bytes = bytes * 3 / 2 + 1) {
    auto cls = detail::class_of(bytes, "t");
    REQUIRE(cls);
    CHECK(cls->bytes >= bytes);
    CHECK(cls->bytes - bytes <= bytes / 4 + 256);  // at most a quarter wasted (or the 256-byte minimum)
    CHECK(detail::class_of(cls->bytes, "t")->index == cls->index);  // a class's own size is in that class
    indices.insert(cls->index);
  }
  CHECK(detail::class_of(std::size_t{1} << 62, "t"));
  auto huge = detail::class_of((std::size_t{1} << 62) + 1, "t");
  REQUIRE_FALSE(huge);
  CHECK(huge.error().code() == errc::size_overflow);
}

TEST_CASE("a caching pool reuses a block on its own stream at once", "[pool]") {
  fake_world world;
  fake_upstream upstream;
  {
    pool_type pool(upstream, fake_order{&world});
    const stream_ref a = world.stream(0x1000, 11);
    world.busy.insert(11);  // the stream is still running: same-stream reuse needs no event
    void* first = *pool.allocate(a, 1000, 8);
    pool.deallocate(a, first, 1000, 8);
    void* second = *pool.allocate(a, 900, 8);  // same class (1024)
    CHECK(second == first);
    CHECK(upstream.allocations == 1);
    auto st = pool.statistics();
    CHECK(st.reused == 1);
    CHECK(st.blocks_in_use == 1);
    CHECK(st.bytes_in_use == 1024);
    CHECK(st.blocks_cached == 0);
    void* other_class = *pool.allocate(a, 5000, 8);
    CHECK(other_class != first);
    pool.deallocate(a, second, 900, 8);
    pool.deallocate(a, other_class, 5000, 8);
    st = pool.statistics();
    CHECK(st.blocks_in_use == 0);
    CHECK(st.bytes_in_use == 0);
    CHECK(st.blocks_cached == 2);
    CHECK(st.peak_bytes_reserved == 1024 + 5120);
    pool.release();
    CHECK(pool.statistics().blocks_cached == 0);
    CHECK(upstream.live.empty());
  }
  CHECK(upstream.live.empty());
}

TEST_CASE_METHOD(pool_fixture, "a block freed on one stream goes to another only once the free's mark is done",
                 "[pool]") {
  const stream_ref a = world.stream(0x1000, 11), b = world.stream(0x2000, 12);
  world.busy.insert(11);
  void* on_a = *pool.allocate(a, 4096, 256);
  pool.deallocate(a, on_a, 4096, 256);
  CHECK(world.marks == 0);  // nobody has asked for a's blocks: a records nothing

  void* on_b = *pool.allocate(b, 4096, 256);  // a's block has no mark: a fresh block, and a is asked for one
  CHECK(on_b != on_a);
  CHECK(upstream.allocations == 2);
  CHECK(world.marks == 0);
  pool.deallocate(b, on_b, 4096, 256);

  void* small = *pool.allocate(a, 100, 8);  // a's next call records the mark; a is still busy
  CHECK(world.marks == 1);
  const stream_ref c = world.stream(0x3000, 13);
  void* still_busy = *pool.allocate(c, 4096, 256);  // a's mark is not done: not a's block
  CHECK(still_busy != on_a);
  pool.deallocate(c, still_busy, 4096, 256);

  world.finish(11);
  void* on_c = *pool.allocate(c, 4096, 256);  // c's own block first
  CHECK(on_c == still_busy);
  const stream_ref d = world.stream(0x4000, 14);
  void* on_d = *pool.allocate(d, 4096, 256);  // a is done: its block, the oldest finished, is taken
  CHECK(on_d == on_a);
  CHECK(pool.statistics().reused_across_streams == 1);
  pool.deallocate(a, small, 100, 8);
  pool.deallocate(c, on_c, 4096, 256);
  pool.deallocate(d, on_d, 4096, 256);
  pool.release();
  CHECK(upstream.live.empty());
  CHECK(pool.statistics().bytes_in_use == 0);
  CHECK(pool.statistics().bytes_reserved == 0);
}

TEST_CASE_METHOD(pool_fixture, "a destroyed stream's handle reused by a new stream inherits nothing unsafe", "[pool]") {
  const stream_ref old_stream = world.stream(0x1000, 21);
  world.busy.insert(21);
  void* p = *pool.allocate(old_stream, 100, 8);
  pool.deallocate(old_stream, p, 100, 8);
  // The stream is destroyed; a new one gets the same handle but a new id, while the old work still runs.
  const stream_ref new_stream = world.stream(0x1000, 22);
  void* q = *pool.allocate(new_stream, 100, 8);
  CHECK(q != p);
  pool.deallocate(new_stream, q, 100, 8);
  pool.release();  // no mark covers the old stream's block: waits for the device
  CHECK(world.device_waits == 1);
  CHECK(upstream.live.empty());
}

TEST_CASE_METHOD(pool_fixture, "a stream object's reference is known by the id it carries; a raw handle is asked",
                 "[pool]") {
  const stream_ref owner = world.object(0x6000, 61);
  world.busy.insert(61);
  void* p = *pool.allocate(owner, 512, 8);
  pool.deallocate(owner, p, 512, 8);
  CHECK(*pool.allocate(owner, 512, 8) == p);
  CHECK(world.id_queries == 0);  // the id came with the reference
  pool.deallocate(owner, p, 512, 8);
  CHECK(*pool.allocate(world.stream(0x6000, 61), 512, 8) == p);  // a raw handle is checked every time
  CHECK(world.id_queries == 1);
  pool.deallocate(owner, p, 512, 8);
  // The stream ends while its work still runs; a new stream object gets its handle. Nothing counts stream objects:
  // the new id alone tells the streams apart.
  const stream_ref successor = world.object(0x6000, 62);
  void* q = *pool.allocate(successor, 512, 8);
  CHECK(q != p);  // the old stream's block is not the new stream's
  pool.deallocate(successor, q, 512, 8);
  CHECK(*pool.allocate(successor, 512, 8) == q);
  pool.deallocate(successor, q, 512, 8);
  CHECK(world.id_queries == 1);
  pool.release();  // the old stream's block has no event: the device is waited for
  CHECK(world.device_waits == 1);
  CHECK(upstream.live.empty());
}

TEST_CASE_METHOD(pool_fixture, "trim gives back only finished blocks; release waits for the rest", "[pool]") {
  const stream_ref a = world.stream(0x1000, 31), b = world.stream(0x2000, 32);
  world.busy.insert(31);
  void* pa = *pool.allocate(a, 256, 8);
  void* pb = *pool.allocate(b, 256, 8);
  pool.deallocate(a, pa, 256, 8);
  pool.deallocate(b, pb, 256, 8);
  pool.trim();  // no mark covers either block yet: nothing goes, both streams are asked to record one
  CHECK(upstream.live.size() == 2);
  CHECK(world.marks == 0);
  void* qa = *pool.allocate(a, 1024, 8);  // each stream's next call records its mark
  void* qb = *pool.allocate(b, 1024, 8);
  CHECK(world.marks == 2);
  pool.trim();  // b's mark is done, a's is not
  CHECK(upstream.live.size() == 3);
  CHECK(upstream.live.count(pb) == 0);
  CHECK(pool.statistics().blocks_cached == 1);
  CHECK(world.waits == 0);
  pool.release();  // waits for a's mark
  CHECK(upstream.live.size() == 2);
  CHECK(world.waits == 1);
  CHECK(world.device_waits == 0);
  pool.deallocate(a, qa, 1024, 8);
  pool.deallocate(b, qb, 1024, 8);
  pool.release();
  CHECK(upstream.live.empty());
}

TEST_CASE_METHOD(pool_fixture, "release records nothing: blocks an event covers wait for it, others for the device",
                 "[pool]") {
  const stream_ref a = world.object(0x1000, 71), b = world.object(0x2000, 72);
  world.busy.insert(71);
  void* p = *pool.allocate(a, 256, 8);
  pool.deallocate(a, p, 256, 8);
  pool.release();  // no mark covered the block, and the pool names no stream on its own: the device
  CHECK(world.marks == 0);
  CHECK(world.device_waits == 1);
  CHECK(upstream.live.empty());

  world.busy.insert(71);
  void* q = *pool.allocate(a, 256, 8);
  pool.deallocate(a, q, 256, 8);
  void* r = *pool.allocate(b, 256, 8);  // misses a's busy block and asks a for a mark
  void* t = *pool.allocate(a, 1024, 8);  // a's call records it
  CHECK(world.marks == 1);
  pool.deallocate(b, r, 256, 8);
  pool.deallocate(a, t, 1024, 8);  // newer than the mark: the device after all
  world.capturing.insert(72);  // a stream capturing meanwhile is never touched: nothing is recorded on any stream
  pool.release();
  world.capturing.erase(72);
  CHECK(world.marks == 1);
  CHECK(world.device_waits == 2);
  CHECK(upstream.live.empty());
  CHECK(pool.statistics().bytes_reserved == 0);
}

namespace {
// A release handler that destroys stream and event objects and reads the pool, as a user's might while cleaning up.
pool_type* handler_pool = nullptr;
int refused_records = 0;
void destroying_handler(const error& e) noexcept {
  if (e.cuda_status() != cudaErrorInvalidResourceHandle) return;  // the destructions below report too
  ++refused_records;
  auto doomed = stream::adopt(reinterpret_cast<cudaStream_t>(std::uintptr_t{0xd000}), device_id(0));
  { stream gone = std::move(*doomed); }
  (void)handler_pool->statistics();  // takes every state's lock: none may be held
}
}  // namespace

TEST_CASE_METHOD(pool_fixture, "a refused record is reported once, with no lock held, and the blocks still go back",
                 "[pool]") {
  const stream_ref a = world.object(0x1000, 81), b = world.object(0x2000, 82);
  world.busy.insert(81);
  pool.deallocate(a, *pool.allocate(a, 256, 8), 256, 8);
  pool.deallocate(b, *pool.allocate(b, 256, 8), 256, 8);  // b's miss asks a for a mark
  world.refuse_marks = true;
  refused_records = 0;
  handler_pool = &pool;
  const release_handler previous = set_release_handler(&destroying_handler);
  void* p = *pool.allocate(a, 256, 8);  // a's own block; the mark it owes is refused and reported
  (void)set_release_handler(previous);
  world.refuse_marks = false;
  CHECK(refused_records == 1);
  pool.deallocate(a, p, 256, 8);
  pool.release();
  CHECK(world.device_waits == 1);  // no mark covers a's block
  CHECK(upstream.live.empty());
}

TEST_CASE("out of memory: the pool gives back its cache and retries once", "[pool]") {
  fake_world world;
  fake_upstream upstream;
  upstream.limit_bytes = 3 * 1024;
  pool_type pool(upstream, fake_order{&world});
  const stream_ref a = world.stream(0x1000, 41), b = world.stream(0x2000, 42);
  world.busy.insert(41);
  void* first = *pool.allocate(a, 2048, 8);
  pool.deallocate(a, first, 2048, 8);  // cached, a still busy
  auto second = pool.allocate(b, 3072, 8);  // 2048 cached + 3072 > limit: release, retry
  REQUIRE(second);
  CHECK(pool.statistics().out_of_memory_retries == 1);
  CHECK(world.device_waits == 1);  // no mark covered a's block
  auto too_big = pool.allocate(b, 4096, 8);  // cannot fit even after the retry
  REQUIRE_FALSE(too_big);
  CHECK(too_big.error().cuda_status() == cudaErrorMemoryAllocation);
  CHECK(pool.statistics().out_of_memory_retries == 2);
  pool.deallocate(b, *second, 3072, 8);
  pool.release();
  CHECK(upstream.live.empty());
  CHECK(pool.statistics().blocks_in_use == 0);
}

TEST_CASE_METHOD(pool_fixture, "a caching pool refuses bad input cleanly", "[pool]") {
  const bool from_object = GENERATE(false, true);  // a raw reference, or a stream object's the pool has confirmed
  const stream_ref a = from_object ? world.object(0x1000, 51) : world.stream(0x1000, 51);
  pool.deallocate(a, *pool.allocate(a, 64, 8), 64, 8);  // confirms it
  CHECK(pool.statistics().upstream_allocations == 1);
  auto zero = pool.allocate(a, 0, 8);
  REQUIRE(zero);
  CHECK(*zero == nullptr);
  pool.deallocate(a, nullptr, 0, 8);
  auto odd = pool.allocate(a, 64, 3);
  REQUIRE_FALSE(odd);
  CHECK(odd.error().code() == errc::invalid_argument);
  auto wide = pool.allocate(a, 64, 512);
  REQUIRE_FALSE(wide);
  CHECK(wide.error().code() == errc::not_supported);
  auto huge = pool.allocate(a, ~std::size_t{0}, 8);
  REQUIRE_FALSE(huge);
  CHECK(huge.error().code() == errc::size_overflow);
  world.capturing.insert(51);
  auto captured = pool.allocate(a, 64, 8);
  REQUIRE_FALSE(captured);
  CHECK(captured.error().code() == errc::capture_active);
  CHECK(upstream.allocations == 1);
  CHECK(pool.statistics().blocks_in_use == 0);
}

TEST_CASE_METHOD(pool_fixture, "the caching pool is thread-safe: no block is ever held twice", "[pool][concurrent]") {
  const bool from_objects = GENERATE(false, true);  // raw references, or stream objects' (the inline path)
  std::vector<stream_ref> streams;
  for (std::uintptr_t i = 0; i < 8; ++i)
    streams.push_back(from_objects ? world.object(0x1000 * (i + 1), 100 + i) : world.stream(0x1000 * (i + 1), 100 + i));
  std::mutex held_mutex;
  std::set<void*> held;  // blocks handed out and not yet freed, across all threads
  std::atomic<int> failures{0}, twice{0};
  std::atomic<bool> done{false};
  // world's maps are only read from here on, except under its mutex.
  std::thread releaser([&] {  // trims and releases while the others allocate and free
    for (int i = 0; !done.load(); ++i) (i % 2 == 0) ? pool.trim() : pool.release();
  });
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        const std::size_t bytes = 256u << (i % 6);
        // Allocate on this thread's stream, free on it or on the next thread's: blocks cross streams.
        const stream_ref on = streams[t], off = streams[i % 3 == 0 ? (t + 1) % 8 : t];
        auto p = pool.allocate(on, bytes, 8);
        if (!p) {
          ++failures;
          continue;
        }
        {
          const std::lock_guard<std::mutex> lock(held_mutex);
          if (!held.insert(*p).second) ++twice;
        }
        static_cast<unsigned char*>(*p)[0] = static_cast<unsigned char>(t);
        {
          const std::lock_guard<std::mutex> lock(held_mutex);
          held.erase(*p);
        }
        pool.deallocate(off, *p, bytes, 8);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  done = true;
  releaser.join();
  CHECK(failures == 0);
  CHECK(twice == 0);
  CHECK(pool.statistics().blocks_in_use == 0);
  pool.release();
  CHECK(upstream.live.empty());
  CHECK(pool.statistics().bytes_reserved == 0);
}

TEST_CASE_METHOD(pool_fixture, "a new stream whose first call is a free starts with nothing of the old stream's",
                 "[pool]") {
  const stream_ref old_stream = world.stream(0x1000, 71), c = world.stream(0x2000, 73);
  world.busy.insert(71);
  void* p = *pool.allocate(old_stream, 1000, 8);
  pool.deallocate(old_stream, p, 1000, 8);  // no event covers it
  void* q = *pool.allocate(c, 1000, 8);     // misses the old stream's block and asks it for an event
  CHECK(q != p);
  const stream_ref new_stream = world.stream(0x1000, 72);  // the old stream is gone; its handle came back
  pool.deallocate(new_stream, q, 1000, 8);  // the new stream's first call: a free
  CHECK(world.marks == 0);  // the old stream's event was not recorded on the new stream
  void* r = *pool.allocate(c, 1000, 8);
  CHECK(r != p);  // the old stream's block is not handed out
  CHECK(r != q);  // the new stream's block has no event yet
  pool.deallocate(c, r, 1000, 8);
  pool.release();  // the old stream's block: after a device wait
  CHECK(world.device_waits == 1);
  CHECK(upstream.live.empty());
}

TEST_CASE_METHOD(pool_fixture, "a retired stream's event and lists go once its blocks are given back", "[pool]") {
  const stream_ref a = world.stream(0x1000, 61), b = world.stream(0x2000, 62);
  pool.deallocate(a, *pool.allocate(a, 256, 8), 256, 8);
  pool.deallocate(b, *pool.allocate(b, 256, 8), 256, 8);  // b's miss asks a for an event
  pool.deallocate(a, *pool.allocate(a, 512, 8), 512, 8);  // a records it (marker created)
  CHECK(world.marks == 1);
  const stream_ref successor = world.stream(0x1000, 63);  // a is gone; its handle came back
  pool.deallocate(successor, *pool.allocate(successor, 256, 8), 256, 8);
  CHECK(world.destroyed == 0);
  pool.release();
  CHECK(world.destroyed == 1);  // the retired state's event, before the pool goes
  CHECK(upstream.live.empty());
}

TEST_CASE_METHOD(pool_fixture,
                 "more streams than slots: empty caches give their slot up; none finished, the rest go uncached",
                 "[pool]") {
  constexpr std::size_t n = pool_type::max_streams;
  std::vector<stream_ref> streams;
  for (std::uintptr_t i = 0; i < n + 2; ++i) {
    streams.push_back(world.stream(0x1000 * (i + 1), 1000 + i));
    world.busy.insert(1000 + i);  // no cache is known finished: none can be taken over
  }
  void* kept = *pool.allocate(streams[0], 256, 8);  // stream 0 has a slot but nothing cached
  for (std::size_t i = 1; i < n; ++i) pool.deallocate(streams[i], *pool.allocate(streams[i], 256, 8), 256, 8);
  // Stream n takes stream 0's slot; stream n + 1 finds every slot holding a cached block: served uncached.
  void* a = *pool.allocate(streams[n], 1024, 8);
  pool.deallocate(streams[n], *pool.allocate(streams[n], 256, 8), 256, 8);
  void* b = *pool.allocate(streams[n + 1], 256, 8);
  auto st = pool.statistics();
  CHECK(st.blocks_in_use == 3);
  pool.deallocate(streams[n + 1], b, 256, 8);  // straight back to the upstream
  CHECK(upstream.live.count(b) == 0);
  pool.deallocate(streams[n], a, 1024, 8);
  pool.deallocate(streams[0], kept, 256, 8);  // stream 0 comes back: it gets a state again
  st = pool.statistics();
  CHECK(st.blocks_in_use == 0);
  CHECK(st.blocks_reserved == upstream.live.size());
  pool.release();
  CHECK(upstream.live.empty());
  CHECK(pool.statistics().bytes_reserved == 0);
}

namespace {
int heard_failures = 0;
void count_failure(const error&) noexcept { ++heard_failures; }
}  // namespace

TEST_CASE_METHOD(pool_fixture, "a block freed on a moved-from stream stays in use, and the release handler hears why",
                 "[pool]") {
  const stream_ref a = world.stream(0x1000, 95);
  void* p = *pool.allocate(a, 256, 8);
  auto owner = stream::adopt(reinterpret_cast<cudaStream_t>(std::uintptr_t{0x9000}), device_id(0));
  stream moved = std::move(*owner);
  heard_failures = 0;
  const release_handler previous = set_release_handler(&count_failure);
  pool.deallocate(owner->ref(), p, 256, 8);  // no stream to order the free on, no device to wait for
  (void)set_release_handler(previous);
  CHECK(heard_failures == 1);
  CHECK(pool.statistics().blocks_in_use == 1);
  CHECK(upstream.live.count(p) == 1);  // not given back behind the stream's work
  (void)moved.release();
  pool.deallocate(a, p, 256, 8);
  pool.release();
  CHECK(upstream.live.empty());
}

TEST_CASE_METHOD(pool_fixture, "a block freed on a default stream goes straight back, and the counts agree", "[pool]") {
  world.ids[cudaStreamLegacy] = 5;
  const stream_ref a = world.stream(0x1000, 91);
  void* p = *pool.allocate(a, 4096, 8);
  pool.deallocate(stream_ref::legacy(), p, 4096, 8);
  CHECK(upstream.live.empty());
  const auto st = pool.statistics();
  CHECK(st.blocks_in_use == 0);
  CHECK(st.bytes_reserved == 0);
  CHECK(st.bytes_cached == 0);
}

TEST_CASE_METHOD(pool_fixture,
                 "a block freed on another device's stream goes back to the upstream, never to that device", "[pool]") {
  const bool from_objects = GENERATE(false, true);  // raw references, or stream objects' (the inline path)
  stream_ref on0 = world.stream(0x1000, 11), on1 = world.stream(0x2000, 12, 1);
  std::vector<stream> owners;
  if (from_objects) {
    owners.push_back(*stream::adopt(on0.get(), device_id(0)));
    owners.push_back(*stream::adopt(on1.get(), device_id(1)));
    on0 = owners[0].ref();
    on1 = owners[1].ref();
  }
  void* zero = *pool.allocate(on0, 1024, 8);
  void* one = *pool.allocate(on1, 1024, 8);
  REQUIRE(upstream.devices.at(zero) == 0);
  REQUIRE(upstream.devices.at(one) == 1);
  pool.deallocate(on1, one, 1024, 8);  // device 1's stream has a cache now (the inline path for a stream object)
  pool.deallocate(on1, zero, 1024, 8);  // device 0's block, last used on device 1's stream (buffer::set_stream)
  CHECK(upstream.live.count(zero) == 0);  // to the upstream, in the order of the stream it was last used on
  REQUIRE_FALSE(upstream.frees.empty());
  CHECK(upstream.frees.back() == std::pair(on1.get(), 0));  // with its own device current
  std::vector<void*> held;
  for (int i = 0; i < 3; ++i) {
    held.push_back(*pool.allocate(on1, 1024, 8));
    CHECK(upstream.devices.at(held.back()) == 1);  // device 1's stream gets device 1's memory only
  }
  const auto st = pool.statistics();
  CHECK(st.blocks_in_use == 3);
  CHECK(st.blocks_reserved == upstream.live.size());
  for (void* p : held) pool.deallocate(on1, p, 1024, 8);
  pool.release();
  CHECK(upstream.live.empty());
  CHECK(pool.statistics().bytes_reserved == 0);
  for (stream& owner : owners) (void)owner.release();
}

TEST_CASE_METHOD(pool_fixture, "a pool serving one device asks nobody where a freed block lives", "[pool]") {
  const stream_ref a = world.stream(0x1000, 13), b = world.stream(0x2000, 14);
  for (int i = 0; i < 4; ++i) pool.deallocate(i % 2 ? b : a, *pool.allocate(a, 4096, 8), 4096, 8);
  CHECK(world.pointer_queries == 0);
  pool.release();
}

TEST_CASE_METHOD(pool_fixture, "trim, release and the out-of-memory retry never free on the per-thread default stream",
                 "[pool]") {
  world.ids[cudaStreamPerThread] = 7;
  world.capturing.insert(7);  // the calling thread is capturing its default stream
  const stream_ref a = world.stream(0x1000, 31), b = world.stream(0x2000, 32);
  void* p = *pool.allocate(a, 4096, 8);
  void* q = *pool.allocate(a, 256, 8);
  pool.deallocate(a, p, 4096, 8);
  pool.deallocate(a, q, 256, 8);

  world.no_own_stream = true;  // nowhere to free them that is safe: they stay cached and counted
  pool.release();
  CHECK(upstream.live.size() == 2);
  auto st = pool.statistics();
  CHECK(st.bytes_reserved == 4096 + 256);
  CHECK(st.blocks_cached == 2);
  CHECK(st.blocks_in_use == 0);

  world.no_own_stream = false;
  pool.trim();  // known finished since the release: they go now
  CHECK(upstream.live.empty());
  st = pool.statistics();
  CHECK(st.bytes_reserved == 0);
  CHECK(st.blocks_cached == 0);

  upstream.limit_bytes = 8192;
  void* big = *pool.allocate(b, 8192, 8);
  pool.deallocate(b, big, 8192, 8);
  void* other = *pool.allocate(a, 6000, 8);  // out of memory: the retry gives `big` back
  CHECK(pool.statistics().out_of_memory_retries == 1);
  pool.deallocate(a, other, 6000, 8);
  pool.release();
  CHECK(upstream.live.empty());
  for (const auto& [on, device] : upstream.frees) {
    CHECK(on != cudaStreamPerThread);
    CHECK(on == fake_world::own_stream(0));  // all of them were given back, none freed by a user's call
    CHECK(device == 0);
  }
}

TEST_CASE_METHOD(pool_fixture,
                 "more streams in turn than slots: finished caches give their slots up and their blocks "
                 "serve the later streams",
                 "[pool]") {
  constexpr std::size_t n = pool_type::max_streams, eager = pool_type::eager_slots_from;
  std::vector<stream_ref> streams;
  const auto bytes_of = [](std::size_t k) { return detail::size_class_bytes(k); };  // a size class per stream
  for (std::uintptr_t k = 0; k < n; ++k) {  // every slot caches a block none of the others wants
    streams.push_back(world.stream(0x1000 * (k + 1), 3000 + k));
    pool.deallocate(streams.back(), *pool.allocate(streams.back(), bytes_of(k), 8), bytes_of(k), 8);
  }
  const std::size_t fresh = upstream.allocations, held = pool.statistics().bytes_reserved;
  CHECK(fresh == n);
  const int destroyed = world.destroyed;
  for (std::uintptr_t k = n; k < 4 * n; ++k) {  // the later streams ask for the classes the eager slots cache
    streams.push_back(world.stream(0x1000 * (k + 1), 3000 + k));
    const std::size_t bytes = bytes_of(eager + (k - n) % (n - eager)), reused = pool.statistics().reused;
    void* p = *pool.allocate(streams.back(), bytes, 8);
    CHECK(pool.statistics().reused == reused + 1);  // served from the cache, not the upstream
    pool.deallocate(streams.back(), p, bytes, 8);
  }
  CHECK(upstream.allocations == fresh);
  CHECK(pool.statistics().bytes_reserved == held);  // bounded: nothing new was taken
  CHECK(world.destroyed - destroyed == int(3 * n));  // each state taken over lost its event at once
  pool.release();
  CHECK(upstream.live.empty());
  CHECK(pool.statistics().bytes_reserved == 0);
}

TEST_CASE_METHOD(pool_fixture, "a block freed on a capturing stream stays out of the capture and of every cache",
                 "[pool]") {
  const stream_ref a = world.stream(0x1000, 41), b = world.stream(0x2000, 42);
  {
    pool_type local(upstream, fake_order{&world});
    void* p = *local.allocate(a, 1024, 8);
    world.capturing.insert(41);
    heard_failures = 0;
    const release_handler previous = set_release_handler(&count_failure);
    local.deallocate(a, p, 1024, 8);  // the capture's work uses the block whenever the graph is launched
    (void)set_release_handler(previous);
    world.capturing.erase(41);
    CHECK(heard_failures == 0);
    CHECK(upstream.frees.empty());  // nothing entered the capture
    CHECK(upstream.live.count(p) == 1);
    void* q = *local.allocate(a, 1024, 8);
    void* r = *local.allocate(b, 1024, 8);
    CHECK(q != p);
    CHECK(r != p);
    local.deallocate(a, q, 1024, 8);
    local.deallocate(b, r, 1024, 8);
    local.release();
    CHECK(upstream.live.size() == 1);  // the graph's block stays until the pool goes
    CHECK(local.statistics().blocks_in_use == 1);
    CHECK(local.statistics().bytes_reserved == 1024);
  }
  CHECK(upstream.live.empty());  // given back at the pool's destruction, after a wait for its device
  CHECK(world.device_waits >= 1);
}

TEST_CASE("limit and statistics adaptors", "[pool]") {
  fake_upstream upstream;
  statistics_adaptor<fake_upstream> counted(upstream);
  limit_adaptor<statistics_adaptor<fake_upstream>> limited(counted, 1000);
  const stream_ref s = stream_ref::legacy();
  void* a = *limited.allocate(s, 600, 8);
  auto over = limited.allocate(s, 401, 8);
  REQUIRE_FALSE(over);
  CHECK(over.error().code() == errc::out_of_memory);
  CHECK(std::string(over.error().message()).find("budget of 1000 bytes") != std::string::npos);
  CHECK(upstream.allocations == 1);
  void* b = *limited.allocate(s, 400, 8);  // exactly the budget
  CHECK(limited.used() == 1000);
  CHECK(counted.statistics().bytes_outstanding == 1000);
  CHECK(counted.statistics().blocks_outstanding == 2);
  CHECK(*limited.allocate(s, 0, 8) == nullptr);
  limited.deallocate(s, nullptr, 0, 8);
  limited.deallocate(s, a, 600, 8);
  CHECK(counted.statistics().bytes_outstanding == 400);
  CHECK(counted.statistics().peak_bytes == 1000);
  limited.deallocate(s, b, 400, 8);
  CHECK(limited.used() == 0);
  CHECK(counted.statistics().bytes_outstanding == 0);
  CHECK(counted.statistics().blocks_outstanding == 0);
  // An upstream failure gives the budget back.
  upstream.limit_bytes = 100;
  auto failed = limited.allocate(s, 200, 8);
  REQUIRE_FALSE(failed);
  CHECK(limited.used() == 0);
  CHECK(upstream.live.empty());
}

namespace {
struct tagged_resource {
  using kind = device;
  int tag = 0;
  result<void*> allocate(stream_ref, std::size_t, std::size_t) noexcept { return nullptr; }
  void deallocate(stream_ref, void*, std::size_t, std::size_t) noexcept {}
};
}  // namespace

// stream_id_of as CUDA would answer for a stream known only by handle: capturing, or naming `id`.
struct fake_id_of {
  detail::stream_id_source source;
  std::uint64_t id = 0;
  int* asked;
  detail::stream_id_source operator()(stream_ref, std::uint64_t& out) const noexcept {
    ++*asked;
    out = id;
    return source;
  }
};

TEST_CASE("a registration left on a destroyed stream never answers for a new stream at its handle",
          "[pool][registry]") {
  detail::allocator_table table;
  tagged_resource old_resource{1}, fallback{0};
  const auto handle = reinterpret_cast<cudaStream_t>(std::uintptr_t{0x700});
  auto left = table.insert(7, 0x700, old_resource);  // stream 7 is destroyed with its registration kept
  REQUIRE(left);
  int asked = 0;
  const auto lookup = [&](stream_ref s, fake_id_of id_of) { return detail::registered_for(table, s, fallback, id_of); };
  using source = detail::stream_id_source;
  // Stream 8 gets the handle and starts capturing. Its stream object's reference carries id 8: no match, no query.
  const stream_ref object = detail::stream_identity::make(handle, device_id(0), 8);
  CHECK(lookup(object, {source::capturing, 0, &asked}) == resource_ref<device>(fallback));
  CHECK(asked == 0);
  // A reference from the raw handle cannot learn the capturing stream's id: the default, never stream 7's.
  const stream_ref raw = stream_ref::from_native_handle(handle, device_id(0));
  CHECK(lookup(raw, {source::capturing, 0, &asked}) == resource_ref<device>(fallback));
  CHECK(lookup(raw, {source::failed, 0, &asked}) == resource_ref<device>(fallback));
  CHECK(asked == 2);
  // Once the capture is over CUDA names id 8: still not stream 7's registration.
  CHECK(lookup(raw, {source::asked, 8, &asked}) == resource_ref<device>(fallback));
  // Stream 7's own references still find it: by its id, or by handle while CUDA names 7 there.
  CHECK(lookup(detail::stream_identity::make(handle, device_id(0), 7), {source::capturing, 0, &asked}) ==
        resource_ref<device>(old_resource));
  CHECK(lookup(raw, {source::asked, 7, &asked}) == resource_ref<device>(old_resource));
  table.erase(*left, 7);
}

TEST_CASE("the allocator table: register, find, refuse twice, erase, reuse a slot", "[pool][registry]") {
  detail::allocator_table table;  // a table of the test's own, with made-up stream ids and handles
  tagged_resource one{1}, two{2};
  CHECK(table.empty());
  auto slot = table.insert(7, 0x700, one);
  REQUIRE(slot);
  CHECK_FALSE(table.empty());
  detail::allocator_table::entry found{two, 0};
  CHECK(table.find_handle(0x700, found));
  CHECK(found.resource == resource_ref<device>(one));
  CHECK(found.stream_id == 7);
  CHECK_FALSE(table.find_handle(0x800, found));
  auto twice = table.insert(7, 0x700, two);
  REQUIRE_FALSE(twice);
  CHECK(twice.error().code() == errc::invalid_argument);
  table.erase(*slot, 7);
  CHECK(table.empty());
  CHECK_FALSE(table.find_handle(0x700, found));
  auto again = table.insert(9, 0x900, two);
  REQUIRE(again);
  CHECK(*again == *slot);  // the freed slot is reused
  table.erase(*slot, 7);  // a stale erase (another id now) leaves it alone
  CHECK(table.find_handle(0x900, found));
  CHECK(found.resource == resource_ref<device>(two));
  table.erase(*again, 9);
}

TEST_CASE("the allocator table: a new stream at a destroyed stream's handle takes the handle over",
          "[pool][registry]") {
  detail::allocator_table table;
  tagged_resource old_resource{1}, new_resource{2};
  auto old_slot = table.insert(7, 0x700, old_resource);  // its stream is destroyed, the registration kept
  REQUIRE(old_slot);
  detail::allocator_table::entry found{old_resource, 0};
  REQUIRE(table.find_handle(0x700, found));
  CHECK(found.stream_id == 7);  // allocator_for compares this with the stream's id: a new stream would not match
  auto new_slot = table.insert(8, 0x700, new_resource);  // a new stream (id 8) at the same handle
  REQUIRE(new_slot);
  REQUIRE(table.find_handle(0x700, found));
  CHECK(found.stream_id == 8);
  CHECK(found.resource == resource_ref<device>(new_resource));
  table.erase(*new_slot, 8);
  CHECK_FALSE(table.find_handle(0x700, found));  // the old registration no longer answers for the handle
  table.erase(*old_slot, 7);
  CHECK(table.empty());
}

TEST_CASE("the allocator table is full at its capacity", "[pool][registry]") {
  auto table = std::make_unique<detail::allocator_table>();
  tagged_resource r;
  for (std::uint64_t id = 0; id < detail::allocator_table::capacity; ++id)
    REQUIRE(table->insert(id + 1, 0x1000 + id, r));
  auto full = table->insert(100000, 0x100000, r);
  REQUIRE_FALSE(full);
  CHECK(full.error().code() == errc::not_supported);
}

TEST_CASE("the allocator table: lookups race with registrations and never see a torn entry",
          "[pool][registry][concurrent]") {
  detail::allocator_table table;
  tagged_resource a{1}, b{2};
  std::atomic<bool> stop{false};
  std::atomic<int> torn{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 4; ++t) {
    readers.emplace_back([&] {
      while (!stop.load()) {
        detail::allocator_table::entry found{a, 0};
        for (std::uint64_t id = 1; id <= 4; ++id) {
          if (!table.find_handle(0x100 * id, found)) continue;
          if (!(found.resource == resource_ref<device>(a) || found.resource == resource_ref<device>(b))) ++torn;
          // Each id is only ever registered at its own handle, with one resource: odd ids `a`, even ids `b`.
          if (found.stream_id != id || (id % 2 == 1) != (found.resource == resource_ref<device>(a))) ++torn;
        }
      }
    });
  }
  for (int round = 0; round < 20000; ++round) {
    const std::uint64_t id = 1 + static_cast<std::uint64_t>(round % 4);
    auto slot = table.insert(id, 0x100 * id, id % 2 == 1 ? resource_ref<device>(a) : resource_ref<device>(b));
    REQUIRE(slot);
    table.erase(*slot, id);
  }
  stop = true;
  for (auto& r : readers) r.join();
  CHECK(torn == 0);
  CHECK(table.empty());
}

TEST_CASE("register_allocator refuses the default streams and a moved-from stream without a GPU", "[pool][registry]") {
  tagged_resource r;
  auto legacy = register_allocator(stream_ref::legacy(), r);
  REQUIRE_FALSE(legacy);
  CHECK(legacy.error().code() == errc::invalid_argument);
  CHECK(std::string(legacy.error().message()).find("default stream") != std::string::npos);
  auto per_thread = register_allocator(stream_ref::per_thread(), r);
  REQUIRE_FALSE(per_thread);
  CHECK(per_thread.error().code() == errc::invalid_argument);
  auto moved = register_allocator(stream_ref::from_native_handle(detail::invalid_stream()), r);
  REQUIRE_FALSE(moved);
  CHECK(std::string(moved.error().message()).find("moved from") != std::string::npos);
  // Nothing registered: the lookup is the stream-ordered pool, without a CUDA call.
  CHECK(allocator_for(stream_ref::legacy()) == default_resource<device>(true));
}

namespace {
struct hook_log {
  std::vector<errc> codes;
  std::vector<out_of_memory_info> figures;
  std::size_t live_when_called = 0;  // the upstream's blocks when the hook ran: the cache already given back
  fake_upstream* upstream = nullptr;
  std::size_t free_limit_to = 0;  // the hook "frees a cache of its own": the upstream's limit becomes this
};
}  // namespace

TEST_CASE("out of memory: the hook runs between the release and the retry, sees its own code and the cache's figures",
          "[pool][oom]") {
  fake_world world;
  fake_upstream upstream;
  upstream.limit_bytes = 4096;
  pool_type pool(upstream, fake_order{&world});
  hook_log log;
  log.upstream = &upstream;
  log.free_limit_to = 4096;
  pool.set_out_of_memory_hook(
      [](const error& failure, void* context) noexcept {
        auto& l = *static_cast<hook_log*>(context);
        l.codes.push_back(failure.code());
        CHECK(failure.oom() != nullptr);  // no REQUIRE: it would throw through a noexcept function
        l.figures.push_back(failure.oom() != nullptr ? *failure.oom() : out_of_memory_info{});
        const std::lock_guard<std::mutex> lock(l.upstream->mutex);
        l.live_when_called = l.upstream->live.size();
        l.upstream->limit_bytes = l.free_limit_to;
      },
      &log);
  const stream_ref a = world.stream(0x1000, 51);
  void* small = *pool.allocate(a, 1024, 8);
  void* large = *pool.allocate(a, 1500, 8);  // class 1536
  pool.deallocate(a, small, 1024, 8);
  pool.deallocate(a, large, 1500, 8);  // 2560 bytes cached, the largest block 1536
  upstream.limit_bytes = 3072;         // now 2560 + 2048 does not fit; after the release 2048 does
  auto got = pool.allocate(a, 1800, 8);  // class 2048, not cached: the upstream refuses
  REQUIRE(got);
  REQUIRE(log.codes.size() == 1);
  CHECK(log.codes[0] == errc::out_of_memory_retry);
  CHECK(to_string(errc::out_of_memory_retry) == std::string("out_of_memory_retry"));
  CHECK(log.live_when_called == 0);  // the cache was given back before the hook ran
  CHECK(log.figures[0].has(out_of_memory_info::cache));
  CHECK(log.figures[0].cached_bytes == 2560);
  CHECK(log.figures[0].largest_cached_block == 1536);
  CHECK(log.figures[0].requested_bytes == 2048);  // the size class asked of the upstream
  pool.deallocate(a, *got, 1800, 8);

  // Nothing the hook frees helps: the final error is CUDA's, with the figures of the cache before its release.
  log.free_limit_to = 2048;
  upstream.limit_bytes = 2048;  // the cached block's: nothing more fits, and 4096 does not fit after the release
  auto refused = pool.allocate(a, 4096, 8);
  REQUIRE_FALSE(refused);
  CHECK(refused.error() == cudaErrorMemoryAllocation);
  REQUIRE(refused.error().oom() != nullptr);
  const out_of_memory_info& info = *refused.error().oom();
  CHECK(info.requested_bytes == 4096);
  CHECK(info.cached_bytes == 2048);  // the block `got` left in the cache
  CHECK(info.largest_cached_block == 2048);
  CHECK(log.codes.size() == 2);
  CHECK(std::string(refused.error().message()).find("caching_pool::allocate: ") == 0);
  CHECK(std::string(refused.error().message()).find("cache held 2.0 KiB (largest block 2.0 KiB)") != std::string::npos);
  CHECK(pool.statistics().out_of_memory_retries == 2);

  // The pool is usable afterwards, and a pool without a hook still retries.
  pool.set_out_of_memory_hook(nullptr);
  upstream.limit_bytes = ~std::size_t{0};
  auto after = pool.allocate(a, 4096, 8);
  REQUIRE(after);
  pool.deallocate(a, *after, 4096, 8);
  pool.release();
  CHECK(upstream.live.empty());
}
