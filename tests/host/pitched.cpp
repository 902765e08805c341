// SPDX-License-Identifier: MIT
// Pitched 2D views and buffers without a device: indexing, slicing, the pitch rules, conversions,
// pageable 2D copies and fills (done with memcpy and memset), and every check a 2D copy makes
// before CUDA is called. The device addresses below are never dereferenced.
#include <cudamem/cudamem.hpp>

#include "catch.hpp"
#include "engine.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

using namespace cudamem;

namespace {
bool contains(const error& e, const char* text) { return std::string(e.message()).find(text) != std::string::npos; }

std::uintptr_t address_of(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

template <class T>
device_pitched_span<T> fake_device_rows(std::uintptr_t address, std::size_t width, std::size_t height,
                                        std::size_t pitch, int ordinal = 0) {
  return {device_ptr<T>(reinterpret_cast<T*>(address), device_id(ordinal)), width, height, pitch};
}

// Distinct values in every element of `cells`, from `first` on.
std::vector<int> counting(std::size_t count, int first) {
  std::vector<int> cells(count);
  for (std::size_t i = 0; i < count; ++i) cells[i] = first + static_cast<int>(i);
  return cells;
}

constexpr int poison = -7;
}  // namespace

TEST_CASE("a pitched view addresses rows by the pitch in bytes", "[pitched]") {
  // Rows of 5 ints, 9 ints apart.
  std::vector<int> cells = counting(9 * 4, 0);
  const auto view = make_pitched(host_ptr<int>(cells.data()), 5, 4, 9 * sizeof(int));
  REQUIRE(view);
  STATIC_REQUIRE(std::is_same_v<std::remove_cvref_t<decltype(*view)>, host_pitched_span<int>>);
  STATIC_REQUIRE(std::is_trivially_copyable_v<device_pitched_span<double>>);
  STATIC_REQUIRE(std::is_trivially_copyable_v<pinned_pitched_span<const int>>);
  CHECK(view->width() == 5);
  CHECK(view->height() == 4);
  CHECK(view->pitch_bytes() == 9 * sizeof(int));
  CHECK(view->size() == 20);
  CHECK_FALSE(view->empty());
  CHECK(view->device().is_host());
  for (std::size_t r = 0; r < 4; ++r)
    for (std::size_t c = 0; c < 5; ++c) CHECK(&(*view)(r, c) == &cells[r * 9 + c]);
  (*view)(3, 4) = 100;
  CHECK(cells[3 * 9 + 4] == 100);

  const host_span<int> row2 = view->row(2);
  CHECK(row2.size() == 5);
  CHECK(row2.data().get() == &cells[18]);
  CHECK(row2[4] == 22);

  // A pitch that is not a multiple of the element size still addresses by bytes.
  struct alignas(2) triple {
    std::uint16_t x, y, z;
  };
  STATIC_REQUIRE(sizeof(triple) == 6);
  std::vector<triple> odd(20);
  const auto odd_rows = make_pitched(host_ptr<triple>(odd.data()), 3, 4, 20);
  REQUIRE(odd_rows);
  CHECK(address_of(&(*odd_rows)(2, 1)) == address_of(odd.data()) + 2 * 20 + 6);

  const host_pitched_span<int> empty;
  CHECK(empty.empty());
  CHECK(empty.size() == 0);
  CHECK(host_pitched_span<int>(host_ptr<int>(cells.data()), 0, 3, 36).empty());
  // Class template argument deduction from a typed pointer.
  pitched_span deduced(pinned_ptr<const float>(nullptr), 2, 2, 8);
  STATIC_REQUIRE(std::is_same_v<decltype(deduced), pinned_pitched_span<const float>>);
}

TEST_CASE("pitched subspans are checked on the host and keep the pitch", "[pitched]") {
  std::vector<int> cells = counting(8 * 6, 0);
  const host_pitched_span<int> all(host_ptr<int>(cells.data()), 7, 6, 8 * sizeof(int));
  auto inner = all.subspan(1, 2, 3, 4);
  REQUIRE(inner);
  CHECK(inner->width() == 4);
  CHECK(inner->height() == 3);
  CHECK(inner->pitch_bytes() == all.pitch_bytes());
  CHECK((*inner)(0, 0) == 8 + 2);
  CHECK((*inner)(2, 3) == 3 * 8 + 5);
  CHECK(all.subspan_unchecked(1, 2, 3, 4).data() == inner->data());
  CHECK(all.subspan(0, 0, 6, 7)->data() == all.data());  // the whole view
  CHECK(all.subspan(6, 7, 0, 0)->empty());               // an empty corner is in range
  CHECK(all.subspan(2, 7, 4, 0)->empty());

  using corner = std::array<std::size_t, 4>;  // row, column, rows, columns
  for (auto [r, c, rows, cols] : {corner{0, 0, 7, 1}, corner{0, 0, 1, 8}, corner{5, 0, 2, 1}, corner{0, 6, 1, 2},
                                  corner{7, 0, 0, 0}, corner{0, 8, 0, 0}}) {
    auto outside = all.subspan(r, c, rows, cols);
    REQUIRE_FALSE(outside);
    CHECK(outside.error().code() == errc::out_of_range);
    CHECK(contains(outside.error(), "pitched_span::subspan: rows"));
    CHECK(contains(outside.error(), "a 7 x 6 view"));
  }
  // r + rows and c + cols would wrap around: still refused.
  const std::size_t huge = std::numeric_limits<std::size_t>::max();
  CHECK(all.subspan(2, 0, huge, 1).error().code() == errc::out_of_range);
  CHECK(all.subspan(0, 2, 1, huge).error().code() == errc::out_of_range);

  // A null view stays null, so copies still refuse it.
  const host_pitched_span<int> null_rows(host_ptr<int>(nullptr), 4, 4, 16);
  auto null_inner = null_rows.subspan(1, 1, 2, 2);
  REQUIRE(null_inner);
  CHECK(null_inner->data().get() == nullptr);
  std::vector<int> out(4, poison);
  auto refused = copy(span(out), *null_inner);
  REQUIRE_FALSE(refused);
  CHECK(contains(refused.error(), "src is null with 2 x 2 elements"));
  CHECK(out == std::vector<int>(4, poison));

  // A malformed view whose row offset no pointer can step is refused, not wrapped.
  const auto wide = fake_device_rows<int>(0x100000, 1, huge / 2, huge / 4);
  auto far = wide.subspan(3, 0, 1, 1);
  REQUIRE_FALSE(far);
  CHECK(far.error().code() == errc::size_overflow);
  CHECK(address_of(wide.subspan(1, 0, 1, 1)->data().get()) == 0x100000 + huge / 4);
}

TEST_CASE("make_pitched refuses pitches that break the row rules", "[pitched]") {
  const auto at = device_ptr<double>(reinterpret_cast<double*>(std::uintptr_t{0x10000}), device_id(0));
  auto misaligned = make_pitched(at, 4, 3, 36);
  REQUIRE_FALSE(misaligned);
  CHECK(misaligned.error().code() == errc::invalid_argument);
  CHECK(std::string(misaligned.error().message()) ==
        "make_pitched: pitch (36 bytes) is not a multiple of the element's alignment (8)");
  auto short_pitch = make_pitched(at, 4, 3, 24);
  REQUIRE_FALSE(short_pitch);
  CHECK(short_pitch.error().code() == errc::invalid_argument);
  CHECK(std::string(short_pitch.error().message()) ==
        "make_pitched: pitch (24 bytes) is less than a row (4 elements of 8 bytes)");
  CHECK_FALSE(make_pitched(at, 4, 1, 24));  // one row must fit its pitch too
  auto overflow = make_pitched(at, std::numeric_limits<std::size_t>::max() / 4, 2, 64);
  REQUIRE_FALSE(overflow);
  CHECK(overflow.error().code() == errc::size_overflow);
  auto past_the_end = make_pitched(at, 4, std::numeric_limits<std::size_t>::max() / 64, 64);
  REQUIRE_FALSE(past_the_end);
  CHECK(past_the_end.error().code() == errc::size_overflow);
  CHECK(contains(past_the_end.error(), "make_pitched"));

  CHECK(make_pitched(at, 4, 3, 32));       // rows exactly their pitch
  CHECK(make_pitched(at, 4, 3, 40));       // 8 bytes of padding
  CHECK(make_pitched(at, 4, 0, 0));        // no rows: no pitch needed
  CHECK(make_pitched(at, 0, 5, 0)->empty());

  std::vector<int> flat = counting(12, 1);
  auto grid = as_pitched(span(flat), 4, 3);
  REQUIRE(grid);
  CHECK(grid->pitch_bytes() == 4 * sizeof(int));
  CHECK((*grid)(2, 1) == 10);
  auto wrong = as_pitched(span(flat), 5, 3);
  REQUIRE_FALSE(wrong);
  CHECK(wrong.error().code() == errc::extents_mismatch);
  CHECK(std::string(wrong.error().message()) == "as_pitched: 5 x 3 elements do not match a span of 12");
  CHECK(as_pitched(span(flat), std::numeric_limits<std::size_t>::max(), 2).error().code() == errc::extents_mismatch);
}

namespace {
template <class From, class To>
constexpr bool converts = std::is_convertible_v<From, To>;
template <class B>
concept fillable = requires(B& b) { fill_bytes(b, 0); };
}  // namespace

TEST_CASE("pitched views and buffers convert only to add const or widen pinned to host", "[pitched]") {
  STATIC_REQUIRE(converts<pinned_pitched_span<int>, host_pitched_span<int>>);
  STATIC_REQUIRE(converts<pinned_pitched_span<int>, host_pitched_span<const int>>);
  STATIC_REQUIRE(converts<device_pitched_span<int>, device_pitched_span<const int>>);
  STATIC_REQUIRE_FALSE(converts<host_pitched_span<int>, pinned_pitched_span<int>>);
  STATIC_REQUIRE_FALSE(converts<device_pitched_span<const int>, device_pitched_span<int>>);
  STATIC_REQUIRE_FALSE(converts<device_pitched_span<int>, managed_pitched_span<int>>);
  STATIC_REQUIRE_FALSE(converts<device_pitched_span<int>, device_span<int>>);

  std::vector<int> cells = counting(12, 0);
  const pinned_pitched_span<int> pinned_rows(pinned_ptr<int>(cells.data()), 3, 3, 16);
  const host_pitched_span<const int> widened = pinned_rows;
  CHECK(widened.data().get() == cells.data());
  CHECK(widened.pitch_bytes() == 16);
  CHECK(widened(2, 2) == 10);

  using B = device_pitched_buffer<float>;
  STATIC_REQUIRE(std::is_same_v<decltype(std::declval<B&>().view()), device_pitched_span<float>>);
  STATIC_REQUIRE(std::is_same_v<decltype(std::declval<const B&>().view()), device_pitched_span<const float>>);
  STATIC_REQUIRE(std::is_same_v<decltype(std::declval<const B&>().data()), device_ptr<const float>>);
  STATIC_REQUIRE(converts<const B&, device_pitched_span<const float>>);
  STATIC_REQUIRE_FALSE(converts<const B&, device_pitched_span<float>>);
  STATIC_REQUIRE_FALSE(converts<B&&, device_pitched_span<float>>);
  STATIC_REQUIRE_FALSE(converts<B&&, device_pitched_span<const float>>);
  STATIC_REQUIRE_FALSE(std::is_copy_constructible_v<B>);
  STATIC_REQUIRE(std::is_nothrow_move_constructible_v<B>);
  STATIC_REQUIRE(fillable<B>);
  STATIC_REQUIRE(detail::temporary_owner<B>);
  STATIC_REQUIRE_FALSE(detail::temporary_owner<B&>);
  STATIC_REQUIRE_FALSE(detail::temporary_owner<device_pitched_span<float>>);
}

TEST_CASE("host pitched buffers pad rows to 512 bytes and move like buffers", "[pitched][buffer]") {
  for (std::size_t width : {1, 127, 128, 129, 300}) {
    auto made = host_pitched_buffer<float>::allocate(width, 3);
    REQUIRE(made);
    INFO("width " << width);
    CHECK(made->width() == width);
    CHECK(made->height() == 3);
    CHECK(made->pitch_bytes() % 512 == 0);
    CHECK(made->pitch_bytes() >= width * sizeof(float));
    CHECK(made->pitch_bytes() < width * sizeof(float) + 512);
    CHECK(address_of(made->data().get()) % 64 == 0);
    // Every element of every row is ours to write.
    auto rows = made->view();
    for (std::size_t r = 0; r < rows.height(); ++r)
      for (std::size_t c = 0; c < rows.width(); ++c) rows(r, c) = static_cast<float>(r * 1000 + c);
    CHECK(rows(2, width - 1) == static_cast<float>(2000 + width - 1));
  }
  auto pinned_rows = pinned_pitched_buffer<int>::allocate(0, 4);  // nothing to allocate: needs no device
  REQUIRE(pinned_rows);
  CHECK(pinned_rows->empty());
  CHECK(pinned_rows->data().get() == nullptr);

  auto a = *host_pitched_buffer<int>::allocate(10, 2);
  const void* first = a.data().get();
  auto b = std::move(a);
  CHECK(a.empty());
  CHECK(a.data().get() == nullptr);
  CHECK(a.width() == 0);
  CHECK(a.pitch_bytes() == 0);
  CHECK(b.data().get() == first);
  CHECK(b.width() == 10);
  b = host_pitched_buffer<int>();
  CHECK(b.empty());

  auto too_wide = host_pitched_buffer<std::uint64_t>::allocate(std::numeric_limits<std::size_t>::max() / 4, 1);
  REQUIRE_FALSE(too_wide);
  CHECK(too_wide.error().code() == errc::size_overflow);
  CHECK(contains(too_wide.error(), "pitched_buffer::allocate"));
  auto too_tall = host_pitched_buffer<char>::allocate(10, std::numeric_limits<std::size_t>::max() / 256);
  REQUIRE_FALSE(too_tall);
  CHECK(too_tall.error().code() == errc::size_overflow);
}

TEST_CASE("pageable 2D copies move the rows and leave the padding", "[pitched][copy]") {
  // 5 x 3 elements from rows 11 ints apart into rows 7 ints apart.
  const std::vector<int> source = counting(11 * 3, 1);
  std::vector<int> target(7 * 3, poison);
  const host_pitched_span<const int> from(host_ptr<const int>(source.data()), 5, 3, 11 * sizeof(int));
  const host_pitched_span<int> to(host_ptr<int>(target.data()), 5, 3, 7 * sizeof(int));
  REQUIRE(copy(to, from));
  for (std::size_t r = 0; r < 3; ++r)
    for (std::size_t c = 0; c < 7; ++c) CHECK(target[r * 7 + c] == (c < 5 ? source[r * 11 + c] : poison));

  // 1D <-> 2D: a span of as many elements reads and writes as contiguous rows.
  std::vector<int> flat(15, poison);
  REQUIRE(copy_to_host(span(flat), from));
  for (std::size_t i = 0; i < 15; ++i) CHECK(flat[i] == source[i / 5 * 11 + i % 5]);
  std::fill(target.begin(), target.end(), poison);
  REQUIRE(copy_from_host(to, span(std::as_const(flat))));
  for (std::size_t r = 0; r < 3; ++r)
    for (std::size_t c = 0; c < 7; ++c) CHECK(target[r * 7 + c] == (c < 5 ? flat[r * 5 + c] : poison));

  // A sub-view into another sub-view, between owners with the row rule.
  auto owner = *host_pitched_buffer<int>::allocate(9, 6);
  REQUIRE(fill_bytes(owner, 0xff));
  auto corner = owner.view().subspan(2, 3, 3, 4);
  REQUIRE(corner);
  REQUIRE(copy(*corner, *from.subspan(0, 1, 3, 4)));
  const auto& read_only = owner;
  for (std::size_t r = 0; r < 6; ++r)
    for (std::size_t c = 0; c < 9; ++c) {
      const bool inside = r >= 2 && r < 5 && c >= 3 && c < 7;
      CHECK(read_only.view()(r, c) == (inside ? source[(r - 2) * 11 + (c - 3) + 1] : -1));
    }

  // fill_bytes writes the rows only.
  std::vector<unsigned char> bytes(10 * 4, 0x33);
  const host_pitched_span<unsigned char> byte_rows(host_ptr<unsigned char>(bytes.data()), 6, 4, 10);
  REQUIRE(fill_bytes(byte_rows, 0));
  for (std::size_t i = 0; i < bytes.size(); ++i) CHECK(bytes[i] == (i % 10 < 6 ? 0 : 0x33));

  // copy_2d: the same with byte widths and raw pitches, as ported aclrtMemcpy2d code writes it.
  std::fill(target.begin(), target.end(), poison);
  REQUIRE(copy_2d(host_ptr<int>(target.data()), 7 * sizeof(int), host_ptr<const int>(source.data()), 11 * sizeof(int),
                  5 * sizeof(int), 3));
  for (std::size_t r = 0; r < 3; ++r)
    for (std::size_t c = 0; c < 7; ++c) CHECK(target[r * 7 + c] == (c < 5 ? source[r * 11 + c] : poison));
  // Zero rows or zero bytes: nothing to do, even from null.
  CHECK(copy_2d(host_ptr<int>(nullptr), 0, host_ptr<const int>(nullptr), 0, 0, 5));
  CHECK(copy_2d(host_ptr<int>(nullptr), 8, host_ptr<const int>(nullptr), 8, 8, 0));
}

TEST_CASE("2D copies refuse bad input with a clear error and write nothing", "[pitched][copy]") {
  const std::vector<int> source = counting(8 * 5, 1);
  std::vector<int> target(8 * 5, poison);
  const std::vector<int> untouched = target;
  const auto rows_of = [](auto* first, std::size_t width, std::size_t height, std::size_t pitch_ints) {
    using T = std::remove_pointer_t<decltype(first)>;
    return host_pitched_span<T>(host_ptr<T>(first), width, height, pitch_ints * sizeof(int));
  };

  auto taller = copy(rows_of(target.data(), 5, 3, 8), rows_of(source.data(), 5, 4, 8));
  REQUIRE_FALSE(taller);
  CHECK(taller.error().code() == errc::extents_mismatch);
  CHECK(std::string(taller.error().message()) == "copy: extents differ (dst 5 x 3, src 5 x 4)");

  auto flat_mismatch = copy(span(target).first(14).value(), rows_of(source.data(), 5, 3, 8));
  REQUIRE_FALSE(flat_mismatch);
  CHECK(flat_mismatch.error().code() == errc::extents_mismatch);

  auto short_pitch = copy(rows_of(target.data(), 5, 3, 4), rows_of(source.data(), 5, 3, 8));
  REQUIRE_FALSE(short_pitch);
  CHECK(short_pitch.error().code() == errc::invalid_argument);
  CHECK(std::string(short_pitch.error().message()) == "copy: dst pitch (16 bytes) is less than its row (20 bytes)");

  // Rows of one allocation that share bytes: bytes 16-19 are the end of dst row 0 and the start of src row 0.
  auto overlapping = copy(rows_of(target.data(), 5, 4, 8), rows_of(target.data() + 4, 5, 4, 8));
  REQUIRE_FALSE(overlapping);
  CHECK(overlapping.error().code() == errc::overlap);
  CHECK(std::string(overlapping.error().message()) ==
        "copy: source and destination overlap (rows of each share bytes)");

  auto null_dst = copy(rows_of(static_cast<int*>(nullptr), 5, 3, 8), rows_of(source.data(), 5, 3, 8));
  REQUIRE_FALSE(null_dst);
  CHECK(std::string(null_dst.error().message()) == "copy: dst is null with 5 x 3 elements");

  auto null_fill = fill_bytes(rows_of(static_cast<int*>(nullptr), 5, 3, 8), 0);
  REQUIRE_FALSE(null_fill);
  CHECK(contains(null_fill.error(), "fill_bytes: dst is null"));

  auto named = copy_to_host(rows_of(target.data(), 5, 2, 8), rows_of(source.data(), 5, 3, 8));
  REQUIRE_FALSE(named);
  CHECK(std::string(named.error().message()).starts_with("copy_to_host: extents differ"));

  auto wide_rows = copy_2d(host_ptr<int>(target.data()), 16, host_ptr<const int>(source.data()), 32, 20, 3);
  REQUIRE_FALSE(wide_rows);
  CHECK(std::string(wide_rows.error().message()) == "copy_2d: dst pitch (16 bytes) is less than its row (20 bytes)");
  // One row, as many: a row wider than its pitch is refused at every height (make_pitched's rule).
  auto wide_row = copy_2d(host_ptr<int>(target.data()), 16, host_ptr<const int>(source.data()), 32, 20, 1);
  REQUIRE_FALSE(wide_row);
  CHECK(std::string(wide_row.error().message()) == "copy_2d: dst pitch (16 bytes) is less than its row (20 bytes)");
  auto wide_src_row = copy_2d(host_ptr<int>(target.data()), 32, host_ptr<const int>(source.data()), 8, 20, 1);
  REQUIRE_FALSE(wide_src_row);
  CHECK(std::string(wide_src_row.error().message()) == "copy_2d: src pitch (8 bytes) is less than its row (20 bytes)");
  const host_pitched_span<int> one_short_row(host_ptr<int>(target.data()), 5, 1, 16);  // unchecked: 20 bytes in 16
  auto short_view = copy(one_short_row, rows_of(source.data(), 5, 1, 8));
  REQUIRE_FALSE(short_view);
  CHECK(std::string(short_view.error().message()) == "copy: dst pitch (16 bytes) is less than its row (20 bytes)");
  auto short_fill = fill_bytes(one_short_row, 0);
  REQUIRE_FALSE(short_fill);
  CHECK(std::string(short_fill.error().message()) ==
        "fill_bytes: dst pitch (16 bytes) is less than its row (20 bytes)");
  // A one-row view against many rows of as many elements keeps its own pitch rule (it is not read as a 1D span).
  const host_pitched_span<int> long_short_row(host_ptr<int>(target.data()), 12, 1, 16);
  auto reshaped = copy(long_short_row, rows_of(source.data(), 3, 4, 8));
  REQUIRE_FALSE(reshaped);
  CHECK(std::string(reshaped.error().message()) == "copy: dst pitch (16 bytes) is less than its row (48 bytes)");
  auto reshaped_src = copy(rows_of(target.data(), 3, 4, 8),
                           host_pitched_span<const int>(host_ptr<const int>(source.data()), 12, 1, 40));
  REQUIRE_FALSE(reshaped_src);
  CHECK(std::string(reshaped_src.error().message()) == "copy: src pitch (40 bytes) is less than its row (48 bytes)");

  auto overlap_2d = copy_2d(host_ptr<int>(target.data()), 32, host_ptr<const int>(target.data() + 2), 32, 12, 4);
  REQUIRE_FALSE(overlap_2d);
  CHECK(overlap_2d.error().code() == errc::overlap);
  CHECK(contains(overlap_2d.error(), "copy_2d: "));
  auto null_2d = copy_2d(host_ptr<int>(target.data()), 32, host_ptr<const int>(nullptr), 32, 12, 4);
  REQUIRE_FALSE(null_2d);
  CHECK(std::string(null_2d.error().message()) == "copy_2d: src is null with 12 x 4 elements");

  CHECK(target == untouched);
}

namespace {
// The reference for overlap: a byte map. Marks every byte of the `height` rows of `width` bytes that start at
// `dst` + i * `dpitch`, then looks for a marked byte in the rows from `src`, `spitch` apart.
bool rows_share_a_byte(std::size_t dst, std::size_t dpitch, std::size_t src, std::size_t spitch, std::size_t width,
                       std::size_t height) {
  if (width == 0 || height == 0) return false;
  std::vector<bool> written(std::max(dst + dpitch * (height - 1), src + spitch * (height - 1)) + width);
  for (std::size_t row = 0; row < height; ++row)
    for (std::size_t b = 0; b < width; ++b) written[dst + row * dpitch + b] = true;
  for (std::size_t row = 0; row < height; ++row)
    for (std::size_t b = 0; b < width; ++b)
      if (written[src + row * spitch + b]) return true;
  return false;
}
detail::operand byte_rows(unsigned char* first, std::size_t width, std::size_t height, std::size_t pitch) {
  return {first, width, height, pitch, device_id::host(), detail::kind_id::host};
}
}  // namespace

TEST_CASE("2D copies within one allocation are refused only where a byte is shared", "[pitched][copy][overlap]") {
  SECTION("the left half of an image onto its right half, and back") {
    std::vector<int> cells = counting(16 * 6, 1);
    const std::vector<int> before = cells;
    const host_pitched_span<int> image(host_ptr<int>(cells.data()), 16, 6, 16 * sizeof(int));
    REQUIRE(copy(*image.subspan(0, 8, 6, 8), *image.subspan(0, 0, 6, 8)));
    for (std::size_t i = 0; i < cells.size(); ++i) CHECK(cells[i] == before[i % 16 < 8 ? i : i - 8]);
    std::vector<int> other = before;
    const host_pitched_span<int> again(host_ptr<int>(other.data()), 16, 6, 16 * sizeof(int));
    REQUIRE(copy(*again.subspan(0, 0, 6, 8), *again.subspan(0, 8, 6, 8)));
    for (std::size_t i = 0; i < other.size(); ++i) CHECK(other[i] == before[i % 16 < 8 ? i + 8 : i]);
    // One column more, and the two halves share column 8 of every row.
    auto wider = copy(*image.subspan(0, 8, 6, 8), *image.subspan(0, 1, 6, 8));
    REQUIRE_FALSE(wider);
    CHECK(wider.error().code() == errc::overlap);
  }
  SECTION("interleaved columns, one pitch") {
    std::vector<int> cells = counting(2 * 9, 1);
    const std::vector<int> before = cells;
    // Odd columns from even ones: 4-byte rows 8 bytes apart.
    REQUIRE(copy_2d(host_ptr<int>(cells.data() + 1), 8, host_ptr<const int>(cells.data()), 8, 4, 9));
    for (std::size_t i = 0; i < cells.size(); ++i) CHECK(cells[i] == before[i - i % 2]);
    auto shifted = copy_2d(host_ptr<int>(cells.data() + 1), 8, host_ptr<const int>(cells.data()), 8, 5, 8);
    REQUIRE_FALSE(shifted);
    CHECK(shifted.error().code() == errc::overlap);
  }
  SECTION("different pitches, disjoint and overlapping") {
    std::vector<unsigned char> bytes(256);
    for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i);
    const std::vector<unsigned char> before = bytes;
    // dst rows at 0, 16, 32, 48; src rows at 4, 12, 20, 28: bytes 4-7 of every 8 against 0-3 of every 16.
    REQUIRE(engine::copy_sync(byte_rows(bytes.data(), 4, 4, 16), byte_rows(bytes.data() + 4, 4, 4, 8), 1,
                              cudaMemcpyHostToHost, "copy"));
    for (std::size_t i = 0; i < bytes.size(); ++i) {
      const bool written = i < 64 && i % 16 < 4;
      CHECK(bytes[i] == (written ? before[4 + i / 16 * 8 + i % 16] : before[i]));
    }
    // src rows 12 apart from byte 4: its row 1 (16-19) is dst's row 1.
    auto refused = engine::plan_copy(byte_rows(bytes.data(), 4, 4, 16), byte_rows(bytes.data() + 4, 4, 4, 12), 1,
                                     cudaMemcpyHostToHost, "copy");
    REQUIRE_FALSE(refused);
    CHECK(std::string(refused.error().message()) == "copy: source and destination overlap (rows of each share bytes)");
  }
  SECTION("a single shared byte at the end of a row") {
    std::vector<unsigned char> bytes(128);
    const auto plan = [&](std::size_t dst, std::size_t dpitch, std::size_t src, std::size_t spitch) {
      return engine::plan_copy(byte_rows(bytes.data() + dst, 6, 4, dpitch), byte_rows(bytes.data() + src, 6, 4, spitch),
                               1, cudaMemcpyHostToHost, "copy");
    };
    CHECK(plan(0, 16, 5, 16).error().code() == errc::overlap);  // byte 5: dst row 0's last, src row 0's first
    CHECK(plan(0, 16, 6, 16));
    CHECK(plan(5, 16, 0, 16).error().code() == errc::overlap);
    CHECK(plan(6, 16, 0, 16));
    CHECK(plan(0, 16, 11, 16).error().code() == errc::overlap);  // byte 16: src row 0's last, dst row 1's first
    CHECK(plan(0, 16, 10, 16));
    CHECK(plan(11, 16, 0, 16).error().code() == errc::overlap);
    CHECK(plan(10, 16, 0, 16));
    CHECK(plan(26, 16, 0, 7).error().code() == errc::overlap);  // byte 26: src row 3's last, dst row 0's first
    CHECK(plan(27, 16, 0, 7));
    CHECK(plan(0, 16, 37, 21).error().code() == errc::overlap);  // byte 37: dst row 2's last, src row 0's first
    CHECK(plan(0, 16, 38, 21));
  }
  SECTION("one row against many") {
    std::vector<unsigned char> bytes(64, 7);
    // Row 0 of src is row 1 of dst: with one row they are apart, with two they meet.
    REQUIRE(engine::copy_sync(byte_rows(bytes.data(), 8, 1, 16), byte_rows(bytes.data() + 16, 8, 1, 16), 1,
                              cudaMemcpyHostToHost, "copy"));
    CHECK(engine::plan_copy(byte_rows(bytes.data(), 8, 2, 16), byte_rows(bytes.data() + 16, 8, 2, 16), 1,
                            cudaMemcpyHostToHost, "copy")
              .error()
              .code() == errc::overlap);
    CHECK(engine::plan_copy(byte_rows(bytes.data(), 9, 1, 16), byte_rows(bytes.data() + 8, 9, 1, 16), 1,
                            cudaMemcpyHostToHost, "copy")
              .error()
              .code() == errc::overlap);
    // The same left-to-right copy as one row (a 1D copy) and as many.
    CHECK(engine::plan_copy(byte_rows(bytes.data() + 8, 8, 1, 16), byte_rows(bytes.data(), 8, 1, 16), 1,
                            cudaMemcpyHostToHost, "copy"));
    CHECK(engine::plan_copy(byte_rows(bytes.data() + 8, 8, 4, 16), byte_rows(bytes.data(), 8, 4, 16), 1,
                            cudaMemcpyHostToHost, "copy"));
  }
  SECTION("every small shape agrees with a byte map") {
    std::vector<unsigned char> bytes(256);
    std::size_t checked = 0, wrong = 0;
    std::string first_wrong;
    for (std::size_t width = 1; width <= 5; ++width)
      for (std::size_t height = 1; height <= 4; ++height)
        for (std::size_t dpitch = width; dpitch <= 9; ++dpitch)
          for (std::size_t spitch = width; spitch <= 9; ++spitch)
            for (std::size_t dst = 0; dst < 8; ++dst)
              for (std::size_t src = 0; src < 24; ++src) {
                const bool shared = rows_share_a_byte(dst, dpitch, src, spitch, width, height);
                const auto planned = engine::plan_copy(byte_rows(bytes.data() + dst, width, height, dpitch),
                                                       byte_rows(bytes.data() + src, width, height, spitch), 1,
                                                       cudaMemcpyHostToHost, "copy");
                ++checked;
                if (planned.has_value() != !shared || (!planned && planned.error() != errc::overlap)) {
                  if (wrong++ == 0)
                    first_wrong = "width " + std::to_string(width) + ", height " + std::to_string(height) + ", dst " +
                                  std::to_string(dst) + " pitch " + std::to_string(dpitch) + ", src " +
                                  std::to_string(src) + " pitch " + std::to_string(spitch);
                }
              }
    INFO(first_wrong);
    CHECK(checked > 100000);
    CHECK(wrong == 0);
  }
  SECTION("many rows: the rows decide, whatever the height") {
    // dst rows 2^20 bytes apart, src rows 2^20 - 1 apart from byte 2^20 - 1: src row j starts at (2^20 - 1)(j + 1),
    // dst row i at 2^20 i, and the two meet (gcd 1) only for j + 1 = 2^20, i = 2^20 - 1: the last row of each.
    // The same for 2^31: a footprint of 2^62 bytes (the addresses are made up; nothing is copied).
    const auto at = [](std::size_t offset) {
      return reinterpret_cast<unsigned char*>(std::uintptr_t{0x10000} + offset);
    };
    for (const std::size_t n : {std::size_t{1} << 20, std::size_t{1} << 31}) {
      const auto plan = [&](std::size_t rows) {
        return engine::plan_copy(byte_rows(at(0), 1, rows, n), byte_rows(at(n - 1), 1, rows, n - 1), 1,
                                 cudaMemcpyHostToHost, "copy");
      };
      CHECK(plan(n - 1));
      CHECK(plan(n).error().code() == errc::overlap);
      CHECK(plan(n + 5).error().code() == errc::overlap);
    }
    constexpr std::size_t n = std::size_t{1} << 20;
    // Rows 200 bytes apart at byte 0 (mod 200: bytes 0-9) and 100 apart from byte 50 (mod 100: 50-59): never.
    CHECK(engine::plan_copy(byte_rows(at(0), 10, n, 200), byte_rows(at(50), 10, n, 100), 1, cudaMemcpyHostToHost,
                            "copy"));
    CHECK(engine::plan_copy(byte_rows(at(50), 10, n, 100), byte_rows(at(0), 10, n, 200), 1, cudaMemcpyHostToHost,
                            "copy"));
  }
}

