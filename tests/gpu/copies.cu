// SPDX-License-Identifier: MIT
// Round trips through every legal pair of kinds, fills, and cross-device copies.
#include "common.cuh"
#include "engine.hpp"

#include <cstring>
#include <initializer_list>
#include <string>
#include <thread>

using namespace cudamem;
using test::take;

namespace {

constexpr std::size_t guard_elems = 3;

/// Copies fresh random data of kind Src into the middle of a poisoned destination of kind Dst,
/// synchronously and (where both sides may be stream-ordered) on `s`, and checks every byte:
/// the payload arrived and nothing outside it changed.
template <class Dst, class Src>
void round_trip(const std::vector<std::uint32_t>& expected, stream_ref s) {
  const std::size_t n = expected.size();
  INFO("dst " << Dst::name << ", src " << Src::name << ", " << n << " elements");
  auto src = take(buffer<std::uint32_t, Src>::allocate(n));
  REQUIRE_OK(copy(src, span(expected)));
  auto dst = take(buffer<std::uint32_t, Dst>::allocate(n + 2 * guard_elems));
  auto inner = take(dst.view().subspan(guard_elems, n));

  const auto check = [&] {
    auto back = test::read_back(dst.view());
    REQUIRE(back.size() == n + 2 * guard_elems);
    CHECK(std::memcmp(back.data() + guard_elems, expected.data(), n * sizeof(std::uint32_t)) == 0);
    const std::vector<std::uint32_t> head(back.begin(), back.begin() + guard_elems);
    const std::vector<std::uint32_t> tail(back.end() - guard_elems, back.end());
    CHECK(test::all_bytes(head, test::poison));
    CHECK(test::all_bytes(tail, test::poison));
  };

  REQUIRE_OK(fill_bytes(dst, test::poison));
  REQUIRE_OK(copy(inner, src));
  check();

  if constexpr (stream_orderable<Dst> && stream_orderable<Src>) {
    REQUIRE_OK(fill_bytes(dst, test::poison));
    REQUIRE_OK(copy(inner, src, s));
    REQUIRE_OK(s.synchronize());
    check();
    // The members say the same thing.
    REQUIRE_OK(fill_bytes(dst, test::poison, s));
    REQUIRE_OK(copy(inner, src, s));
    REQUIRE_OK(s.synchronize());
    check();
  }
}

template <class Dst>
void from_every_source(const std::vector<std::uint32_t>& expected, stream_ref s) {
  round_trip<Dst, host>(expected, s);
  round_trip<Dst, pinned>(expected, s);
  round_trip<Dst, device>(expected, s);
  round_trip<Dst, managed>(expected, s);
}

}  // namespace

TEST_CASE("round trips through every pair of kinds, sync and stream-ordered", "[copy]") {
  auto s = take(stream::create());
  const std::uint64_t seed = test::fresh_seed();
  INFO("seed " << seed);
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{1023}, std::size_t{1} << 20}) {
    const auto expected = test::random_vector<std::uint32_t>(n, seed + n);
    from_every_source<host>(expected, s);
    from_every_source<pinned>(expected, s);
    from_every_source<device>(expected, s);
    from_every_source<managed>(expected, s);
  }
}

TEST_CASE("synchronous copies to the host wait for the legacy stream and blocking streams", "[copy]") {
  auto blocking = take(stream::create(stream_options{.non_blocking = false}));
  constexpr std::size_t n = 1 << 16;
  auto d = take(device_buffer<int>::allocate(n));
  auto pinned_out = take(pinned_buffer<int>::allocate(n));
  std::vector<int> out(n, 0);
  REQUIRE_OK(fill_bytes(d, 0));
  // A late writer on a blocking stream, then one on the legacy stream: each copy must see it.
  test::delay_then_write<<<32, 256, 0, blocking.get()>>>(d.view(), 1234, 50'000'000ull);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  REQUIRE_OK(copy(span(out), d));
  CHECK(out == std::vector<int>(n, 1234));
  test::delay_then_write<<<32, 256, 0, cudaStreamLegacy>>>(d.view(), 77, 50'000'000ull);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  REQUIRE_OK(copy(pinned_out, d));
  CHECK(test::read_back(pinned_out.view()) == std::vector<int>(n, 77));
  // Rows out of a pitched device view into pageable memory, after a late writer.
  test::delay_then_write<<<32, 256, 0, blocking.get()>>>(d.view(), 5, 50'000'000ull);
  std::vector<int> rows(4 * 100, -1);
  const detail::operand src{d.data().get(), 100, 4, 128 * sizeof(int), device_id(0), detail::kind_id::device};
  const detail::operand dst{rows.data(), 100, 4, 100 * sizeof(int), device_id::host(), detail::kind_id::host};
  REQUIRE_OK(engine::copy_sync(dst, src, sizeof(int), cudaMemcpyDeviceToHost, "copy"));
  CHECK(rows == std::vector<int>(4 * 100, 5));
}

