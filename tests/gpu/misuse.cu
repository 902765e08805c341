// SPDX-License-Identifier: MIT
// The bad inputs a user will try: each returns an error naming the call and the problem, and
// changes nothing.
#include "common.cuh"

#include <limits>

using namespace cudamem;
using test::take;

namespace {
bool starts_with(const error& e, const std::string& prefix) { return std::string(e.message()).rfind(prefix, 0) == 0; }
}  // namespace

TEST_CASE("copies with differing extents write nothing", "[misuse]") {
  auto s = take(stream::create());
  auto dst = take(device_buffer<int>::allocate(100));
  auto src = take(device_buffer<int>::allocate(99));
  REQUIRE_OK(fill_bytes(dst, test::poison));
  REQUIRE_OK(fill_bytes(src, 1));
  auto sync = copy(dst, src);
  REQUIRE_FALSE(sync);
  CHECK(std::string(sync.error().message()) == "copy: extents differ (dst 100, src 99)");
  auto async = copy(dst, src, s);
  CHECK(async.error().code() == errc::extents_mismatch);
  auto named = copy_from_device(dst, src, s);
  CHECK(named.error().code() == errc::extents_mismatch);
  CHECK(starts_with(named.error(), "copy_from_device: extents differ"));
  REQUIRE_OK(s.synchronize());
  CHECK(test::all_bytes(test::read_back(dst.view()), test::poison));
}

TEST_CASE("slices out of range and null views are refused", "[misuse]") {
  auto d = take(device_buffer<float>::allocate(10));
  CHECK(d.view().subspan(5, 6).error().code() == errc::out_of_range);
  CHECK(d.view().first(11).error().code() == errc::out_of_range);
  std::vector<float> host_side(5, 1.0f);
  const device_span<float> null_view(device_ptr<float>(nullptr, device_id(0)), 5);
  auto refused = copy(null_view, span(host_side));
  REQUIRE_FALSE(refused);
  CHECK(std::string(refused.error().message()) == "copy: dst is null with 5 elements");
  CHECK(fill_bytes(null_view, 0).error().code() == errc::invalid_argument);
  CHECK(host_side == std::vector<float>(5, 1.0f));
}

TEST_CASE("sizes whose bytes overflow are refused before anything is allocated", "[misuse]") {
  const std::size_t huge = std::numeric_limits<std::size_t>::max() / 4;
  auto s = take(stream::create());
  CHECK(device_buffer<std::uint64_t>::allocate(huge).error().code() == errc::size_overflow);
  CHECK(device_buffer<std::uint64_t>::allocate(huge, s).error().code() == errc::size_overflow);
  CHECK(pinned_buffer<std::uint64_t>::allocate(huge).error().code() == errc::size_overflow);
  CHECK(managed_buffer<std::uint64_t>::allocate(huge).error().code() == errc::size_overflow);
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("an allocation larger than the device fails cleanly", "[misuse]") {
  const std::size_t too_big = std::size_t{1} << 50;  // 1 PiB
  auto s = take(stream::create());
  auto plain = device_buffer<std::byte>::allocate(too_big);
  REQUIRE_FALSE(plain);
  CHECK(plain.error().cuda_status() == cudaErrorMemoryAllocation);
  CHECK(starts_with(plain.error(), "buffer::allocate: cudaMalloc: cudaErrorMemoryAllocation"));
  CHECK(cudaGetLastError() == cudaSuccess);
  auto ordered = device_buffer<std::byte>::allocate(too_big, s);
  REQUIRE_FALSE(ordered);
  CHECK(starts_with(ordered.error(), "buffer::allocate: cudaMallocAsync"));
  CHECK(cudaGetLastError() == cudaSuccess);
  auto pinned_too_big = pinned_buffer<std::byte>::allocate(too_big);
  REQUIRE_FALSE(pinned_too_big);
  CHECK(starts_with(pinned_too_big.error(), "buffer::allocate: cudaMallocHost"));
  CHECK(cudaGetLastError() == cudaSuccess);
  // The context is intact: a normal allocation still works.
  auto fine = take(device_buffer<std::byte>::allocate(1024, s));
  REQUIRE_OK(fill_bytes(fine, 0, s));
  REQUIRE_OK(s.synchronize());
}

TEST_CASE("device ids out of range are refused everywhere", "[misuse]") {
  const int count = take(device_count());
  const device_id missing(count);
  const std::string expected = "device " + std::to_string(count) + " out of range";
  auto s = stream::create(missing);
  REQUIRE_FALSE(s);
  CHECK(s.error().code() == errc::out_of_range);
  CHECK(std::string(s.error().message()).find(expected) != std::string::npos);
  auto b = device_buffer<int>::allocate(10, missing);
  REQUIRE_FALSE(b);
  CHECK(b.error().code() == errc::out_of_range);
  CHECK(starts_with(b.error(), "buffer::allocate: " + expected));
  CHECK(managed_buffer<int>::allocate(10, device_id(-3)).error().code() == errc::out_of_range);
  CHECK(take(current_device()) == device_id(0));
}

TEST_CASE("moved-from buffers are empty and safe", "[misuse]") {
  auto a = take(device_buffer<int>::allocate(8));
  auto b = std::move(a);
  CHECK(a.empty());
  CHECK(a.data().get() == nullptr);
  REQUIRE_OK(copy(a, a.view()));  // empty to empty
  CHECK(copy(a, b).error().code() == errc::extents_mismatch);
  auto c = take(device_buffer<int>::allocate(8));
  REQUIRE_OK(fill_bytes(c, 9));
  REQUIRE_OK(copy(b, c));
  CHECK(test::all_bytes(test::read_back(b.view()), 9));
}

TEST_CASE("overlapping device copies are refused", "[misuse]") {
  auto d = take(device_buffer<int>::allocate(100));
  REQUIRE_OK(fill_bytes(d, 2));
  auto front = take(d.view().first(60));
  auto back = take(d.view().last(60));
  auto refused = copy(back, front);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code() == errc::overlap);
  CHECK(test::all_bytes(test::read_back(d.view()), 2));
  REQUIRE_OK(copy(take(d.view().first(50)), take(d.view().last(50))));  // touching, not overlapping
}

