// SPDX-License-Identifier: MIT
// interop/nccl.hpp on two devices of one process (ncclCommInitAll): every collective and send/receive over cudamem
// buffers against results computed on the host, the checks made before NCCL is called, abort, and an NCCL error.
#include <cudamem/interop/nccl.hpp>

#include "common.cuh"

#include <cstdint>
#include <string>
#include <vector>

using namespace cudamem;
using test::take;

namespace {
constexpr int ranks = 2;

/// One communicator, stream and pair of buffers per device; the communicators go before the streams.
struct world {
  std::vector<stream> streams;
  nccl::communicator comms[ranks];
};

status init(world& w) {
  const device_id devices[ranks] = {device_id(0), device_id(1)};
  for (device_id d : devices) {
    auto s = stream::create(d);
    if (!s) return s.error();
    w.streams.push_back(std::move(*s));
  }
  return nccl::communicator::init_all(devices, w.comms);
}

status synchronize(world& w) {
  for (auto& s : w.streams) CUDAMEM_TRY(s.synchronize());
  return {};
}

std::vector<device_buffer<std::int32_t>> upload(const std::vector<std::vector<std::int32_t>>& values) {
  std::vector<device_buffer<std::int32_t>> out;
  for (int r = 0; r < ranks; ++r) {
    out.push_back(take(device_buffer<std::int32_t>::allocate(values[r].size(), device_id(r))));
    REQUIRE_OK(copy(out.back(), span(values[r])));
  }
  return out;
}

std::vector<std::vector<std::int32_t>> random_per_rank(std::size_t n) {
  std::vector<std::vector<std::int32_t>> values;
  for (int r = 0; r < ranks; ++r) {
    values.push_back(test::random_vector<std::int32_t>(n, test::fresh_seed()));
    for (auto& v : values.back()) v %= 1000;  // sums stay exact
  }
  return values;
}
}  // namespace

TEST_CASE("collectives over cudamem buffers on two devices", "[nccl][multi_gpu]") {
  world w;
  REQUIRE_OK(init(w));
  CHECK(w.comms[1].rank() == 1);
  CHECK(w.comms[1].size() == ranks);
  CHECK(w.comms[1].device() == device_id(1));
  constexpr std::size_t n = 3 * 4096 + 2;
  const auto values = random_per_rank(n);
  auto send = upload(values);
  auto recv = upload(values);

  SECTION("all_reduce, then in place") {
    auto group = take(nccl::group::start());
    for (int r = 0; r < ranks; ++r)
      REQUIRE_OK(nccl::all_reduce(w.comms[r], send[r], recv[r], nccl::reduce_op::sum, w.streams[r]));
    REQUIRE_OK(group.end());
    REQUIRE_OK(synchronize(w));
    std::vector<std::int32_t> sum(n), maximum(n);
    for (std::size_t i = 0; i < n; ++i) {
      sum[i] = values[0][i] + values[1][i];
      maximum[i] = values[0][i] > values[1][i] ? values[0][i] : values[1][i];
    }
    for (int r = 0; r < ranks; ++r) CHECK(test::read_back(recv[r].view()) == sum);
    auto again = take(nccl::group::start());
    for (int r = 0; r < ranks; ++r)
      REQUIRE_OK(nccl::all_reduce(w.comms[r], send[r], nccl::reduce_op::max, w.streams[r]));
    REQUIRE_OK(again.end());
    REQUIRE_OK(synchronize(w));
    for (int r = 0; r < ranks; ++r) CHECK(test::read_back(send[r].view()) == maximum);
  }
  SECTION("broadcast from rank 1") {
    {
      auto group = take(nccl::group::start());
      for (int r = 0; r < ranks; ++r) REQUIRE_OK(nccl::broadcast(w.comms[r], send[r], recv[r], 1, w.streams[r]));
    }  // ended as it goes
    REQUIRE_OK(synchronize(w));
    for (int r = 0; r < ranks; ++r) CHECK(test::read_back(recv[r].view()) == values[1]);
  }
  SECTION("reduce_scatter and all_gather") {
    const std::size_t block = n / ranks;
    std::vector<device_buffer<std::int32_t>> part;
    for (int r = 0; r < ranks; ++r) part.push_back(take(device_buffer<std::int32_t>::allocate(block, device_id(r))));
    auto group = take(nccl::group::start());
    for (int r = 0; r < ranks; ++r)
      REQUIRE_OK(nccl::reduce_scatter(w.comms[r], send[r], part[r], nccl::reduce_op::sum, w.streams[r]));
    REQUIRE_OK(group.end());
    REQUIRE_OK(synchronize(w));
    for (int r = 0; r < ranks; ++r) {
      std::vector<std::int32_t> expected(block);
      for (std::size_t i = 0; i < block; ++i) expected[i] = values[0][r * block + i] + values[1][r * block + i];
      CHECK(test::read_back(part[r].view()) == expected);
    }
    auto gather = take(nccl::group::start());
    for (int r = 0; r < ranks; ++r) REQUIRE_OK(nccl::all_gather(w.comms[r], part[r], recv[r], w.streams[r]));
    REQUIRE_OK(gather.end());
    REQUIRE_OK(synchronize(w));
    std::vector<std::int32_t> gathered(n);
    for (std::size_t i = 0; i < n; ++i) gathered[i] = values[0][i] + values[1][i];
    CHECK(test::read_back(recv[0].view()) == gathered);
    CHECK(test::read_back(recv[1].view()) == gathered);
  }
  SECTION("send and receive both ways in one group") {
    auto group = take(nccl::group::start());
    for (int r = 0; r < ranks; ++r) {
      REQUIRE_OK(nccl::send(w.comms[r], send[r], 1 - r, w.streams[r]));
      REQUIRE_OK(nccl::receive(w.comms[r], recv[r], 1 - r, w.streams[r]));
    }
    REQUIRE_OK(group.end());
    REQUIRE_OK(synchronize(w));
    CHECK(test::read_back(recv[0].view()) == values[1]);
    CHECK(test::read_back(recv[1].view()) == values[0]);
  }
}