TEST_CASE("a one-row 2D operand follows the row rule, and 1D spans have no pitch", "[pitched][copy]") {
  std::vector<int> source = counting(12, 1);
  std::vector<int> target(12, poison);
  // A row that fits its pitch: one row of a view, or of copy_2d, copies as one contiguous row.
  REQUIRE(copy_2d(host_ptr<int>(target.data()), 20, host_ptr<const int>(source.data()), 20, 20, 1));
  CHECK(std::vector<int>(target.begin(), target.begin() + 6) == std::vector<int>{1, 2, 3, 4, 5, poison});
  const host_pitched_span<int> one_row(host_ptr<int>(target.data()), 12, 1, 64);
  REQUIRE(copy(one_row, span(std::as_const(source))));
  CHECK(target == source);
  // A one-row view reshapes to many rows of as many elements when its pitch holds its row.
  std::vector<int> grid(3 * 8, poison);
  const host_pitched_span<int> rows(host_ptr<int>(grid.data()), 4, 3, 8 * sizeof(int));
  REQUIRE(copy(rows, host_pitched_span<const int>(host_ptr<const int>(source.data()), 12, 1, 48)));
  for (std::size_t i = 0; i < grid.size(); ++i) CHECK(grid[i] == (i % 8 < 4 ? source[i / 8 * 4 + i % 8] : poison));
  // 1D spans: pitch 0 in the engine, never refused for it.
  std::fill(target.begin(), target.end(), poison);
  REQUIRE(copy(span(target), span(std::as_const(source))));
  CHECK(target == source);
  REQUIRE(fill_bytes(span(target), 0));
  CHECK(target == std::vector<int>(12, 0));
  REQUIRE(engine::copy_sync({target.data(), 12, 1, 0, device_id::host(), detail::kind_id::host},
                            {source.data(), 12, 1, 0, device_id::host(), detail::kind_id::host}, sizeof(int),
                            cudaMemcpyHostToHost, "copy"));
  CHECK(target == source);
}

