// SPDX-License-Identifier: MIT
// Out of memory on the device itself: each figure an out-of-memory error carries against CUDA's own answer, read here
// independently right after the failure; the caching pool's hook between its release and its retry; the pools usable
// afterwards; a ledger over the pool that balances at the end. These fill the whole device ([oom]).
#include <cudamem/statistics.hpp>

#include "common.cuh"

#include <optional>
#include <vector>

using namespace cudamem;
using test::take;

namespace {
constexpr std::size_t gib = std::size_t{1} << 30;

struct runtime_figures {
  std::size_t free = 0, total = 0;
  std::uint64_t pool_reserved = 0, pool_used = 0, graph_reserved = 0, graph_used = 0;
};
runtime_figures read_runtime(int device) {
  runtime_figures f;
  REQUIRE(cudaSetDevice(device) == cudaSuccess);
  REQUIRE(cudaMemGetInfo(&f.free, &f.total) == cudaSuccess);
  cudaMemPool_t pool = nullptr;
  REQUIRE(cudaDeviceGetMemPool(&pool, device) == cudaSuccess);
  REQUIRE(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &f.pool_reserved) == cudaSuccess);
  REQUIRE(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &f.pool_used) == cudaSuccess);
  REQUIRE(cudaDeviceGetGraphMemAttribute(device, cudaGraphMemAttrReservedMemCurrent, &f.graph_reserved) == cudaSuccess);
  REQUIRE(cudaDeviceGetGraphMemAttribute(device, cudaGraphMemAttrUsedMemCurrent, &f.graph_used) == cudaSuccess);
  return f;
}
// Every figure but the cache's against CUDA's now. Free memory may move by the driver's own small allocations between
// the failure and this read: 2 MiB of slack there, none elsewhere.
void check_figures(const error& failure, std::size_t requested, int device) {
  INFO(failure.message());
  REQUIRE(failure.oom() != nullptr);
  const out_of_memory_info& info = *failure.oom();
  const runtime_figures now = read_runtime(device);
  CHECK(info.requested_bytes == requested);
  CHECK(info.device == device);
  CHECK(info.has(out_of_memory_info::device_memory));
  CHECK(info.has(out_of_memory_info::pool));
  CHECK(info.has(out_of_memory_info::graphs));
  CHECK(info.device_total_bytes == now.total);
  const std::uint64_t slack = std::uint64_t{2} << 20;
  CHECK(info.device_free_bytes <= now.free + slack);
  CHECK(info.device_free_bytes + slack >= now.free);
  CHECK(info.device_free_bytes < requested);  // it did not fit
  CHECK(info.pool_reserved_bytes == now.pool_reserved);
  CHECK(info.pool_used_bytes == now.pool_used);
  CHECK(info.graph_reserved_bytes == now.graph_reserved);
  CHECK(info.graph_used_bytes == now.graph_used);
  CHECK(cudaGetLastError() == cudaSuccess);  // neither the failure nor the figures' queries left an error behind
}
// Blocks of one size held from a resource, given back (and the stream drained) however the test case ends: a failed
// REQUIRE leaves no device memory behind for later test cases, nor a leak for memcheck to report.
template <class Resource>
struct held_blocks {
  Resource& from;
  stream_ref s;
  std::size_t bytes;
  std::vector<void*> blocks;
  held_blocks(Resource& r, stream_ref on, std::size_t size) : from(r), s(on), bytes(size) {}
  held_blocks(const held_blocks&) = delete;
  held_blocks& operator=(const held_blocks&) = delete;
  ~held_blocks() { give_back(); }
  void give_back() {
    for (void* p : blocks) from.deallocate(s, p, bytes, 256);
    blocks.clear();
    (void)cudaStreamSynchronize(s.get());
  }
};
void trim_default_pool(int device) {  // what this test took stays out of later tests' way
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  cudaMemPool_t pool = nullptr;
  REQUIRE(cudaDeviceGetMemPool(&pool, device) == cudaSuccess);
  REQUIRE(cudaMemPoolTrimTo(pool, 0) == cudaSuccess);
}
}  // namespace

