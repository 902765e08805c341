// SPDX-License-Identifier: MIT
// Peer access between two devices: the guards, the registry's counting as CUDA sees it, borrowed access, every
// error, peer copies, and kernels on device 1 reaching device 0's memory (cudaMalloc and pool) under a guard.
#include <cudamem/peer.hpp>

#include "common.cuh"
#include "engine.hpp"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

using namespace cudamem;
using test::take;

namespace {
const device_id d0(0), d1(1);

unsigned guards_of(device_id accessor, device_id owner) {
  return detail::process_wide<detail::peer_table>().guards(accessor, owner);
}

/// Whether `accessor` has peer access to `owner` now, as CUDA sees it; leaves it as it was.
bool access_on(device_id accessor, device_id owner) {
  auto current = take(device_guard::set(accessor));
  const cudaError_t code = cudaDeviceEnablePeerAccess(owner.get(), 0);
  if (code == cudaErrorPeerAccessAlreadyEnabled) {
    (void)cudaGetLastError();
    return true;
  }
  REQUIRE(code == cudaSuccess);
  REQUIRE(cudaDeviceDisablePeerAccess(owner.get()) == cudaSuccess);
  return false;
}

/// The access `accessor` has to `owner`'s default memory pool.
cudaMemAccessFlags pool_access_of(device_id accessor, device_id owner) {
  cudaMemPool_t pool = nullptr;
  REQUIRE(cudaDeviceGetDefaultMemPool(&pool, owner.get()) == cudaSuccess);
  cudaMemLocation where{};
  where.type = cudaMemLocationTypeDevice;
  where.id = accessor.get();
  cudaMemAccessFlags flags = cudaMemAccessFlagsProtNone;
  REQUIRE(cudaMemPoolGetAccess(&flags, pool, &where) == cudaSuccess);
  return flags;
}

/// Whether devices 0 and 1 exist and can peer in both directions; a test that needs it skips itself (CUDAMEM_SKIP).
bool pair_can_peer() {
  return take(device_count()) >= 2 && take(can_access_peer(d0, d1)) && take(can_access_peer(d1, d0));
}
#define SKIP_UNLESS_PAIR_CAN_PEER() \
  if (!pair_can_peer()) CUDAMEM_SKIP("devices 0 and 1 cannot peer in both directions (or there is no device 1)")

__global__ void triple_plus_one(device_span<int> data) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < data.size(); i += gridDim.x * blockDim.x)
    data[i] = data[i] * 3 + 1;
}
__global__ void copy_over(device_span<int> out, device_span<const int> in) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < in.size(); i += gridDim.x * blockDim.x)
    out[i] = in[i];
}

/// Runs triple_plus_one on device 1 over `data` (device 0's memory) and checks the result against `values`.
void triple_on_device1(device_span<int> data, const std::vector<int>& values) {
  auto s1 = take(stream::create(d1));
  {
    auto on1 = take(device_guard::set(d1));
    triple_plus_one<<<64, 256, 0, s1.get()>>>(data);
    REQUIRE(cudaGetLastError() == cudaSuccess);
  }
  REQUIRE_OK(s1.synchronize());
  std::vector<int> expected(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) expected[i] = values[i] * 3 + 1;
  CHECK(test::read_back(data) == expected);
}

template <class T>
void require_error(const result<T>& outcome, errc code, const char* text) {
  REQUIRE_FALSE(outcome);
  INFO(outcome.error().message());
  CHECK(outcome.error().code() == code);
  CHECK(std::string(outcome.error().message()).find(text) != std::string::npos);
  CHECK(cudaGetLastError() == cudaSuccess);
  CHECK(take(current_device()) == d0);
}
}  // namespace

TEST_CASE("what CUDA reports about the pair", "[peer][multi_gpu]") {
  const int count = take(device_count());
  auto links = take(peers_of(d0));
  REQUIRE(links.size() == static_cast<std::size_t>(count - 1));
  CHECK(links[0].owner == d1);
  for (const peer_link& link : links) {
    CHECK(link.owner != d0);
    CHECK(link.access_supported == take(can_access_peer(d0, link.owner)));
  }
  const peer_link between = take(peer_link_between(d1, d0));
  CHECK(between.owner == d0);
  CHECK(between.performance_rank >= 0);
}

