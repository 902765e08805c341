// Pointers, spans, host buffers, and every check a copy makes before CUDA is called. None of this
// needs a device: the device addresses below are never dereferenced.
#include <cudamem/cudamem.hpp>

#include "catch.hpp"

#include <array>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

using namespace cudamem;

namespace {
template <class T>
device_span<T> fake_device_span(std::uintptr_t address, std::size_t count, int ordinal = 0) {
  return device_span<T>(device_ptr<T>(reinterpret_cast<T*>(address), device_id(ordinal)), count);
}
bool contains(const error& e, const char* text) { return std::string(e.message()).find(text) != std::string::npos; }
}  // namespace

TEST_CASE("ptr arithmetic counts elements and keeps the device", "[ptr]") {
  auto p = device_ptr<double>(reinterpret_cast<double*>(std::uintptr_t{0x1000}), device_id(3));
  auto q = p + 5;
  CHECK(reinterpret_cast<std::uintptr_t>(q.get()) == 0x1000 + 5 * sizeof(double));
  CHECK(q.device() == device_id(3));
  CHECK(q - p == 5);
  CHECK(p < q);
  CHECK(q - 5 == p);
  auto r = q;
  --r;
  r -= 2;
  CHECK(r - p == 2);
  CHECK(r++ - p == 2);
  CHECK(r - p == 3);
  CHECK(device_ptr<double>(p.get(), device_id(1)) != p);
  CHECK_FALSE(device_ptr<int>());
  CHECK(static_cast<bool>(p));
}

TEST_CASE("host ptr dereferences on the host", "[ptr]") {
  int values[3] = {1, 2, 3};
  host_ptr<int> p(values);
  CHECK(*p == 1);
  CHECK(p[2] == 3);
  *(p + 1) = 20;
  CHECK(values[1] == 20);
  CHECK(p.device().is_host());
  pinned_ptr<int> pinned_view(values);
  host_ptr<const int> widened = pinned_view;
  CHECK(widened[1] == 20);
}

TEST_CASE("span views containers and arrays", "[span]") {
  std::vector<int> vec{1, 2, 3, 4, 5};
  span s(vec);
  STATIC_REQUIRE(std::is_same_v<decltype(s), host_span<int>>);
  CHECK(s.size() == 5);
  CHECK(s.size_bytes() == 5 * sizeof(int));
  CHECK(s[4] == 5);
  const std::vector<int>& cvec = vec;
  span cs(cvec);
  STATIC_REQUIRE(std::is_same_v<decltype(cs), host_span<const int>>);
  std::array<float, 4> arr{};
  CHECK(span(arr).size() == 4);
  double raw[7] = {};
  CHECK(span(raw).size() == 7);
  int sum = 0;
  for (int v : s) sum += v;
  CHECK(sum == 15);
  CHECK(make_host_span(vec.data(), 2).size() == 2);
}