TEST_CASE("device_pool_resource and cudaMalloc run out of memory with every figure CUDA reports", "[oom]") {
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  const int device = take(current_device()).get();
  auto s = take(stream::create());
  device_pool_resource pool;
  held_blocks<device_pool_resource> held(pool, s, gib);
  std::optional<error> failure;
  for (int i = 0; i < 100000 && !failure; ++i) {
    auto got = pool.allocate(s, gib, 256);
    if (got) held.blocks.push_back(*got);
    else failure = got.error();
  }
  REQUIRE(failure);
  CHECK(*failure == cudaErrorMemoryAllocation);
  check_figures(*failure, gib, device);
  CHECK(failure->oom()->pool_used_bytes >= held.blocks.size() * gib);
  CHECK(std::string(failure->message())
            .find("cudaMallocAsync: cudaErrorMemoryAllocation: out of memory; asked 1.0 GiB "
                  "on device ") == 0);

  // Through a buffer (the registry's default for the stream): the figures survive the api's name.
  auto buffer = device_buffer<std::byte>::allocate(gib, s);
  REQUIRE_FALSE(buffer);
  CHECK(std::string(buffer.error().message()).find("buffer::allocate: cudaMallocAsync") == 0);
  check_figures(buffer.error(), gib, device);

  // cudaMalloc finds the same device.
  device_malloc_resource plain;
  auto direct = plain.allocate(s, gib, 256);
  REQUIRE_FALSE(direct);
  CHECK(direct.error() == cudaErrorMemoryAllocation);
  check_figures(direct.error(), gib, device);

  held.give_back();
  auto again = pool.allocate(s, std::size_t{1} << 20, 256);  // usable afterwards
  REQUIRE_OK(again);
  pool.deallocate(s, *again, std::size_t{1} << 20, 256);
  trim_default_pool(device);
}

namespace {
struct user_cache {  // what a user keeps of their own, and frees when the hook asks
  void* block = nullptr;
  bool free_it = false;
  int calls = 0;
  errc code{};
  out_of_memory_info seen{};
  ~user_cache() {
    if (block != nullptr) (void)cudaFree(block);
  }
};
void free_user_cache(const error& failure, void* context) noexcept {
  auto& mine = *static_cast<user_cache*>(context);
  ++mine.calls;
  mine.code = failure.code();
  if (failure.oom() != nullptr) mine.seen = *failure.oom();
  if (mine.free_it && mine.block != nullptr && cudaFree(mine.block) == cudaSuccess) mine.block = nullptr;
}
}  // namespace