TEST_CASE("a failed release reaches the handler instead of throwing or aborting", "[misuse][release]") {
  static int calls = 0;
  static cudaError_t seen = cudaSuccess;
  const release_handler previous = set_release_handler(+[](const error& e) noexcept {
    ++calls;
    seen = e.cuda_status();
  });
  std::vector<int> values(1000, 1);
  {
    auto registration = take(host_register(span(values)));
    // Unregister behind the owner's back: its own cudaHostUnregister then fails.
    REQUIRE(cudaHostUnregister(values.data()) == cudaSuccess);
  }
  set_release_handler(previous);
  CHECK(calls == 1);
  CHECK(seen == cudaErrorHostMemoryNotRegistered);
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("results are assigned without warnings in -Werror nvcc builds", "[misuse]") {
  // nvcc warns about the move assignment of a [[nodiscard]] class; this file builds with -Werror.
  result<int> r = 1;
  result<int> q = error(errc::invalid_argument, "test", "failed");
  q = std::move(r);
  CHECK(*q == 1);
  q = result<int>(2);
  CHECK(*q == 2);
  status s;
  s = status(error(errc::invalid_argument, "test", "failed"));
  CHECK_FALSE(s);
}

TEST_CASE("a typed fill of a view misaligned for its element type is refused before the launch", "[misuse][fill]") {
  auto s = take(stream::create());
  auto storage = take(device_buffer<float>::allocate(65));
  REQUIRE_OK(fill_bytes(storage, test::poison));
  char* const base = reinterpret_cast<char*>(storage.data().get());
  // One byte off: every float store of the kernel would fault with cudaErrorMisalignedAddress, which is sticky.
  const auto off_by_one = make_span<device>(reinterpret_cast<float*>(base + 1), 64, device_id(0));
  const status refused = fill(off_by_one, 1.0f, s);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code() == errc::invalid_argument);
  CHECK(starts_with(refused.error(), "fill: the address "));
  CHECK(std::string(refused.error().message()).find("alignment (4 bytes)") != std::string::npos);
  // Aligned rows 6 bytes apart: the second row's floats are misaligned.
  const pitched_span<float, device> odd_pitch(device_ptr<float>(reinterpret_cast<float*>(base), device_id(0)), 1, 3, 6);
  const status refused_2d = fill(odd_pitch, 1.0f, s);
  REQUIRE_FALSE(refused_2d);
  CHECK(refused_2d.error().code() == errc::invalid_argument);
  CHECK(std::string(refused_2d.error().message()) ==
        "fill: the pitch (6 bytes) is not a multiple of the element's alignment (4 bytes)");
  REQUIRE_OK(s.synchronize());
  CHECK(cudaGetLastError() == cudaSuccess);
  CHECK(test::all_bytes(test::read_back(storage.view()), test::poison));  // nothing written
  // The context is intact: an aligned fill runs.
  REQUIRE_OK(fill(storage, 2.0f, s));
  REQUIRE_OK(s.synchronize());
  CHECK(test::read_back(storage.view()) == std::vector<float>(65, 2.0f));
}