TEST_CASE("1 GiB round trips through the main paths", "[copy][large]") {
  auto s = take(stream::create());
  const std::uint64_t seed = test::fresh_seed();
  INFO("seed " << seed);
  const auto expected = test::random_vector<std::uint32_t>((std::size_t{1} << 30) / sizeof(std::uint32_t), seed);
  round_trip<device, host>(expected, s);
  round_trip<host, device>(expected, s);
  round_trip<device, pinned>(expected, s);
  round_trip<pinned, device>(expected, s);
  round_trip<device, device>(expected, s);
  round_trip<managed, device>(expected, s);
}

TEST_CASE("CuPy's MemoryPointer operations move data like copy and fill_bytes", "[copy]") {
  auto s = take(stream::create());
  const auto expected = test::random_vector<std::int16_t>(4097, test::fresh_seed());
  auto dev = take(device_buffer<std::int16_t>::allocate(expected.size(), s));
  auto staging = take(pinned_buffer<std::int16_t>::allocate(expected.size()));
  std::memcpy(staging.data().get(), expected.data(), expected.size() * sizeof(std::int16_t));

  REQUIRE_OK(copy_from_host(dev, staging, s));
  std::vector<std::int16_t> out(expected.size(), 0);
  REQUIRE_OK(s.synchronize());
  REQUIRE_OK(copy_to_host(span(out), dev));
  CHECK(out == expected);

  auto other = take(device_buffer<std::int16_t>::allocate(expected.size()));
  REQUIRE_OK(copy_from_device(other, dev));
  REQUIRE_OK(fill_bytes(staging, 0));
  REQUIRE_OK(copy_to_host(staging, other, s));
  REQUIRE_OK(s.synchronize());
  CHECK(std::memcmp(staging.data().get(), expected.data(), expected.size() * sizeof(std::int16_t)) == 0);

  REQUIRE_OK(fill_bytes(other, 0x7f, s));
  // A synchronous copy runs on the legacy default stream, which does not wait for the non-blocking s.
  REQUIRE_OK(s.synchronize());
  REQUIRE_OK(copy(span(out), other));
  CHECK(test::all_bytes(out, 0x7f));
  REQUIRE_OK(copy(other, dev.view()));
  REQUIRE_OK(copy_to_host(span(out), other));
  CHECK(out == expected);
}

namespace {
template <class Kind>
void check_fills(stream_ref s) {
  INFO("kind " << Kind::name);
  constexpr std::size_t n = 1001;
  auto target = take(buffer<float, Kind>::allocate(n + 2 * guard_elems));
  auto inner = take(target.view().subspan(guard_elems, n));
  REQUIRE_OK(fill_bytes(target, test::poison));
  REQUIRE_OK(fill_bytes(inner, 0x3c));
  auto back = test::read_back(target.view());
  CHECK(test::all_bytes(std::vector<float>(back.begin(), back.begin() + guard_elems), test::poison));
  CHECK(test::all_bytes(std::vector<float>(back.begin() + guard_elems, back.end() - guard_elems), 0x3c));
  CHECK(test::all_bytes(std::vector<float>(back.end() - guard_elems, back.end()), test::poison));

  if constexpr (stream_orderable<Kind>) {
    REQUIRE_OK(fill_bytes(inner, 0x11, s));
    REQUIRE_OK(s.synchronize());
    back = test::read_back(target.view());
    CHECK(test::all_bytes(std::vector<float>(back.begin() + guard_elems, back.end() - guard_elems), 0x11));
    CHECK(test::all_bytes(std::vector<float>(back.end() - guard_elems, back.end()), test::poison));

    REQUIRE_OK(fill(inner, 3.25f, s));
    REQUIRE_OK(s.synchronize());
    back = test::read_back(target.view());
    CHECK(std::vector<float>(back.begin() + guard_elems, back.end() - guard_elems) == std::vector<float>(n, 3.25f));
    CHECK(test::all_bytes(std::vector<float>(back.begin(), back.begin() + guard_elems), test::poison));
    CHECK(test::all_bytes(std::vector<float>(back.end() - guard_elems, back.end()), test::poison));
  }
}
}  // namespace

