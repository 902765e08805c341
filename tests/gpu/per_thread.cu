// SPDX-License-Identifier: MIT
// Built with --default-stream=per-thread. The synchronous forms must still be ordered after work
// on blocking streams, as they are on the legacy default stream: plain cudaMemcpy would run on the
// per-thread stream here, which does not wait for other blocking streams.
#include "common.cuh"

using namespace cudamem;
using test::take;

TEST_CASE("synchronous copies wait for blocking streams in per-thread builds", "[ptds]") {
  auto blocking = take(stream::create(stream_options{.non_blocking = false}));
  constexpr std::size_t n = 1 << 16;
  auto d = take(device_buffer<int>::allocate(n));
  REQUIRE_OK(fill_bytes(d, 0));
  test::delay_then_write<<<32, 256, 0, blocking.get()>>>(d.view(), 1234, 50'000'000ull);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  std::vector<int> out(n, 0);
  REQUIRE_OK(copy(span(out), d));
  CHECK(out == std::vector<int>(n, 1234));

  // A synchronous fill is likewise ordered after the late writer.
  test::delay_then_write<<<32, 256, 0, blocking.get()>>>(d.view(), 99, 50'000'000ull);
  REQUIRE_OK(fill_bytes(d, 0));
  REQUIRE_OK(copy(span(out), d));
  CHECK(out == std::vector<int>(n, 0));
}

TEST_CASE("the default stream_ref is the legacy stream, not the per-thread one", "[ptds]") {
  CHECK(stream_ref().get() == cudaStreamLegacy);
  CHECK(stream_ref::per_thread().get() == cudaStreamPerThread);
}