TEST_CASE("span slicing is bounds-checked", "[span]") {
  std::vector<int> vec{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  const host_span<int> s(vec);

  auto mid = s.subspan(2, 3);
  REQUIRE(mid);
  CHECK(mid->size() == 3);
  CHECK((*mid)[0] == 2);
  auto tail = s.subspan(7);
  REQUIRE(tail);
  CHECK(tail->size() == 3);
  CHECK((*tail)[2] == 9);
  CHECK(s.subspan(10)->empty());
  CHECK(s.subspan(10, 0)->empty());
  CHECK(s.first(0)->empty());
  CHECK(s.first(10)->size() == 10);
  CHECK((*s.last(1))[0] == 9);

  auto past = s.subspan(8, 3);
  REQUIRE_FALSE(past);
  CHECK(past.error().code() == errc::out_of_range);
  CHECK(contains(past.error(), "span::subspan"));
  CHECK_FALSE(s.subspan(11));
  CHECK_FALSE(s.first(11));
  CHECK_FALSE(s.last(11));
  // offset + count would wrap around; must still be refused.
  CHECK_FALSE(s.subspan(2, std::numeric_limits<std::size_t>::max()));
  CHECK_FALSE(s.subspan(std::numeric_limits<std::size_t>::max(), 2));
}

TEST_CASE("host buffers allocate, move and free without a device", "[buffer]") {
  auto made = host_buffer<std::uint32_t>::allocate(1001);
  REQUIRE(made);
  host_buffer<std::uint32_t> a = std::move(*made);
  CHECK(made->empty());
  CHECK(a.size() == 1001);
  CHECK(reinterpret_cast<std::uintptr_t>(a.data().get()) % 64 == 0);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<std::uint32_t>(i * 7);
  host_buffer<std::uint32_t> b = std::move(a);
  CHECK(a.empty());
  CHECK(a.data().get() == nullptr);
  CHECK(b[1000] == 7000);
  b = host_buffer<std::uint32_t>();
  CHECK(b.empty());

  auto none = host_buffer<int>::allocate(0);
  REQUIRE(none);
  CHECK(none->empty());
  CHECK(none->data().get() == nullptr);
}

TEST_CASE("an allocation whose byte size overflows is refused before any call", "[buffer]") {
  const std::size_t too_many = std::numeric_limits<std::size_t>::max() / 2;
  auto h = host_buffer<std::uint64_t>::allocate(too_many);
  REQUIRE_FALSE(h);
  CHECK(h.error().code() == errc::size_overflow);
  CHECK(contains(h.error(), "buffer::allocate"));
  auto d = device_buffer<std::uint64_t>::allocate(too_many, stream_ref::legacy());
  REQUIRE_FALSE(d);
  CHECK(d.error().code() == errc::size_overflow);
}

TEST_CASE("pageable copies and fills run on the host and check everything", "[copy]") {
  std::vector<int> src{1, 2, 3, 4, 5, 6};
  std::vector<int> dst(6, -1);
  REQUIRE(copy(span(dst), span(src)));
  CHECK(dst == src);

  REQUIRE(fill_bytes(span(dst), 0));
  CHECK(dst == std::vector<int>(6, 0));
  REQUIRE(span(dst).memset(0xff));
  CHECK(dst == std::vector<int>(6, -1));

  std::vector<int> shorter(5, 9);
  auto mismatch = copy(span(shorter), span(src));
  REQUIRE_FALSE(mismatch);
  CHECK(mismatch.error().code() == errc::extents_mismatch);
  CHECK(std::string(mismatch.error().message()) == "copy: extents differ (dst 5, src 6)");
  CHECK(shorter == std::vector<int>(5, 9));

  auto overlapping = copy(*span(src).subspan(0, 4), *span(src).subspan(2, 4));
  REQUIRE_FALSE(overlapping);
  CHECK(overlapping.error().code() == errc::overlap);
  CHECK(src == std::vector<int>{1, 2, 3, 4, 5, 6});

  auto null_src = copy(span(dst), make_host_span(static_cast<const int*>(nullptr), 6));
  REQUIRE_FALSE(null_src);
  CHECK(null_src.error().code() == errc::invalid_argument);
  CHECK(contains(null_src.error(), "src is null"));
  CHECK(fill_bytes(make_host_span(static_cast<int*>(nullptr), 0), 1));
  CHECK_FALSE(fill_bytes(make_host_span(static_cast<int*>(nullptr), 3), 1));

  // Members read like CuPy's MemoryPointer.
  std::vector<int> back(6, 0);
  REQUIRE(span(back).copy_from(span(src)));
  CHECK(back == src);
  REQUIRE(span(src).copy_to(span(dst)));
  CHECK(dst == src);
}

TEST_CASE("copies of device spans are checked before CUDA is called", "[copy]") {
  auto a = fake_device_span<float>(0x10000, 100);
  auto b = fake_device_span<float>(0x20000, 99);
  auto mismatch = copy(a, b);
  REQUIRE_FALSE(mismatch);
  CHECK(std::string(mismatch.error().message()) == "copy: extents differ (dst 100, src 99)");
  CHECK(copy(a, b, stream_ref()).error().code() == errc::extents_mismatch);

  auto huge = fake_device_span<double>(0x10000, std::numeric_limits<std::size_t>::max() / 4);
  auto overflow = copy(huge, huge, stream_ref());
  REQUIRE_FALSE(overflow);
  CHECK(overflow.error().code() == errc::size_overflow);
  CHECK(fill_bytes(huge, 0, stream_ref()).error().code() == errc::size_overflow);

  auto null_dst = copy(fake_device_span<float>(0, 99), b, stream_ref());
  REQUIRE_FALSE(null_dst);
  CHECK(null_dst.error().code() == errc::invalid_argument);
  CHECK(contains(null_dst.error(), "dst is null with 99 elements"));

  auto overlap = copy(*a.subspan(0, 50), *a.subspan(10, 50), stream_ref());
  REQUIRE_FALSE(overlap);
  CHECK(overlap.error().code() == errc::overlap);

  // Empty copies succeed without touching CUDA.
  CHECK(copy(device_span<float>(), device_span<const float>(), stream_ref()));
  CHECK(copy(device_span<float>(), device_span<const float>()));
}

TEST_CASE("a moved-from stream is refused by every stream-ordered operation", "[stream]") {
  CHECK(stream::adopt(cudaStreamLegacy, device_id(0)).error().code() == errc::invalid_argument);
  auto owned = std::move(*stream::adopt(reinterpret_cast<cudaStream_t>(std::uintptr_t{0x1234}), device_id(0)));
  REQUIRE(owned.valid());
  stream taker = std::move(owned);
  CHECK_FALSE(owned.valid());
  CHECK_FALSE(owned.ref().valid());
  // Hand the fake handle back so that nothing tries to destroy it.
  CHECK(taker.release() == reinterpret_cast<cudaStream_t>(std::uintptr_t{0x1234}));
  CHECK_FALSE(taker.valid());

  auto a = fake_device_span<int>(0x10000, 4);
  auto b = fake_device_span<int>(0x20000, 4);
  auto copied = copy(a, b, owned);
  REQUIRE_FALSE(copied);
  CHECK(copied.error().code() == errc::invalid_argument);
  CHECK(std::string(copied.error().message()) == "copy: the stream was moved from");
  CHECK(fill_bytes(a, 0, owned).error().code() == errc::invalid_argument);
  CHECK(owned.synchronize().error().code() == errc::invalid_argument);
  CHECK(owned.ready().error().code() == errc::invalid_argument);
  CHECK(device_buffer<int>::allocate(4, owned).error().code() == errc::invalid_argument);
  CHECK(stream_ref().valid());
  CHECK(stream_ref::legacy() == stream_ref());
}

TEST_CASE("unqualified calls on std::byte views do not collide with std::copy", "[copy]") {
  std::vector<std::byte> a(8, std::byte{1});
  std::vector<std::byte> b(8, std::byte{2});
  host_span<std::byte> sa(a);
  host_span<std::byte> sb(b);
  REQUIRE(copy(sa, sb));  // found by ordinary lookup; std::copy would need iterators
  CHECK(a == b);
  REQUIRE(fill_bytes(sa, 3));
  CHECK(a == std::vector<std::byte>(8, std::byte{3}));
  std::vector<float> f(2, 1.0f);
  auto bytes = as_bytes(span(f));
  CHECK(bytes.size() == 2 * sizeof(float));
  std::vector<std::byte> raw(bytes.size());
  REQUIRE(copy(span(raw), bytes));
  float back[2] = {};
  std::memcpy(back, raw.data(), sizeof back);
  CHECK(back[1] == 1.0f);
}