TEST_CASE("NCCL calls are checked before NCCL sees them", "[nccl][multi_gpu]") {
  world w;
  REQUIRE_OK(init(w));
  auto on0 = take(device_buffer<float>::allocate(100, device_id(0)));
  auto short0 = take(device_buffer<float>::allocate(99, device_id(0)));
  auto on1 = take(device_buffer<float>::allocate(100, device_id(1)));
  auto expect = [](const status& s, errc code, const char* text) {
    REQUIRE_FALSE(s);
    INFO(s.error().message());
    CHECK(s.error().code() == code);
    CHECK(std::string(s.error().message()).find(text) != std::string::npos);
  };
  auto& s0 = w.streams[0];
  expect(nccl::all_reduce(w.comms[0], on0, short0, nccl::reduce_op::sum, s0), errc::extents_mismatch,
         "send has 100 elements, recv 99, with 2 ranks (needs recv.size() == send.size())");
  expect(nccl::all_reduce(w.comms[0], on1, nccl::reduce_op::sum, s0), errc::invalid_argument,
         "a view is on device 1, the communicator's rank on device 0");
  expect(nccl::broadcast(w.comms[0], on0, on0, 2, s0), errc::out_of_range, "rank 2 out of range (2 ranks)");
  expect(nccl::send(w.comms[0], on0, -1, s0), errc::out_of_range, "rank -1 out of range");
  expect(nccl::all_gather(w.comms[0], on0, on0, s0), errc::extents_mismatch,
         "(needs recv.size() == ranks * send.size())");
  expect(nccl::reduce_scatter(w.comms[0], on0, on0, nccl::reduce_op::sum, s0), errc::extents_mismatch,
         "send has 100 elements, recv 100, with 2 ranks (needs send.size() == ranks * recv.size())");
  nccl::communicator moved = std::move(w.comms[0]);
  expect(nccl::all_reduce(w.comms[0], on0, nccl::reduce_op::sum, s0), errc::invalid_argument, "empty");
  auto group = take(nccl::group::start());
  REQUIRE_OK(group.end());
  expect(group.end(), errc::invalid_argument, "ended already");
  REQUIRE_OK(moved.abort());
  CHECK_FALSE(moved.valid());
  REQUIRE_OK(w.comms[1].abort());
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("an NCCL error is reported in the NCCL domain", "[nccl][multi_gpu]") {
  auto id = take(nccl::unique_id::create());
  auto refused = nccl::communicator::init_rank(2, id, 5, device_id(0));  // rank 5 of 2
  REQUIRE_FALSE(refused);
  INFO(refused.error().message());
  CHECK(refused.error().domain() == error_domain::nccl);
  CHECK(refused.error().native_code() == ncclInvalidArgument);
  CHECK(std::string(refused.error().message()).rfind("nccl::communicator::init_rank: ncclCommInitRank: ", 0) == 0);
  CHECK(take(current_device()) == device_id(0));
}