TEST_CASE("fills set exactly the bytes of the view, for every kind", "[fill]") {
  auto s = take(stream::create());
  check_fills<device>(s);
  check_fills<pinned>(s);
  check_fills<managed>(s);
  check_fills<host>(s);
  // Empty fills do nothing and succeed.
  REQUIRE_OK(fill_bytes(device_span<int>(), 1, s));
  REQUIRE_OK(fill(device_span<int>(), 1, s));
}

// Contiguous stream-ordered fills and copies go to the driver first and to the runtime where the driver refuses; a
// thread whose first CUDA call is one of them has no current context, which the driver needs for the legacy stream.
TEST_CASE("stream-ordered fills and copies from a thread that has made no CUDA call", "[fill][copy]") {
  auto s = take(stream::create());
  constexpr std::size_t n = 4099;
  auto a = take(device_buffer<std::uint8_t>::allocate(n, s));
  auto b = take(device_buffer<std::uint8_t>::allocate(n, s));
  auto c = take(device_buffer<std::uint8_t>::allocate(n, s));
  REQUIRE_OK(s.synchronize());
  std::string on_stream, on_legacy, copied;
  cudaError_t left = cudaErrorUnknown;
  std::thread([&] {
    const status filled = fill_bytes(a, 0x3c, s);
    on_stream = filled ? "ok" : filled.error().message();
    const status moved = copy(b, a, s);
    copied = moved ? "ok" : moved.error().message();
    const status legacy = fill_bytes(c, 0xa5, stream_ref::legacy());
    on_legacy = legacy ? "ok" : legacy.error().message();
    left = cudaGetLastError();
  }).join();
  CHECK(on_stream == "ok");
  CHECK(copied == "ok");
  CHECK(on_legacy == "ok");
  CHECK(left == cudaSuccess);  // a refusal of the driver's is not left behind as an error
  REQUIRE_OK(s.synchronize());
  REQUIRE_OK(stream_ref::legacy().synchronize());
  CHECK(test::all_bytes(test::read_back(b.view()), 0x3c));
  CHECK(test::all_bytes(test::read_back(c.view()), 0xa5));
}

TEST_CASE("a 1 GiB fill writes every byte", "[fill][large]") {
  auto s = take(stream::create());
  auto target = take(device_buffer<std::uint8_t>::allocate(std::size_t{1} << 30, s));
  REQUIRE_OK(fill_bytes(target, 0x5a, s));
  std::vector<std::uint8_t> back(target.size());
  REQUIRE_OK(s.synchronize());
  REQUIRE_OK(copy(span(back), target));
  CHECK(test::all_bytes(back, 0x5a));
}

namespace {
/// Device 0 -> device 1 and back, synchronously and on a stream of each device.
void cross_device_round_trip(std::size_t n) {
  INFO(n << " elements");
  const auto expected = test::random_vector<std::uint64_t>(n, test::fresh_seed());
  auto on0 = take(device_buffer<std::uint64_t>::allocate(n, device_id(0)));
  auto on1 = take(device_buffer<std::uint64_t>::allocate(n + 2 * guard_elems, device_id(1)));
  REQUIRE(on0.device() == device_id(0));
  REQUIRE(on1.device() == device_id(1));
  auto inner1 = take(on1.view().subspan(guard_elems, n));
  REQUIRE_OK(copy(on0, span(expected)));

  REQUIRE_OK(fill_bytes(on1, test::poison));
  REQUIRE_OK(copy(inner1, on0));
  auto back = test::read_back(on1.view());
  CHECK(std::equal(expected.begin(), expected.end(), back.begin() + guard_elems));
  CHECK(test::all_bytes(std::vector<std::uint64_t>(back.end() - guard_elems, back.end()), test::poison));

  auto s1 = take(stream::create(device_id(1)));
  auto back_on0 = take(device_buffer<std::uint64_t>::allocate(n, device_id(0)));
  REQUIRE_OK(fill_bytes(back_on0, 0));
  REQUIRE_OK(copy(back_on0, inner1, s1));
  REQUIRE_OK(s1.synchronize());
  CHECK(test::read_back(back_on0.view()) == expected);
}
}  // namespace

