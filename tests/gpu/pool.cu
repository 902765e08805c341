// SPDX-License-Identifier: MIT
// Pools, adaptors and per-stream registration on a device: every resource, registration lifetimes, reuse across
// streams only after the first stream is done (checked by content), out-of-memory recovery, Thrust on cudamem
// memory, graph capture through a registered allocator, and many threads registering and allocating at once.
#include "common.cuh"

#include <cudamem/interop/thrust.hpp>

#include <thrust/reduce.h>
#include <thrust/sort.h>

#include <algorithm>
#include <atomic>
#include <numeric>
#include <string>
#include <thread>

using namespace cudamem;
using test::take;

namespace {
constexpr unsigned long long slow_ns = 200'000'000;  // 0.2 s of spinning: far longer than any launch latency

template <class Resource>
void round_trip(Resource& resource, stream_ref s, std::size_t count) {
  auto values = take(device_buffer<int>::allocate(count, s, resource));
  REQUIRE(values.resource() == resource_ref<device>(resource));
  REQUIRE_OK(fill(values, 7, s));
  REQUIRE_OK(s.synchronize());
  CHECK(test::read_back(values.view()) == std::vector<int>(count, 7));
}
}  // namespace

TEST_CASE("every pool and adaptor serves device buffers and ends with nothing outstanding", "[pool]") {
  auto s = take(stream::create());
  const device_id here = take(current_device());
  REQUIRE_OK(set_pool_release_threshold(here));
  device_pool_resource stream_ordered;
  device_malloc_resource plain;
  {
    caching_pool<device_pool_resource> pooled(stream_ordered);
    caching_pool<device_malloc_resource> over_malloc(plain);
    statistics_adaptor<caching_pool<device_pool_resource>> counted(pooled);
    limit_adaptor<statistics_adaptor<caching_pool<device_pool_resource>>> limited(counted, std::size_t{64} << 20);
    round_trip(stream_ordered, s, 1000);
    round_trip(pooled, s, 1000);
    round_trip(over_malloc, s, 1000);
    round_trip(counted, s, 1000);
    round_trip(limited, s, 1000);
    CHECK(counted.statistics().bytes_outstanding == 0);
    CHECK(counted.statistics().peak_bytes == 4000);
    CHECK(limited.used() == 0);
    CHECK(pooled.statistics().blocks_in_use == 0);
    CHECK(pooled.statistics().reused >= 1);  // the adaptors' allocations reuse the first block
    CHECK(over_malloc.statistics().blocks_in_use == 0);
  }
  pinned_resource pinned_upstream;
  caching_pool<pinned_resource> pinned_pool(pinned_upstream);
  {
    auto host_side = take(pinned_buffer<int>::allocate(100, s, pinned_pool));
    host_side[0] = 3;
    CHECK(host_side[0] == 3);
  }
  CHECK(pinned_pool.statistics().blocks_in_use == 0);
  REQUIRE_OK(set_pool_release_threshold(here, 0));  // the driver's default again, for the tests that follow
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("bad input to the resources: zero bytes, alignment, overflow, larger than the device, the budget", "[pool]") {
  auto s = take(stream::create());
  device_pool_resource upstream;
  caching_pool<device_pool_resource> pool(upstream);
  limit_adaptor<caching_pool<device_pool_resource>> limited(pool, 1 << 20);

  auto zero = pool.allocate(s, 0, 256);
  REQUIRE_OK(zero);
  CHECK(*zero == nullptr);
  pool.deallocate(s, nullptr, 0, 256);
  CHECK(take(device_buffer<int>::allocate(0, s, pool)).empty());

  auto odd = pool.allocate(s, 64, 48);
  REQUIRE_FALSE(odd);
  CHECK(odd.error().code() == errc::invalid_argument);
  auto overflow = device_buffer<double>::allocate(~std::size_t{0} / 4, s, pool);
  REQUIRE_FALSE(overflow);
  CHECK(overflow.error().code() == errc::size_overflow);

  std::size_t free_bytes = 0, total_bytes = 0;
  REQUIRE(cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess);
  auto too_big = pool.allocate(s, total_bytes * 2, 256);
  REQUIRE_FALSE(too_big);
  CHECK(too_big.error().cuda_status() == cudaErrorMemoryAllocation);
  CHECK(pool.statistics().blocks_in_use == 0);
  CHECK(pool.statistics().out_of_memory_retries == 1);

  auto within = take(device_buffer<std::byte>::allocate(std::size_t{1} << 19, s, limited));
  auto over = device_buffer<std::byte>::allocate((std::size_t{1} << 19) + 1, s, limited);
  REQUIRE_FALSE(over);
  CHECK(over.error().code() == errc::out_of_memory);
  CHECK(std::string(over.error().message()).find("budget of 1048576 bytes") != std::string::npos);
  within = {};
  CHECK(limited.used() == 0);
  REQUIRE_OK(s.synchronize());
  CHECK(pool.statistics().blocks_in_use == 0);
  CHECK(cudaGetLastError() == cudaSuccess);
}

// [concurrent]: the kernel must still run when the host frees the block, which serialized launches prevent.
TEST_CASE("a block freed on one stream is not reused on another before the first is done with it",
          "[pool][concurrent]") {
  auto a = take(stream::create());
  auto b = take(stream::create());
  device_pool_resource upstream;
  caching_pool<device_pool_resource> pool(upstream);
  constexpr std::size_t count = 1 << 16;
  void* first_address = nullptr;
  {
    auto block = take(device_buffer<int>::allocate(count, a, pool));
    first_address = block.data().get();
    test::delay_then_write<int><<<64, 256, 0, a.get()>>>(block, 1, slow_ns);  // writes late, on a
    REQUIRE_OK(check_launch("delay_then_write"));
  }  // freed on a while the kernel still runs
  auto reused = take(device_buffer<int>::allocate(count, b, pool));
  REQUIRE_OK(fill(reused, 2, b));  // if this were a's block, a's late write would land after it
  REQUIRE_OK(a.synchronize());
  REQUIRE_OK(b.synchronize());
  CHECK(test::read_back(reused.view()) == std::vector<int>(count, 2));
  CHECK(reused.data().get() != first_address);
  CHECK(pool.statistics().reused_across_streams == 0);

  // b's miss asked a to mark its frees: a records an event at its next pool call. Once that is done, b may take
  // a's block.
  REQUIRE_OK(device_buffer<int>::allocate(1, a, pool));
  REQUIRE_OK(a.synchronize());
  auto later = take(device_buffer<int>::allocate(count, b, pool));
  CHECK(later.data().get() == first_address);
  CHECK(pool.statistics().reused_across_streams == 1);
  reused = {};
  later = {};
  REQUIRE_OK(b.synchronize());
  CHECK(pool.statistics().blocks_in_use == 0);
}

TEST_CASE("out of memory: the caching pool gives back its cache and retries", "[pool][large]") {
  auto s = take(stream::create());
  device_malloc_resource upstream;  // cudaMalloc: no driver pool behind it to hide the cache
  caching_pool<device_malloc_resource> pool(upstream);
  std::size_t free_bytes = 0, total_bytes = 0;
  REQUIRE(cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess);
  const std::size_t first = free_bytes / 10 * 6, second = free_bytes / 10 * 4;
  const auto first_class = detail::class_of(first, "test"), second_class = detail::class_of(second, "test");
  REQUIRE(first_class->index != second_class->index);
  REQUIRE(first_class->bytes + second_class->bytes > free_bytes);
  { auto big = take(device_buffer<std::byte>::allocate(first, s, pool)); }  // cached, not given back
  CHECK(pool.statistics().bytes_cached == first_class->bytes);
  {
    auto next = device_buffer<std::byte>::allocate(second, s, pool);
    REQUIRE_OK(next);
    CHECK(pool.statistics().out_of_memory_retries == 1);
    CHECK(pool.statistics().blocks_cached == 0);
  }
  pool.release();
  std::size_t free_after = 0;
  REQUIRE(cudaMemGetInfo(&free_after, &total_bytes) == cudaSuccess);
  CHECK(free_after + (std::size_t{64} << 20) >= free_bytes);  // everything went back (allowing for noise)
  CHECK(pool.statistics().blocks_in_use == 0);
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("registration: buffers allocated on the stream come from it; it goes, they stay valid", "[pool][registry]") {
  auto s = take(stream::create());
  device_pool_resource upstream;
  caching_pool<device_pool_resource> pool(upstream);
  CHECK(allocator_for(s) == default_resource<device>(true));
  device_buffer<int> kept;
  {
    auto registered = take(register_allocator(s, pool));
    CHECK(registered.active());
    CHECK(allocator_for(s) == resource_ref<device>(pool));
    kept = take(device_buffer<int>::allocate(100, s));
    CHECK(kept.resource() == resource_ref<device>(pool));
    auto pitched = take(pitched_buffer<float, device>::allocate(64, 8, s));
    CHECK(pitched.resource() == resource_ref<device>(pool));
    CHECK(pool.statistics().blocks_in_use == 2);

    auto twice = register_allocator(s, pool);
    REQUIRE_FALSE(twice);
    CHECK(twice.error().code() == errc::invalid_argument);
    auto moved_to = std::move(registered);
    CHECK_FALSE(registered.active());
    CHECK(allocator_for(s) == resource_ref<device>(pool));
  }
  CHECK(allocator_for(s) == default_resource<device>(true));
  auto after = take(device_buffer<int>::allocate(100, s));
  CHECK(after.resource() == default_resource<device>(true));
  REQUIRE_OK(fill(kept, 5, s));  // outlives its registration
  REQUIRE_OK(s.synchronize());    // s is non-blocking: the synchronous read below does not wait for it
  CHECK(test::read_back(kept.view()) == std::vector<int>(100, 5));
  kept = {};
  REQUIRE_OK(s.synchronize());
  CHECK(pool.statistics().blocks_in_use == 0);

  for (const stream_ref shared : {stream_ref::legacy(), stream_ref::per_thread(), stream_ref()}) {
    auto refused = register_allocator(shared, pool);
    REQUIRE_FALSE(refused);
    CHECK(std::string(refused.error().message()).find("default stream") != std::string::npos);
  }
  after = {};  // freed on `s` while that stream still exists
  stream gone = std::move(s);
  auto moved_from = register_allocator(s, pool);
  REQUIRE_FALSE(moved_from);
  CHECK(moved_from.error().code() == errc::invalid_argument);
}

TEST_CASE("a stream created where a registered one was destroyed does not inherit its allocator", "[pool][registry]") {
  device_pool_resource upstream;
  caching_pool<device_pool_resource> pool(upstream);
  auto first = take(stream::create());
  const cudaStream_t old_handle = first.get();
  auto registered = take(register_allocator(first, pool));
  first = take(stream::create());  // destroys the registered stream (the registration is still held)
  bool saw_reuse = false;
  std::vector<stream> others;
  for (int i = 0; i < 64 && !saw_reuse; ++i) {
    others.push_back(take(stream::create()));
    saw_reuse = others.back().get() == old_handle || first.get() == old_handle;
    CHECK(allocator_for(others.back()) == default_resource<device>(true));
  }
  CHECK(allocator_for(first) == default_resource<device>(true));
  if (!saw_reuse) WARN("no new stream reused the destroyed stream's handle; the id check was not exercised");
}

TEST_CASE("Thrust sorts and reduces cudamem memory with temporaries from the registered pool", "[pool][thrust]") {
  auto s = take(stream::create());
  device_pool_resource upstream;
  caching_pool<device_pool_resource> pool(upstream);
  auto registered = take(register_allocator(s, pool));
  const auto values = test::random_vector<int>(1 << 20, test::fresh_seed());
  auto data = take(device_buffer<int>::allocate(values.size(), s));
  REQUIRE_OK(copy(data, span(values)));
  const auto before = pool.statistics().upstream_allocations;
  thrust::sort(thrust_policy(s), thrust_begin(data.view()), thrust_end(data.view()));
  CHECK(pool.statistics().upstream_allocations > before);  // the sort's temporaries came from the pool
  long long sum = thrust::reduce(thrust_policy(s), thrust_begin(data.view()), thrust_end(data.view()), 0ll);
  REQUIRE_OK(s.synchronize());
  auto expected = values;
  std::sort(expected.begin(), expected.end());
  CHECK(test::read_back(data.view()) == expected);
  CHECK(sum == std::accumulate(values.begin(), values.end(), 0ll));
  const device_span<int> round = from_thrust(to_thrust(data.view()), data.size(), data.device());
  CHECK(round.data().get() == data.data().get());
  CHECK(round.size() == data.size());
  data = {};
  REQUIRE_OK(s.synchronize());
  CHECK(pool.statistics().blocks_in_use == 0);
}

TEST_CASE("stream-ordered allocation through a registered allocator is captured into a graph", "[pool][graph]") {
  auto s = take(stream::create());
  device_pool_resource stream_ordered;
  statistics_adaptor<device_pool_resource> counted(stream_ordered);
  auto out = take(pinned_buffer<int>::allocate(1000));
  REQUIRE_OK(fill_bytes(out, 0));

  auto registered = take(register_allocator(s, counted));  // before the capture: CUDA gives no id during one
  REQUIRE(cudaStreamBeginCapture(s.get(), cudaStreamCaptureModeGlobal) == cudaSuccess);
  auto during = register_allocator(s, counted);  // refused without disturbing the capture
  status filled, copied;
  std::string allocation_error;
  bool from_registered = false;
  {
    auto scratch = device_buffer<int>::allocate(1000, s);
    if (scratch) {
      from_registered = scratch->resource() == resource_ref<device>(counted);
      filled = fill(*scratch, 42, s);
      copied = copy(out, *scratch, s);
    } else {
      allocation_error = scratch.error().message();
    }
  }
  // A caching pool refuses a capturing stream and leaves the capture intact.
  device_pool_resource upstream;
  caching_pool<device_pool_resource> pool(upstream);
  auto refused = pool.allocate(s, 100, 256);
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(s.get(), &graph) == cudaSuccess);
  REQUIRE_FALSE(during);
  CHECK(during.error().code() == errc::capture_active);
  CHECK(allocation_error.empty());
  REQUIRE_OK(filled);
  REQUIRE_OK(copied);
  CHECK(from_registered);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code() == errc::capture_active);
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  REQUIRE(cudaGraphLaunch(exec, s.get()) == cudaSuccess);
  REQUIRE_OK(s.synchronize());
  CHECK(test::read_back(out.view()) == std::vector<int>(1000, 42));
  CHECK(counted.statistics().bytes_outstanding == 0);
  CHECK(cudaGraphExecDestroy(exec) == cudaSuccess);
  CHECK(cudaGraphDestroy(graph) == cudaSuccess);
  CHECK(cudaGetLastError() == cudaSuccess);
}

