// SPDX-License-Identifier: MIT
// Pointers, spans, host buffers, and every check a copy makes before CUDA is called. None of this
// needs a device: the device addresses below are never dereferenced.
#include <cudamem/cudamem.hpp>

#include "catch.hpp"
#include "engine.hpp"

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
  REQUIRE(fill_bytes(span(dst), 0xff));
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

  // CuPy's MemoryPointer names, each restricted to the kinds its name promises, each reporting
  // under its own name.
  std::vector<int> back(6, 0);
  REQUIRE(copy_from_host(span(back), span(src)));
  CHECK(back == src);
  REQUIRE(copy_to_host(span(dst), span(src)));
  CHECK(dst == src);
  CHECK(std::string(copy_to_host(span(shorter), span(src)).error().message()).starts_with("copy_to_host: "));
  CHECK(std::string(fill_bytes(make_host_span(static_cast<int*>(nullptr), 3), 1).error().message())
            .starts_with("fill_bytes: "));
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
  auto owned = *stream::adopt(reinterpret_cast<cudaStream_t>(std::uintptr_t{0x1234}), device_id(0));
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
  REQUIRE(bytes);
  CHECK(bytes->size() == 2 * sizeof(float));
  std::vector<std::byte> raw(bytes->size());
  REQUIRE(copy(span(raw), *bytes));
  float back[2] = {};
  std::memcpy(back, raw.data(), sizeof back);
  CHECK(back[1] == 1.0f);
}

namespace {
template <class D, class S>
concept copyable_to_host = requires(const D& d, const S& s) { copy_to_host(d, s); };
template <class D, class S>
concept copyable_from_device = requires(const D& d, const S& s) { copy_from_device(d, s); };
template <class D, class S>
concept copyable_from_host = requires(const D& d, const S& s) { copy_from_host(d, s); };
}  // namespace

TEST_CASE("CuPy's named copies take only the kinds their names promise", "[copy]") {
  STATIC_REQUIRE(copyable_to_host<pinned_span<int>, device_span<int>>);
  STATIC_REQUIRE(copyable_to_host<managed_span<int>, device_span<int>>);
  // The refused kinds still resolve, to a body whose static_assert names the form to call instead (the compile_fail
  // case copy_to_host_into_device checks the message): the rule itself is what refuses them.
  using detail::copy_allowed;
  using detail::copy_rule;
  STATIC_REQUIRE_FALSE(copy_allowed<copy_rule::to_host, device_span<int>, pinned_span<int>>);
  STATIC_REQUIRE(copyable_from_device<host_span<int>, device_span<const int>>);
  STATIC_REQUIRE(copyable_from_device<device_span<int>, managed_span<int>>);
  STATIC_REQUIRE_FALSE(copy_allowed<copy_rule::from_device, device_span<int>, pinned_span<int>>);
  STATIC_REQUIRE(copyable_from_host<device_span<int>, pinned_span<int>>);
  STATIC_REQUIRE_FALSE(copy_allowed<copy_rule::from_host, device_span<int>, device_span<int>>);
}

TEST_CASE("ptr ordering is consistent with equality and usable in constant expressions", "[ptr]") {
  static int cells[4] = {};
  constexpr host_ptr<int> a(cells);
  constexpr host_ptr<int> b(cells + 2);
  STATIC_REQUIRE(a < b);
  STATIC_REQUIRE(a <= b);
  STATIC_REQUIRE(b > a);
  STATIC_REQUIRE(b >= a);
  STATIC_REQUIRE(a <= a);
  STATIC_REQUIRE_FALSE(a < a);
  // Same address, different device: not equal, so ordered one way.
  auto p = device_ptr<int>(reinterpret_cast<int*>(std::uintptr_t{0x1000}), device_id(0));
  auto q = device_ptr<int>(reinterpret_cast<int*>(std::uintptr_t{0x1000}), device_id(1));
  CHECK(p != q);
  CHECK(p < q);
  CHECK_FALSE(q < p);
  CHECK(q >= p);
}