TEST_CASE("caching_pool: out of memory gives the cache back, runs the hook, retries; the ledger balances", "[oom]") {
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  const int device = take(current_device()).get();
  auto s = take(stream::create());
  device_pool_resource upstream;
  caching_pool<device_pool_resource> pool(upstream);
  ledger book;
  statistics_resource<caching_pool<device_pool_resource>> counted(pool, book, "oom");
  user_cache mine;
  REQUIRE(cudaMalloc(&mine.block, 4 * gib) == cudaSuccess);
  pool.set_out_of_memory_hook(&free_user_cache, &mine);

  held_blocks<statistics_resource<caching_pool<device_pool_resource>>> held(counted, s, gib),
      rescued_held(counted, s, 3 * gib);
  std::optional<error> failure;
  for (int i = 0; i < 100000 && !failure; ++i) {
    auto got = counted.allocate(s, gib, 256);
    if (got) held.blocks.push_back(*got);
    else failure = got.error();
  }
  REQUIRE(failure);
  REQUIRE(held.blocks.size() >= 4);
  CHECK(mine.calls == 1);  // the hook ran, freeing nothing
  CHECK(mine.code == errc::out_of_memory_retry);
  CHECK(pool.statistics().out_of_memory_retries == 1);

  // Two blocks cached; 3 GiB (a size class of its own) cannot come from them: the upstream refuses, the pool gives
  // the two back, the hook frees the user's 4 GiB, and the retry succeeds.
  for (int i = 0; i < 2; ++i) {
    counted.deallocate(s, held.blocks.back(), gib, 256);
    held.blocks.pop_back();
  }
  mine.free_it = true;
  auto rescued = counted.allocate(s, 3 * gib, 256);
  REQUIRE_OK(rescued);
  rescued_held.blocks.push_back(*rescued);
  CHECK(mine.calls == 2);
  CHECK(mine.code == errc::out_of_memory_retry);
  CHECK(mine.block == nullptr);
  CHECK(mine.seen.has(out_of_memory_info::cache));
  CHECK(mine.seen.cached_bytes == 2 * gib);
  CHECK(mine.seen.largest_cached_block == gib);
  CHECK(mine.seen.requested_bytes == 3 * gib);
  CHECK(pool.statistics().out_of_memory_retries == 2);

  // Nothing left to free: the final error, every figure against CUDA's (the cache was empty: nothing moves after it).
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  auto refused = counted.allocate(s, 8 * gib, 256);
  REQUIRE_FALSE(refused);
  CHECK(refused.error() == cudaErrorMemoryAllocation);
  CHECK(std::string(refused.error().message()).find("caching_pool::allocate: cudaMallocAsync: ") == 0);
  check_figures(refused.error(), 8 * gib, device);
  CHECK(refused.error().oom()->has(out_of_memory_info::cache));
  CHECK(refused.error().oom()->cached_bytes == 0);
  CHECK(refused.error().oom()->largest_cached_block == 0);
  CHECK(mine.calls == 3);

  // The ledger saw every block; once all are back it balances, and the pool serves again.
  const std::size_t kept = held.blocks.size();
  CHECK(counted.usage(s).blocks_in_use == std::int64_t(kept + 1));
  CHECK(counted.usage().bytes_in_use == std::int64_t(kept * gib + 3 * gib));
  CHECK(book.device(device_id(device)).bytes_in_use == counted.usage().bytes_in_use);
  held.give_back();
  rescued_held.give_back();
  CHECK(counted.usage().cached_bytes == pool.statistics().bytes_cached);
  CHECK(counted.usage().cached_bytes >= kept * gib);
  pool.release();
  CHECK(counted.usage().cached_bytes == 0);
  auto again = counted.allocate(s, std::size_t{1} << 20, 256);
  REQUIRE_OK(again);
  counted.deallocate(s, *again, std::size_t{1} << 20, 256);
  pool.release();
  REQUIRE_OK(s.synchronize());
  CHECK(book.balanced());
  CHECK(counted.usage().bytes_in_use == 0);
  CHECK(counted.usage().peak_bytes >= (kept + 2) * gib);
  trim_default_pool(device);
}

TEST_CASE("a ledger over a registered caching pool counts buffers per stream and balances", "[statistics]") {
  device_pool_resource upstream;
  caching_pool<device_pool_resource> pool(upstream);
  ledger book;
  statistics_resource<caching_pool<device_pool_resource>> counted(pool, book, "registered");
  auto a = take(stream::create()), b = take(stream::create());
  {
    auto on_a = take(register_allocator(a, counted)), on_b = take(register_allocator(b, counted));
    std::vector<device_buffer<float>> kept;
    for (int i = 1; i <= 10; ++i)
      kept.push_back(take(device_buffer<float>::allocate(std::size_t(i) * 1000, i % 2 ? a : b)));
    CHECK(counted.usage(a).allocations == 5);
    CHECK(counted.usage(b).allocations == 5);
    CHECK(counted.usage(a).bytes_in_use == std::int64_t((1 + 3 + 5 + 7 + 9) * 1000 * sizeof(float)));
    CHECK(counted.usage(b).bytes_in_use == std::int64_t((2 + 4 + 6 + 8 + 10) * 1000 * sizeof(float)));
    kept.clear();
    CHECK(counted.usage().bytes_in_use == 0);
    CHECK(counted.usage().peak_bytes == 55 * 1000 * sizeof(float));
    CHECK(counted.usage().cached_bytes == pool.statistics().bytes_cached);
    CHECK(counted.usage().cached_bytes > 0);
  }
  REQUIRE_OK(a.synchronize());
  REQUIRE_OK(b.synchronize());
  CHECK(book.balanced());
}
