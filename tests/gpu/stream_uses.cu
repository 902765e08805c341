// SPDX-License-Identifier: MIT
// Buffers used on more than one stream: the free waits for every recorded use before the memory can be handed out
// again (the three-stream case of allocate on A, use on B, free on A, allocate on C), checked by content; eight threads
// on eight streams sharing one caching pool; uses under graph capture, replayed; and the checking mode's reports.
// The stress test runs for CUDAMEM_STRESS_SECONDS (default 0.5) seconds.
#include "common.cuh"

#include <cudamem/copy_many.hpp>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

using namespace cudamem;
using test::take;

namespace {
constexpr unsigned long long long_ns = 300'000'000;  // 0.3 s of spinning on B: far longer than the rest of the test
constexpr std::size_t count = std::size_t{1} << 20;  // 4 MiB of int: one size class, so a reused block is found

std::atomic<int> handler_calls{0};
std::string last_report;
bool last_was_capture = false;
void counting_handler(const error& e) noexcept {
  last_report = e.message();
  last_was_capture = e == errc::capture_active;
  ++handler_calls;
}
struct handler_scope {
  release_handler previous = set_release_handler(&counting_handler);
  handler_scope() { handler_calls = 0; }
  ~handler_scope() { set_release_handler(previous); }
};

// After frees on A: lets a caching pool hand A's freed blocks of `elems` ints to C as soon as an event on A shows the
// frees done (which is at once if A does not wait for B). C's requests, kept so that C's own cache stays empty, ask A
// for an event; A's next call to the pool records it, after the frees.
template <class Resource>
std::vector<device_buffer<int>> ask_for_reuse(Resource& resource, stream_ref a, stream_ref c, std::size_t blocks,
                                              std::size_t elems) {
  std::vector<device_buffer<int>> kept;
  for (std::size_t i = 0; i < blocks; ++i) kept.push_back(take(device_buffer<int>::allocate(elems, c, resource)));
  (void)take(device_buffer<int>::allocate(1, a, resource));
  std::this_thread::sleep_for(std::chrono::milliseconds(2));  // an event on an idle stream is done by then
  return kept;
}

// Allocate on A, a long use on B that writes the buffer at its end (through `use`), free on A at once, allocate on C
// from the same resource and write it there: C's data must survive B's late write, so the block can only have been
// handed to C once B was done. `expect_race`: the control, whose use is not recorded: the block must be reused early.
template <class Resource, class Use>
void three_streams(Resource& resource, Use&& use, bool expect_race = false) {
  auto a = take(stream::create()), b = take(stream::create()), c = take(stream::create());
  const void* first = nullptr;
  {
    auto shared = take(device_buffer<int>::allocate(count, a, resource));
    first = shared.data().get();
    REQUIRE_OK(fill_bytes(shared, 0, a));
    REQUIRE_OK(a.synchronize());
    use(shared, stream_ref(b));
  }  // freed on A while B still spins
  const auto kept = ask_for_reuse(resource, a, c, 1, count);
  auto fresh = take(device_buffer<int>::allocate(count, c, resource));
  REQUIRE_OK(fill(fresh, 2, c));
  REQUIRE_OK(c.synchronize());
  REQUIRE_OK(b.synchronize());  // B's late write has landed wherever it went
  const auto seen = test::read_back(fresh.view());
  INFO("the new block is " << (fresh.data().get() == first ? "the freed one" : "another one"));
  if (expect_race) {
    CHECK(fresh.data().get() == first);
    CHECK(seen != std::vector<int>(count, 2));
  } else {
    CHECK(seen == std::vector<int>(count, 2));
  }
}
}  // namespace