TEST_CASE("slicing keeps a null view null and never steps backwards", "[span]") {
  const auto null_view = make_host_span(static_cast<int*>(nullptr), 8);
  auto tail = null_view.subspan(4);
  REQUIRE(tail);
  CHECK(tail->data().get() == nullptr);
  CHECK(tail->size() == 4);
  CHECK(null_view.last(2)->data().get() == nullptr);
  std::vector<int> dst(4, 7);
  auto refused = copy(span(dst), *tail);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code() == errc::invalid_argument);
  CHECK(dst == std::vector<int>(4, 7));

  // A malformed view claiming more elements than pointer arithmetic can step: an offset past
  // PTRDIFF_MAX bytes must be refused, not wrap to an address before the view.
  const std::size_t huge = std::numeric_limits<std::size_t>::max() / sizeof(std::uint64_t);
  const auto wide = fake_device_span<std::uint64_t>(0x100000, huge);
  const std::size_t beyond = static_cast<std::size_t>(PTRDIFF_MAX) / sizeof(std::uint64_t) + 1;
  auto slice = wide.subspan(beyond, 1);
  REQUIRE_FALSE(slice);
  CHECK(slice.error().code() == errc::size_overflow);
  CHECK(wide.subspan(16, 1)->data().get() == reinterpret_cast<std::uint64_t*>(std::uintptr_t{0x100000} + 128));

  std::vector<int> v{1, 2, 3, 4};
  auto inner = span(v).subspan_unchecked(1, 2);
  CHECK(inner.size() == 2);
  CHECK(inner[0] == 2);
}

TEST_CASE("as_bytes refuses a view whose byte count does not fit", "[span]") {
  const auto too_big = fake_device_span<std::uint32_t>(0x1000, std::numeric_limits<std::size_t>::max() / 2);
  auto bytes = as_bytes(too_big);
  REQUIRE_FALSE(bytes);
  CHECK(bytes.error().code() == errc::size_overflow);
  CHECK(contains(bytes.error(), "as_bytes"));
  CHECK(as_writable_bytes(too_big).error().code() == errc::size_overflow);
  CHECK(as_bytes(fake_device_span<std::uint32_t>(0x1000, 3))->size() == 12);
}

namespace {
struct alignas(256) wide_cell {
  unsigned char bytes[256];
};
template <class B>
concept writable_through = requires(B& b) { fill_bytes(b, 0); };
template <class B>
concept stream_copyable_from = requires(B&& b, device_span<int> d, stream_ref s) { copy(d, std::forward<B>(b), s); };
}  // namespace

TEST_CASE("host buffers honour the element type's alignment", "[buffer]") {
  auto cells = host_buffer<wide_cell>::allocate(3);
  REQUIRE(cells);
  CHECK(reinterpret_cast<std::uintptr_t>(cells->data().get()) % 256 == 0);
  host_resource plain;
  auto page = plain.allocate(stream_ref(), 100, 4096);
  REQUIRE(page);
  CHECK(reinterpret_cast<std::uintptr_t>(*page) % 4096 == 0);
  plain.deallocate(stream_ref(), *page, 100, 4096);
  CHECK(plain.allocate(stream_ref(), 8, 3).error().code() == errc::invalid_argument);
  CHECK(device_malloc_resource().allocate(stream_ref(), 8, 512).error().code() == errc::not_supported);
}

TEST_CASE("owners are deep-const and refuse temporaries where work is queued", "[buffer]") {
  using B = device_buffer<int>;
  STATIC_REQUIRE(std::is_same_v<decltype(std::declval<const B&>().view()), device_span<const int>>);
  STATIC_REQUIRE(std::is_same_v<decltype(std::declval<B&>().view()), device_span<int>>);
  STATIC_REQUIRE(std::is_same_v<decltype(std::declval<const B&>().data()), device_ptr<const int>>);
  STATIC_REQUIRE(std::is_same_v<decltype(std::declval<const host_buffer<int>&>()[0]), const int&>);
  STATIC_REQUIRE(std::is_convertible_v<const B&, device_span<const int>>);
  STATIC_REQUIRE_FALSE(std::is_convertible_v<const B&, device_span<int>>);
  STATIC_REQUIRE_FALSE(std::is_convertible_v<B&&, device_span<int>>);
  STATIC_REQUIRE_FALSE(std::is_convertible_v<B&&, device_span<const int>>);
  STATIC_REQUIRE(writable_through<B>);
  STATIC_REQUIRE(B::owns_memory);
  STATIC_REQUIRE(detail::temporary_owner<B>);
  STATIC_REQUIRE(detail::temporary_owner<const B>);
  STATIC_REQUIRE_FALSE(detail::temporary_owner<B&>);
  STATIC_REQUIRE_FALSE(detail::temporary_owner<device_span<int>>);
}