TEST_CASE("2D copies of device views are checked before CUDA is called", "[pitched][copy]") {
  const auto a = fake_device_rows<float>(0x100000, 100, 8, 512);
  const auto b = fake_device_rows<float>(0x200000, 100, 9, 512);
  auto mismatch = copy(a, b, stream_ref());
  REQUIRE_FALSE(mismatch);
  CHECK(std::string(mismatch.error().message()) == "copy: extents differ (dst 100 x 8, src 100 x 9)");
  CHECK(copy(a, b).error().code() == errc::extents_mismatch);
  auto flat = device_span<float>(device_ptr<float>(reinterpret_cast<float*>(std::uintptr_t{0x300000}), device_id(0)),
                                 100 * 9 - 1);
  CHECK(copy(flat, b, stream_ref()).error().code() == errc::extents_mismatch);
  auto short_rows = copy(fake_device_rows<float>(0x100000, 100, 8, 256), *b.subspan(0, 0, 8, 100), stream_ref());
  REQUIRE_FALSE(short_rows);
  CHECK(contains(short_rows.error(), "dst pitch (256 bytes) is less than its row (400 bytes)"));
  auto overlap = copy(*a.subspan(0, 0, 4, 50), *a.subspan(2, 10, 4, 50), stream_ref());
  REQUIRE_FALSE(overlap);
  CHECK(overlap.error().code() == errc::overlap);
  auto typed = copy_2d(a.data(), 512, b.data(), 256, 400, 8, stream_ref());
  REQUIRE_FALSE(typed);
  CHECK(std::string(typed.error().message()) == "copy_2d: src pitch (256 bytes) is less than its row (400 bytes)");
  // Empty views copy nothing and need no device.
  CHECK(copy(*a.subspan(0, 0, 0, 100), *b.subspan(0, 0, 0, 100), stream_ref()));
  CHECK(copy(*a.subspan(0, 0, 8, 0), *b.subspan(1, 0, 8, 0)));
}

TEST_CASE("pitched allocations and 2D copies fail cleanly without a device", "[no_device][pitched]") {
  for (auto outcome : {device_pitched_buffer<int>::allocate(64, 4).error(),
                       device_pitched_buffer<int>::allocate(64, 4, stream_ref()).error(),
                       managed_pitched_buffer<int>::allocate(64, 4).error()}) {
    INFO(outcome.message());
    CHECK(outcome.code() == errc::cuda);
    CHECK(std::string(outcome.message()).starts_with("pitched_buffer::allocate: "));
  }
  std::vector<int> host_rows(64, poison);
  const auto device_rows = fake_device_rows<int>(0x100000, 8, 4, 64);
  auto copied = copy(host_pitched_span<int>(host_ptr<int>(host_rows.data()), 8, 4, 64), device_rows);
  REQUIRE_FALSE(copied);
  CHECK(copied.error().code() == errc::cuda);
  CHECK(host_rows == std::vector<int>(64, poison));
}