TEST_CASE("allocate on A, use on B, free on A: C gets the block only after B is done", "[stream_uses][gpu]") {
  device_pool_resource upstream;
  caching_pool<device_pool_resource> pool(upstream);
  SECTION("a kernel given the view, and use_on") {
    three_streams(pool, [](device_buffer<int>& shared, stream_ref b) {
      test::delay_then_write<<<64, 256, 0, b.get()>>>(shared.view(), 1, long_ns);
      REQUIRE(cudaGetLastError() == cudaSuccess);
      REQUIRE_OK(shared.use_on(b));
    });
  }
  SECTION("a fill on B, recorded by the fill itself") {
    three_streams(pool, [](device_buffer<int>& shared, stream_ref b) {
      auto spin = take(device_buffer<int>::allocate(1, b));
      test::delay_then_write<<<1, 32, 0, b.get()>>>(spin.view(), 0, long_ns);
      REQUIRE(cudaGetLastError() == cudaSuccess);
      REQUIRE_OK(fill(shared, 1, b));
    });
  }
  SECTION("a copy on B into it, recorded by the copy") {
    three_streams(pool, [](device_buffer<int>& shared, stream_ref b) {
      auto ones = take(device_buffer<int>::allocate(count, b));
      REQUIRE_OK(fill(ones, 1, b));
      auto spin = take(device_buffer<int>::allocate(1, b));
      test::delay_then_write<<<1, 32, 0, b.get()>>>(spin.view(), 0, long_ns);
      REQUIRE(cudaGetLastError() == cudaSuccess);
      REQUIRE_OK(copy(shared, ones, b));
    });
  }
  SECTION("a batched copy on B, recorded by copy_many") {
    three_streams(pool, [](device_buffer<int>& shared, stream_ref b) {
      auto ones = take(device_buffer<int>::allocate(count, b));
      REQUIRE_OK(fill(ones, 1, b));
      auto spin = take(device_buffer<int>::allocate(1, b));
      test::delay_then_write<<<1, 32, 0, b.get()>>>(spin.view(), 0, long_ns);
      REQUIRE(cudaGetLastError() == cudaSuccess);
      std::vector<std::pair<span<int, device>, span<const int, device>>> halves = {
          {shared.view().first(count / 2).value(), ones.view().first(count / 2).value()},
          {shared.view().last(count / 2).value(), ones.view().last(count / 2).value()}};
      REQUIRE_OK(copy_many(halves, b));  // views: not recorded, so
      REQUIRE_OK(shared.use_on(b));  // the view's user says so
    });
  }
  CHECK(pool.statistics().blocks_in_use == 0);
}

// Not in the normal suite: shows that the test above can fail. The same program with the use not recorded (a view given
// to a kernel, no use_on) gets the block on C while B still writes it.
TEST_CASE("control: an unrecorded use on B lets C get the block early", "[.][stream_uses_control][gpu]") {
  device_pool_resource upstream;
  caching_pool<device_pool_resource> pool(upstream);
  three_streams(
      pool,
      [](device_buffer<int>& shared, stream_ref b) {
        test::delay_then_write<<<64, 256, 0, b.get()>>>(shared.view(), 1, long_ns);
        REQUIRE(cudaGetLastError() == cudaSuccess);
      },
      true);
}

TEST_CASE("the stream-ordered pool (cudaMallocAsync) also gets the block back only after B", "[stream_uses][gpu]") {
  device_pool_resource pool;
  three_streams(pool, [](device_buffer<int>& shared, stream_ref b) {
    test::delay_then_write<<<64, 256, 0, b.get()>>>(shared.view(), 1, long_ns);
    REQUIRE(cudaGetLastError() == cudaSuccess);
    REQUIRE_OK(shared.use_on(b));
  });
}

TEST_CASE("copy_many given owners records each one's use", "[stream_uses][gpu]") {
  device_pool_resource upstream;
  caching_pool<device_pool_resource> pool(upstream);
  auto a = take(stream::create()), b = take(stream::create()), c = take(stream::create());
  std::vector<device_buffer<int>> dsts, srcs;
  for (int i = 0; i < 3; ++i) {
    dsts.push_back(take(device_buffer<int>::allocate(count, a, pool)));
    srcs.push_back(take(device_buffer<int>::allocate(count, b)));
    REQUIRE_OK(fill(srcs.back(), 1, b));
  }
  REQUIRE_OK(a.synchronize());
  auto spin = take(device_buffer<int>::allocate(1, b));
  test::delay_then_write<<<1, 32, 0, b.get()>>>(spin.view(), 0, long_ns);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  REQUIRE_OK(copy_many(dsts, srcs, b));
  dsts.clear();  // freed on A while B spins
  const auto kept = ask_for_reuse(pool, a, c, 3, count);
  std::vector<device_buffer<int>> fresh;
  for (int i = 0; i < 3; ++i) {
    fresh.push_back(take(device_buffer<int>::allocate(count, c, pool)));
    REQUIRE_OK(fill(fresh.back(), 2, c));
  }
  REQUIRE_OK(c.synchronize());
  REQUIRE_OK(b.synchronize());
  for (auto& f : fresh) CHECK(test::read_back(f.view()) == std::vector<int>(count, 2));
}