TEST_CASE("the engine checks 2D operands once for every kind", "[copy][2d]") {
  using detail::kind_id;
  using detail::operand;
  const auto host2d = [](void* p, std::size_t w, std::size_t h, std::size_t pitch) {
    return operand{p, w, h, pitch, device_id::host(), kind_id::host};
  };
  std::vector<int> a(40, 0);
  std::vector<int> b(40);
  for (int i = 0; i < 40; ++i) b[i] = i;
  // 3 x 4 ints out of rows of 10 into rows of 5: only the 3 leading elements of each row move.
  REQUIRE(engine::copy_sync(host2d(a.data(), 3, 4, 5 * sizeof(int)), host2d(b.data(), 3, 4, 10 * sizeof(int)),
                            sizeof(int), cudaMemcpyHostToHost, "copy"));
  for (int row = 0; row < 4; ++row)
    for (int col = 0; col < 5; ++col) CHECK(a[row * 5 + col] == (col < 3 ? row * 10 + col : 0));

  // A 1D operand of as many elements reads as contiguous rows.
  std::vector<int> flat(12, -1);
  REQUIRE(engine::copy_sync(host2d(flat.data(), 12, 1, 0), host2d(b.data(), 3, 4, 10 * sizeof(int)), sizeof(int),
                            cudaMemcpyHostToHost, "copy"));
  CHECK(flat[3] == 10);
  CHECK(flat[11] == 32);

  auto mismatch =
      engine::plan_copy(host2d(a.data(), 3, 4, 20), host2d(b.data(), 3, 5, 20), 4, cudaMemcpyHostToHost, "copy");
  REQUIRE_FALSE(mismatch);
  CHECK(std::string(mismatch.error().message()) == "copy: extents differ (dst 3 x 4, src 3 x 5)");
  auto short_pitch =
      engine::plan_copy(host2d(a.data(), 3, 4, 8), host2d(b.data(), 3, 4, 40), 4, cudaMemcpyHostToHost, "copy");
  REQUIRE_FALSE(short_pitch);
  CHECK(contains(short_pitch.error(), "dst pitch (8 bytes) is less than its row (12 bytes)"));
  // Rows interleaved within one allocation share no byte: bytes 0-7 and 8-15 of every 16.
  CHECK(engine::plan_copy(host2d(a.data(), 2, 4, 16), host2d(a.data() + 2, 2, 4, 16), 4, cudaMemcpyHostToHost, "copy"));
  // A footprint that would run past the end of the address space.
  auto wrap = engine::plan_fill(
      host2d(reinterpret_cast<void*>(std::uintptr_t{0x1000}), 4, std::numeric_limits<std::size_t>::max() / 64, 128), 4,
      0, "fill_bytes");
  REQUIRE_FALSE(wrap);
  CHECK(wrap.error().code() == errc::size_overflow);
  // Contiguous rows fold into one row (a single 1D CUDA call).
  auto folded = engine::plan_fill(host2d(a.data(), 5, 8, 20), 4, 0, "fill_bytes");
  REQUIRE(folded);
  CHECK(folded->dst.contiguous());
  std::vector<int> cleared(40, 5);
  REQUIRE(engine::fill_sync(host2d(cleared.data(), 2, 4, 40), 4, 0, "fill_bytes"));
  CHECK(cleared[0] == 0);
  CHECK(cleared[2] == 5);
  CHECK(cleared[10] == 0);
}