// trim() and release() make no device-wide synchronize for blocks of live stream objects: trim() queries events,
// release() records one on such a stream and waits for it, and both free in stream order, in relaxed capture mode,
// all of which CUDA accepts during a capture elsewhere on the device. Synchronizing the device would be refused and
// would invalidate the capture; it stays the wait for blocks of raw handles, whose streams may be gone.
TEST_CASE("trimming and releasing a caching pool leave a capture in progress intact", "[pool][graph]") {
  auto worker = take(stream::create());
  auto capturing = take(stream::create());
  auto target = take(device_buffer<int>::allocate(1000));
  device_pool_resource upstream;
  caching_pool<device_pool_resource> pool(upstream);
  {
    std::vector<device_buffer<int>> blocks;
    for (int i = 0; i < 4; ++i) {
      blocks.push_back(take(device_buffer<int>::allocate(1000, worker, pool)));
      REQUIRE_OK(fill(blocks.back(), i, worker));
    }
  }
  REQUIRE(pool.statistics().blocks_cached == 4);

  REQUIRE(cudaStreamBeginCapture(capturing.get(), cudaStreamCaptureModeGlobal) == cudaSuccess);
  const status filled = fill(target, 5, capturing);
  pool.trim();     // queries events only
  pool.release();  // records an event on the worker, a live stream object, and waits for it: not the device
  const std::size_t reserved_after_release = pool.statistics().blocks_reserved;
  cudaStreamCaptureStatus during = cudaStreamCaptureStatusNone;
  const cudaError_t queried = cudaStreamIsCapturing(capturing.get(), &during);
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(capturing.get(), &graph);

  REQUIRE_OK(filled);
  CHECK(queried == cudaSuccess);
  CHECK(during == cudaStreamCaptureStatusActive);  // not invalidated
  REQUIRE(ended == cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  REQUIRE(cudaGraphLaunch(exec, capturing.get()) == cudaSuccess);
  REQUIRE_OK(capturing.synchronize());
  CHECK(test::read_back(target.view()) == std::vector<int>(1000, 5));
  CHECK(reserved_after_release == 0);  // the worker's blocks went back during the capture
  CHECK(cudaGraphExecDestroy(exec) == cudaSuccess);
  CHECK(cudaGraphDestroy(graph) == cudaSuccess);
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("many threads register, look up and allocate at once", "[pool][registry][concurrent]") {
  device_pool_resource upstream;
  caching_pool<device_pool_resource> pool(upstream);
  constexpr int threads = 8, rounds = 200;
  std::atomic<int> failures{0}, wrong_resource{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      auto s = stream::create();
      if (!s) {
        ++failures;
        return;
      }
      for (int round = 0; round < rounds; ++round) {
        auto registered = register_allocator(*s, pool);
        if (!registered) {
          ++failures;
          continue;
        }
        auto values = device_buffer<int>::allocate(static_cast<std::size_t>(64 << (round % 8)), *s);
        if (!values) ++failures;
        else if (!(values->resource() == resource_ref<device>(pool))) ++wrong_resource;
        else if (!fill(*values, t, *s)) ++failures;
      }
      if (!s->synchronize()) ++failures;
    });
  }
  for (auto& worker : workers) worker.join();
  CHECK(failures == 0);
  CHECK(wrong_resource == 0);
  CHECK(pool.statistics().blocks_in_use == 0);
  CHECK(detail::allocators().empty());
}