TEST_CASE("guards nest: the first switches peer access on, the last off, in any order", "[peer][multi_gpu]") {
  SKIP_UNLESS_PAIR_CAN_PEER();
  REQUIRE(!access_on(d1, d0));
  {
    auto outer = take(peer_access::enable(d1, d0));
    CHECK(outer.accessor() == d1);
    CHECK(outer.owner() == d0);
    CHECK(access_on(d1, d0));
    CHECK(!access_on(d0, d1));  // one direction only
    auto inner = take(peer_access::enable(d1, d0));
    CHECK(guards_of(d1, d0) == 2);
    outer = std::move(inner);  // assigned over: outer's own count goes first
    CHECK(guards_of(d1, d0) == 1);
    CHECK(access_on(d1, d0));
  }
  CHECK(guards_of(d1, d0) == 0);
  CHECK(!access_on(d1, d0));
  {
    auto [forward, backward] = take(enable_both(d0, d1));
    CHECK(access_on(d0, d1));
    CHECK(access_on(d1, d0));
    { auto gone = std::move(forward); }  // the first-made guard goes first
    CHECK(!access_on(d0, d1));
    CHECK(access_on(d1, d0));
  }
  CHECK(!access_on(d1, d0));
  CHECK(take(current_device()) == d0);
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("a moved-from guard holds nothing and releases nothing", "[peer][multi_gpu]") {
  SKIP_UNLESS_PAIR_CAN_PEER();
  auto first = take(peer_access::enable(d1, d0));
  peer_access second = std::move(first);
  CHECK_FALSE(first.valid());
  CHECK(first.accessor() == device_id(cudaInvalidDeviceId));
  CHECK(first.owner() == device_id(cudaInvalidDeviceId));
  CHECK(second.valid());
  CHECK(guards_of(d1, d0) == 1);
  { peer_access dropped = std::move(first); }
  CHECK(access_on(d1, d0));
  { peer_access dropped = std::move(second); }
  CHECK(!access_on(d1, d0));
}

TEST_CASE("access enabled before the first guard is borrowed and stays on", "[peer][multi_gpu]") {
  SKIP_UNLESS_PAIR_CAN_PEER();
  {
    auto on1 = take(device_guard::set(d1));
    REQUIRE(cudaDeviceEnablePeerAccess(0, 0) == cudaSuccess);
  }
  {
    auto a = take(peer_access::enable(d1, d0));
    CHECK(cudaGetLastError() == cudaSuccess);  // the handled cudaErrorPeerAccessAlreadyEnabled was cleared
    auto b = take(peer_access::enable(d1, d0));
  }
  CHECK(access_on(d1, d0));
  auto on1 = take(device_guard::set(d1));
  REQUIRE(cudaDeviceDisablePeerAccess(0) == cudaSuccess);
}

TEST_CASE("pool access is opened by the first guard and closed by the last, unless it was open",
          "[peer][pool][multi_gpu]") {
  SKIP_UNLESS_PAIR_CAN_PEER();
  REQUIRE(pool_access_of(d1, d0) == cudaMemAccessFlagsProtNone);
  {
    auto guard = take(peer_access::enable(d1, d0));
    CHECK(pool_access_of(d1, d0) == cudaMemAccessFlagsProtReadWrite);
  }
  CHECK(pool_access_of(d1, d0) == cudaMemAccessFlagsProtNone);
  cudaMemPool_t pool = nullptr;
  REQUIRE(cudaDeviceGetDefaultMemPool(&pool, 0) == cudaSuccess);
  cudaMemAccessDesc desc{};
  desc.location.type = cudaMemLocationTypeDevice;
  desc.location.id = 1;
  desc.flags = cudaMemAccessFlagsProtReadWrite;
  REQUIRE(cudaMemPoolSetAccess(pool, &desc, 1) == cudaSuccess);
  { auto guard = take(peer_access::enable(d1, d0)); }
  CHECK(pool_access_of(d1, d0) == cudaMemAccessFlagsProtReadWrite);
  desc.flags = cudaMemAccessFlagsProtNone;
  REQUIRE(cudaMemPoolSetAccess(pool, &desc, 1) == cudaSuccess);
}

TEST_CASE("errors change nothing", "[peer][multi_gpu]") {
  const int count = take(device_count());
  require_error(peer_access::enable(d0, d0), errc::invalid_argument, "device 0 cannot be its own peer");
  require_error(can_access_peer(d1, d1), errc::invalid_argument, "its own peer");
  require_error(peer_access::enable(d0, device_id(count)), errc::out_of_range, "out of range");
  require_error(peer_access::enable(device_id(-1), d0), errc::out_of_range, "device -1 out of range");
  require_error(enable_both(d0, device_id(count)), errc::out_of_range, "enable_both: device");
  require_error(peer_link_between(d0, device_id(count)), errc::out_of_range, "out of range");
  require_error(peers_of(device_id(count)), errc::out_of_range, "out of range");
  CHECK(guards_of(d0, d0) == 0);
  for (int a = 0; a < count; ++a)
    for (int o = 0; o < count; ++o)
      if (a != o && !take(can_access_peer(device_id(a), device_id(o)))) {
        require_error(peer_access::enable(device_id(a), device_id(o)), errc::not_supported, "no peer path");
        CHECK(guards_of(device_id(a), device_id(o)) == 0);
      }
  // CUDA allows a device 8 peers: with 10 devices that can all peer, the ninth is refused, and counts nothing.
  if (count >= 10) {
    std::vector<peer_access> held;
    for (int o = 1; o <= 8; ++o)
      if (take(can_access_peer(d0, device_id(o)))) held.push_back(take(peer_access::enable(d0, device_id(o))));
    if (held.size() == 8 && take(can_access_peer(d0, device_id(9)))) {
      auto refused = peer_access::enable(d0, device_id(9));
      REQUIRE_FALSE(refused);
      CHECK(refused.error() == cudaErrorTooManyPeers);
      CHECK(guards_of(d0, device_id(9)) == 0);
      CHECK(cudaGetLastError() == cudaSuccess);
    }
  }
}

TEST_CASE("peer copies in both directions, 1D and 2D, under guards", "[peer][copy][multi_gpu]") {
  SKIP_UNLESS_PAIR_CAN_PEER();
  auto both = take(enable_both(d0, d1));
  constexpr std::size_t width = 1000, height = 37, pitch0 = 1024, pitch1 = 1040, n = pitch1 * height;
  auto on0 = take(device_buffer<int>::allocate(n, d0));
  auto on1 = take(device_buffer<int>::allocate(n, d1));
  auto s0 = take(stream::create(d0));
  const auto values = test::random_vector<int>(n, test::fresh_seed());
  // 1D, synchronous and stream-ordered, each way.
  REQUIRE_OK(copy(on0, span(values)));
  REQUIRE_OK(fill_bytes(on1, test::poison));
  REQUIRE_OK(copy(on1, on0));
  CHECK(test::read_back(on1.view()) == values);
  REQUIRE_OK(fill_bytes(on0, test::poison));
  REQUIRE_OK(copy(on0, on1, s0));
  REQUIRE_OK(s0.synchronize());
  CHECK(test::read_back(on0.view()) == values);
  // 2D, with different pitches on the two sides, each way.
  using detail::kind_id;
  const detail::operand rows0{on0.data().get(), width, height, pitch0 * sizeof(int), d0, kind_id::device};
  const detail::operand rows1{on1.data().get(), width, height, pitch1 * sizeof(int), d1, kind_id::device};
  REQUIRE_OK(fill_bytes(on1, 0));
  REQUIRE_OK(engine::copy_sync(rows1, rows0, sizeof(int), cudaMemcpyDeviceToDevice, "copy"));
  auto back = test::read_back(on1.view());
  for (std::size_t r = 0; r < height; ++r)
    for (std::size_t c = 0; c < pitch1; ++c) CHECK(back[r * pitch1 + c] == (c < width ? values[r * pitch0 + c] : 0));
  const auto more = test::random_vector<int>(n, test::fresh_seed());
  REQUIRE_OK(copy(on1, span(more)));
  REQUIRE_OK(fill_bytes(on0, 0));
  REQUIRE_OK(engine::copy_async(rows0, rows1, sizeof(int), cudaMemcpyDeviceToDevice, s0, "copy"));
  REQUIRE_OK(s0.synchronize());
  back = test::read_back(on0.view());
  for (std::size_t r = 0; r < height; ++r)
    for (std::size_t c = 0; c < pitch0; ++c) CHECK(back[r * pitch0 + c] == (c < width ? more[r * pitch1 + c] : 0));
}

TEST_CASE("a kernel on device 1 reads and writes device 0's memory under a guard", "[peer][kernel][multi_gpu]") {
  SKIP_UNLESS_PAIR_CAN_PEER();
  constexpr std::size_t n = (std::size_t{1} << 20) + 3;
  const auto values = test::random_vector<int>(n, test::fresh_seed());
  auto guard = take(peer_access::enable(d1, d0));
  SECTION("cudaMalloc memory") {
    auto on0 = take(device_buffer<int>::allocate(n, d0));
    REQUIRE_OK(copy(on0, span(values)));
    triple_on_device1(on0.view(), values);
  }
  SECTION("stream-ordered pool memory") {
    auto s0 = take(stream::create(d0));
    auto pooled = take(device_buffer<int>::allocate(n, s0));
    REQUIRE_OK(s0.synchronize());  // the allocation is ordered on s0; the synchronous copy runs on the legacy stream
    REQUIRE_OK(copy(pooled, span(values)));
    triple_on_device1(pooled.view(), values);
  }
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("the typed fill reaches another device's memory only under a guard", "[peer][fill][multi_gpu]") {
  SKIP_UNLESS_PAIR_CAN_PEER();
  auto on0 = take(device_buffer<int>::allocate(4096, d0));
  auto s1 = take(stream::create(d1));
  REQUIRE_OK(fill_bytes(on0, 0));
  auto refused = fill(on0, 7, s1);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code() == errc::invalid_argument);
  CHECK(std::string(refused.error().message()).find("peer_access") != std::string::npos);
  {
    auto wrong_way = take(peer_access::enable(d0, d1));  // device 0 reaching device 1 does not help
    CHECK_FALSE(fill(on0, 7, s1));
  }
  {
    auto guard = take(peer_access::enable(d1, d0));
    REQUIRE_OK(fill(on0, 7, s1));
    REQUIRE_OK(s1.synchronize());
  }
  CHECK(test::read_back(on0.view()) == std::vector<int>(4096, 7));
  CHECK_FALSE(fill(on0, 8, s1));  // the guard is gone
  CHECK(cudaGetLastError() == cudaSuccess);
}

// [concurrent]: threads racing over one pair; compute-sanitizer runs leave it out.
TEST_CASE("guards taken and dropped from 8 threads never switch access off under a holder",
          "[peer][concurrent][multi_gpu]") {
  SKIP_UNLESS_PAIR_CAN_PEER();
  constexpr std::size_t n = 1 << 16;
  constexpr int threads = 8, rounds = 25;
  auto on0 = take(device_buffer<int>::allocate(n, d0));
  const auto values = test::random_vector<int>(n, test::fresh_seed());
  REQUIRE_OK(copy(on0, span(values)));
  std::atomic<int> failures{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      auto s1 = stream::create(d1);
      auto out = device_buffer<int>::allocate(n, d1);
      if (!s1 || !out) return void(++failures);
      for (int i = 0; i < rounds; ++i) {
        auto guard = peer_access::enable(d1, d0);
        auto nested = t % 2 == 0 ? peer_access::enable(d1, d0) : peer_access::enable(d0, d1);  // overlapping pairs
        if (!guard || !nested) return void(++failures);
        auto on1 = device_guard::set(d1);
        copy_over<<<32, 256, 0, s1->get()>>>(out->view(), on0.view());
        if (cudaGetLastError() != cudaSuccess || !s1->synchronize()) return void(++failures);
      }
      std::vector<int> back(n);
      if (!copy(span(back), *out) || back != values) ++failures;
    });
  for (auto& worker : workers) worker.join();
  CHECK(failures == 0);
  CHECK(guards_of(d1, d0) == 0);
  CHECK(!access_on(d1, d0));
  CHECK(!access_on(d0, d1));
  CHECK(cudaGetLastError() == cudaSuccess);
}