TEST_CASE("a pitched buffer used on another stream by a fill is freed after it", "[stream_uses][gpu]") {
  device_pool_resource upstream;
  caching_pool<device_pool_resource> pool(upstream);
  auto a = take(stream::create()), b = take(stream::create()), c = take(stream::create());
  constexpr std::size_t width = 1000, height = 1000;
  {
    auto rows = take(device_pitched_buffer<int>::allocate(width, height, a, pool));
    REQUIRE_OK(a.synchronize());
    auto spin = take(device_buffer<int>::allocate(1, b));
    test::delay_then_write<<<1, 32, 0, b.get()>>>(spin.view(), 0, long_ns);
    REQUIRE(cudaGetLastError() == cudaSuccess);
    REQUIRE_OK(fill_bytes(rows, 0x11, b));
  }
  auto probe = take(device_pitched_buffer<int>::allocate(width, height, c, pool));  // asks A for an event,
  (void)take(device_buffer<int>::allocate(1, a, pool));  // which A's next call records (see ask_for_reuse)
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  auto fresh = take(device_pitched_buffer<int>::allocate(width, height, c, pool));
  REQUIRE_OK(fill_bytes(fresh, 0x22, c));
  REQUIRE_OK(c.synchronize());
  REQUIRE_OK(b.synchronize());
  auto flat = take(device_buffer<int>::allocate(width * height));
  REQUIRE_OK(copy(flat, fresh));
  CHECK(test::all_bytes(test::read_back(flat.view()), 0x22));
}

TEST_CASE("eight threads on eight streams share a caching pool: every use finishes before its block moves on",
          "[stream_uses][stress][gpu]") {
  constexpr int threads = 8;
  constexpr std::size_t elems = 64 * 1024;
  const char* env = std::getenv("CUDAMEM_STRESS_SECONDS");
  const double seconds = env != nullptr ? std::atof(env) : 0.5;
  device_pool_resource upstream;
  caching_pool<device_pool_resource> pool(upstream);
  std::vector<stream> streams;
  for (int i = 0; i < threads; ++i) streams.push_back(take(stream::create()));
  std::atomic<long> iterations{0}, checked{0}, wrong{0}, failures{0};
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      auto check = pinned_buffer<int>::allocate(elems);
      if (!check) {
        ++failures;
        return;
      }
      for (long i = 0; std::chrono::steady_clock::now() < until; ++i) {
        const stream_ref own = streams[std::size_t(t)], other = streams[std::size_t(t + 1 + i) % threads];
        const int key = t * 1'000'000 + int(i % 1'000'000);
        {
          auto block = device_buffer<int>::allocate(elems, own, pool);
          if (!block) {
            ++failures;
            return;
          }
          if (i % 2 == 0) {  // a kernel given the view, declared with use_on
            test::delay_then_write<<<16, 256, 0, other.get()>>>(block->view(), key, 20'000);
            if (cudaGetLastError() != cudaSuccess || !block->use_on(other)) ++failures;
          } else {  // a fill, which records its own use
            if (!fill(*block, key, other)) ++failures;
          }
          if (!copy(*check, *block, other)) ++failures;  // read back on the other stream, recorded too
        }  // freed on its own stream at once; other threads' allocations may get the block next
        if (!other.synchronize()) ++failures;
        bool same = true;
        for (std::size_t k = 0; k < elems; k += 97) same = same && (*check)[k] == key;
        same = same && (*check)[elems - 1] == key;
        ++checked;
        if (!same) ++wrong;
        ++iterations;
      }
    });
  for (auto& w : workers) w.join();
  for (auto& s : streams) REQUIRE_OK(s.synchronize());
  INFO(iterations.load() << " iterations in " << seconds << " s");
  CHECK(failures == 0);
  CHECK(wrong == 0);
  CHECK(checked == iterations);
  CHECK(iterations >= threads);
  const caching_statistics stats = pool.statistics();
  CHECK(stats.blocks_in_use == 0);
  CHECK(stats.bytes_in_use == 0);
  CHECK(stats.blocks_reserved == stats.blocks_cached);
}