namespace {
int device_of(const void* p) {
  cudaPointerAttributes attributes{};
  REQUIRE(cudaPointerGetAttributes(&attributes, p) == cudaSuccess);
  return attributes.device;
}
int free_nodes(cudaGraph_t graph, std::size_t& nodes) {  // the graph's memory-free nodes; `nodes`: all of them
  nodes = 0;
  REQUIRE(cudaGraphGetNodes(graph, nullptr, &nodes) == cudaSuccess);
  std::vector<cudaGraphNode_t> all(nodes);
  REQUIRE(cudaGraphGetNodes(graph, all.data(), &nodes) == cudaSuccess);
  int frees = 0;
  for (cudaGraphNode_t node : all) {
    cudaGraphNodeType type{};
    REQUIRE(cudaGraphNodeGetType(node, &type) == cudaSuccess);
    frees += type == cudaGraphNodeTypeMemFree;
  }
  return frees;
}
}  // namespace

// Without the device check, the block of device 0 would be cached for s1 and handed out as device 1's memory, and
// the fill on device 1 (no peer access) would fault.
TEST_CASE("a caching pool never hands a block of one device to another device's stream", "[pool][multi_gpu]") {
  auto s0 = take(stream::create(device_id(0)));
  auto s1 = take(stream::create(device_id(1)));
  device_pool_resource upstream;
  caching_pool<device_pool_resource> pool(upstream);
  { auto warm = take(device_buffer<int>::allocate(1000, s1, pool)); }  // s1 has a cache of its own
  void* zero_address = nullptr;
  {
    auto block = take(device_buffer<int>::allocate(1000, s0, pool));
    REQUIRE(block.device() == device_id(0));
    zero_address = block.data().get();
    REQUIRE_OK(fill(block, 3, s0));
    REQUIRE_OK(s0.synchronize());
    block.set_stream(s1.ref());  // freed on device 1's stream
  }
  std::vector<device_buffer<int>> later;
  for (int i = 0; i < 3; ++i) {
    later.push_back(take(device_buffer<int>::allocate(1000, s1, pool)));
    CHECK(later.back().device() == device_id(1));
    CHECK(device_of(later.back().data().get()) == 1);  // the runtime's own answer
    CHECK(later.back().data().get() != zero_address);
    REQUIRE_OK(fill(later.back(), i, s1));
  }
  REQUIRE_OK(s1.synchronize());
  for (int i = 0; i < 3; ++i) CHECK(test::read_back(later[std::size_t(i)].view()) == std::vector<int>(1000, i));
  CHECK(pool.statistics().blocks_in_use == 3);
  CHECK(pool.statistics().blocks_reserved == 3);  // device 0's block went back to the upstream
  later.clear();
  REQUIRE_OK(s1.synchronize());
  CHECK(pool.statistics().blocks_in_use == 0);
  CHECK(cudaGetLastError() == cudaSuccess);
}