TEST_CASE("device memory on two devices goes through the peer path", "[multi_gpu]") {
  REQUIRE_OK(set_current_device(device_id(0)));
  SECTION("without peer access") {
    for (std::size_t n : {std::size_t{1}, std::size_t{4099}, std::size_t{1} << 24}) cross_device_round_trip(n);
  }
  SECTION("with peer access enabled") {
    int can = 0;
    REQUIRE(cudaDeviceCanAccessPeer(&can, 0, 1) == cudaSuccess);
    if (can == 0) {
      WARN("devices 0 and 1 cannot peer; only the staged path was tested");
      return;
    }
    REQUIRE(cudaDeviceEnablePeerAccess(1, 0) == cudaSuccess);
    cross_device_round_trip(std::size_t{1} << 24);
    REQUIRE(cudaDeviceDisablePeerAccess(1) == cudaSuccess);
  }
  // A synchronous copy of another device's memory leaves the current device as it was.
  auto current = take(current_device());
  CHECK(current == device_id(0));
}

TEST_CASE("allocations follow the stream's device", "[multi_gpu]") {
  auto s1 = take(stream::create(device_id(1)));
  CHECK(s1.device() == device_id(1));
  CHECK(take(s1.ref().device()) == device_id(1));
  auto on1 = take(device_buffer<int>::allocate(100, s1));
  CHECK(on1.device() == device_id(1));
  cudaPointerAttributes attributes{};
  REQUIRE(cudaPointerGetAttributes(&attributes, on1.data().get()) == cudaSuccess);
  CHECK(attributes.device == 1);
  CHECK(take(current_device()) == device_id(0));
  REQUIRE_OK(fill_bytes(on1, 0, s1));
  // A typed fill launches on the stream's device, whatever the current device is.
  REQUIRE_OK(fill(on1, 5, s1));
  REQUIRE_OK(s1.synchronize());
  CHECK(test::read_back(on1.view()) == std::vector<int>(100, 5));
  CHECK(take(current_device()) == device_id(0));
}

namespace {
__global__ void never_runs() {}
}  // namespace

TEST_CASE("a launch error of the caller's, still pending, is neither blamed on a fill or 2D copy nor cleared",
          "[fill][copy][2d]") {
  REQUIRE(detail::copy2d_kernel != nullptr);  // registered by this nvcc-compiled test program
  auto s = take(stream::create());
  auto target = take(device_buffer<int>::allocate(1000));
  auto src = take(device_pitched_buffer<float>::allocate(64, 40));
  auto dst = take(device_pitched_buffer<float>::allocate(64, 40));
  auto synced = take(device_pitched_buffer<float>::allocate(64, 40));
  // 48 of 64 columns: rows of 192 bytes at a pitch of at least 256, so a 2D copy, on the kernel's path.
  const auto src_rows = take(src.view().subspan(0, 0, 40, 48));
  const auto dst_rows = take(dst.view().subspan(0, 0, 40, 48));
  const auto synced_rows = take(synced.view().subspan(0, 0, 40, 48));
  REQUIRE(src_rows.pitch_bytes() != src_rows.width() * sizeof(float));
  const auto pattern = test::random_vector<float>(40 * 48, test::fresh_seed());
  REQUIRE_OK(copy(src_rows, span(pattern)));
  REQUIRE(cudaGetLastError() == cudaSuccess);

  never_runs<<<0, 1>>>();  // zero blocks: refused (CUDA 13: cudaErrorInvalidValue), left unchecked by its caller
  const cudaError_t pending = cudaPeekAtLastError();
  const status filled = fill(target, 7, s);
  const cudaError_t after_fill = cudaPeekAtLastError();
  const status copied = copy(dst_rows, src_rows, s);
  const cudaError_t after_copy = cudaPeekAtLastError();
  const status copied_sync = copy(synced_rows, src_rows);
  const cudaError_t seen = cudaGetLastError();  // the caller's own check, as check_launch makes it
  const cudaError_t cleared = cudaGetLastError();
  CHECK(pending != cudaSuccess);
  CHECK(std::string(filled ? "ok" : filled.error().message()) == "ok");
  CHECK(std::string(copied ? "ok" : copied.error().message()) == "ok");
  CHECK(std::string(copied_sync ? "ok" : copied_sync.error().message()) == "ok");
  CHECK(after_fill == pending);  // still the caller's, neither cleared nor replaced
  CHECK(after_copy == pending);
  CHECK(seen == pending);
  CHECK(cleared == cudaSuccess);
  REQUIRE_OK(s.synchronize());
  CHECK(test::read_back(target.view()) == std::vector<int>(1000, 7));
  for (const auto& rows : {dst_rows, synced_rows}) {
    std::vector<float> back(40 * 48);
    REQUIRE_OK(copy(span(back), rows));
    CHECK(std::memcmp(back.data(), pattern.data(), pattern.size() * sizeof(float)) == 0);  // bits: NaNs compare unequal
  }
}