TEST_CASE("a use on a stream of the buffer's own capture becomes a graph edge before its free; replays",
          "[stream_uses][capture][gpu]") {
  auto a = take(stream::create()), b = take(stream::create());
  auto out = take(device_buffer<int>::allocate(count));
  auto fork = take(event::create()), join = take(event::create());
  REQUIRE(cudaStreamBeginCapture(a.get(), cudaStreamCaptureModeGlobal) == cudaSuccess);
  REQUIRE_OK(fork.ref().record(a));
  REQUIRE_OK(stream_ref(b).wait(fork.ref()));
  {
    auto scratch = take(device_buffer<int>::allocate(count, a));  // a graph allocation
    REQUIRE_OK(fill(scratch, 5, b));  // recorded: B is in A's capture
    REQUIRE_OK(copy(out, scratch, b));  // `out` lives outside the capture: its use is the graph's, not tracked
  }  // the free node, after B's copy
  REQUIRE_OK(join.ref().record(b));
  REQUIRE_OK(stream_ref(a).wait(join.ref()));
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(a.get(), &graph) == cudaSuccess);  // the capture is intact
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  for (int replay = 0; replay < 3; ++replay) {
    REQUIRE_OK(fill_bytes(out, 0, a));
    REQUIRE(cudaGraphLaunch(exec, a.get()) == cudaSuccess);
    REQUIRE_OK(a.synchronize());
    CHECK(test::read_back(out.view()) == std::vector<int>(count, 5));
  }
  CHECK(cudaGraphExecDestroy(exec) == cudaSuccess);
  CHECK(cudaGraphDestroy(graph) == cudaSuccess);
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("use_on a stream capturing a graph the buffer's stream is not part of is refused; the capture stays",
          "[stream_uses][capture][gpu]") {
  auto a = take(stream::create()), b = take(stream::create());
  auto held = take(device_buffer<int>::allocate(count, a));
  REQUIRE_OK(a.synchronize());
  REQUIRE(cudaStreamBeginCapture(b.get(), cudaStreamCaptureModeGlobal) == cudaSuccess);
  auto refused = held.use_on(b);
  REQUIRE_FALSE(refused);
  CHECK(refused.error() == errc::capture_active);
  REQUIRE_OK(fill(held, 3, b));  // the user's own operation goes ahead, into the graph
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(b.get(), &graph) == cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  REQUIRE(cudaGraphLaunch(exec, b.get()) == cudaSuccess);
  REQUIRE_OK(b.synchronize());  // the graph's launches are done before the buffer goes
  CHECK(test::read_back(held.view()) == std::vector<int>(count, 3));
  CHECK(cudaGraphExecDestroy(exec) == cudaSuccess);
  CHECK(cudaGraphDestroy(graph) == cudaSuccess);
}

TEST_CASE("a buffer used on B and freed during a capture on its stream is kept, and the capture stays intact",
          "[stream_uses][capture][gpu]") {
  auto a = take(stream::create()), b = take(stream::create());
  handler_scope handler;
  void* kept = nullptr;
  {
    auto used = take(device_buffer<int>::allocate(count, a));
    kept = used.data().get();
    REQUIRE_OK(fill(used, 1, b));  // recorded outside any capture
    REQUIRE(cudaStreamBeginCapture(a.get(), cudaStreamCaptureModeGlobal) == cudaSuccess);
  }  // its free cannot wait for B inside the capture: kept
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(a.get(), &graph) == cudaSuccess);
  CHECK(handler_calls == 1);
  CHECK(last_was_capture);
  CHECK(last_report.find("kept") != std::string::npos);
  CHECK(cudaGraphDestroy(graph) == cudaSuccess);
  REQUIRE_OK(b.synchronize());
  CHECK(cudaFreeAsync(kept, a.get()) == cudaSuccess);  // the test gives it back itself
  REQUIRE_OK(a.synchronize());
}

TEST_CASE("checking mode reports a use on another stream that the program did not order before the free",
          "[stream_uses][checking][gpu]") {
  const bool was = set_stream_use_checking(true);
  handler_scope handler;
  auto a = take(stream::create()), b = take(stream::create());
  SECTION("unordered: reported, naming the three streams") {
    {
      auto shared = take(device_buffer<int>::allocate(count, a));
      REQUIRE_OK(a.synchronize());
      test::delay_then_write<<<64, 256, 0, b.get()>>>(shared.view(), 1, long_ns);
      REQUIRE(cudaGetLastError() == cudaSuccess);
      REQUIRE_OK(shared.use_on(b));
    }
    CHECK(check_stream_uses() == 1);
    CHECK(handler_calls == 1);
    char names[64];
    std::snprintf(names, sizeof names, "%p", static_cast<void*>(b.get()));
    CHECK(last_report.find(names) != std::string::npos);
    CHECK(last_report.find("buffer::use_on") != std::string::npos);
  }
  SECTION("ordered by the program (an event): quiet") {
    auto done = take(event::create());
    {
      auto shared = take(device_buffer<int>::allocate(count, a));
      REQUIRE_OK(a.synchronize());
      test::delay_then_write<<<64, 256, 0, b.get()>>>(shared.view(), 1, long_ns / 10);
      REQUIRE(cudaGetLastError() == cudaSuccess);
      REQUIRE_OK(fill(shared, 2, b));
      REQUIRE_OK(done.ref().record(b));
      REQUIRE_OK(stream_ref(a).wait(done.ref()));
    }
    CHECK(check_stream_uses() == 0);
    CHECK(handler_calls == 0);
  }
  REQUIRE_OK(b.synchronize());
  set_stream_use_checking(was);
}