// The thread captures its own default stream (thread-local mode); the pool's give-backs must not join that capture.
TEST_CASE("trim and release during a capture of the per-thread default stream put nothing into it", "[pool][graph]") {
  auto worker = take(stream::create());
  auto target = take(device_buffer<int>::allocate(1000));
  device_pool_resource upstream;
  caching_pool<device_pool_resource> pool(upstream);
  {
    std::vector<device_buffer<int>> blocks;
    for (std::size_t i = 0; i < 4; ++i) {
      blocks.push_back(take(device_buffer<int>::allocate(1000 * (i + 1), worker, pool)));
      REQUIRE_OK(fill(blocks.back(), int(i), worker));
    }
  }
  REQUIRE(pool.statistics().blocks_cached == 4);

  REQUIRE(cudaStreamBeginCapture(cudaStreamPerThread, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  const cudaError_t memset = cudaMemsetAsync(target.data().get(), 0, target.size_bytes(), cudaStreamPerThread);
  pool.trim();
  pool.release();  // an event on the worker, then the blocks go back on the pool's own stream
  const caching_statistics after = pool.statistics();
  cudaStreamCaptureStatus during = cudaStreamCaptureStatusNone;
  const cudaError_t queried = cudaStreamIsCapturing(cudaStreamPerThread, &during);
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(cudaStreamPerThread, &graph);

  CHECK(memset == cudaSuccess);
  CHECK(queried == cudaSuccess);
  CHECK(during == cudaStreamCaptureStatusActive);  // not invalidated
  REQUIRE(ended == cudaSuccess);
  std::size_t nodes = 0;
  CHECK(free_nodes(graph, nodes) == 0);
  CHECK(nodes == 1);  // the memset only
  CHECK(after.blocks_reserved == 0);  // all four really went back
  CHECK(after.bytes_reserved == 0);
  CHECK(after.blocks_cached == 0);
  CHECK(after.blocks_in_use == 0);
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  REQUIRE(cudaGraphLaunch(exec, worker.get()) == cudaSuccess);
  REQUIRE_OK(worker.synchronize());
  CHECK(test::read_back(target.view()) == std::vector<int>(1000, 0));
  CHECK(cudaGraphExecDestroy(exec) == cudaSuccess);
  CHECK(cudaGraphDestroy(graph) == cudaSuccess);
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("a pool block freed on a capturing stream is no free node of the graph and outlives its replays",
          "[pool][graph]") {
  auto s = take(stream::create());
  auto out = take(pinned_buffer<int>::allocate(1000));
  device_pool_resource upstream;
  {
    caching_pool<device_pool_resource> pool(upstream);
    auto scratch = take(device_buffer<int>::allocate(1000, s, pool));
    REQUIRE(cudaStreamBeginCapture(s.get(), cudaStreamCaptureModeGlobal) == cudaSuccess);
    const status filled = fill(scratch, 42, s);
    const status copied = copy(out, scratch, s);
    scratch = {};  // freed on s during the capture: the graph's work uses it at every launch
    const caching_statistics during = pool.statistics();
    cudaGraph_t graph = nullptr;
    REQUIRE(cudaStreamEndCapture(s.get(), &graph) == cudaSuccess);
    REQUIRE_OK(filled);
    REQUIRE_OK(copied);
    std::size_t nodes = 0;
    CHECK(free_nodes(graph, nodes) == 0);
    CHECK(nodes == 2);  // the fill and the copy
    CHECK(during.blocks_in_use == 1);  // kept for the graph
    cudaGraphExec_t exec = nullptr;
    REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
    for (int launch = 0; launch < 2; ++launch) {
      REQUIRE_OK(fill_bytes(out, 0));
      REQUIRE(cudaGraphLaunch(exec, s.get()) == cudaSuccess);
      REQUIRE_OK(s.synchronize());
      CHECK(test::read_back(out.view()) == std::vector<int>(1000, 42));
      pool.release();  // gives nothing of the graph's back
      CHECK(pool.statistics().blocks_reserved == 1);
      auto other = take(device_buffer<int>::allocate(1000, s, pool));  // never the graph's block
      REQUIRE_OK(fill(other, 7, s));
      REQUIRE_OK(s.synchronize());
    }
    CHECK(cudaGraphExecDestroy(exec) == cudaSuccess);
    CHECK(cudaGraphDestroy(graph) == cudaSuccess);
  }  // the pool gives the graph's block back after a wait for the device
  CHECK(cudaGetLastError() == cudaSuccess);
}
