// SPDX-License-Identifier: MIT
// cudamem views as cuda::std::mdspan and cuda::std::span and back, on the host: element (r, c) of the mdspan must be
// the element the pitched view names, submdspan must keep the pitch, and every refusal names its rule. Device views
// at made-up addresses check the conversions that never touch memory. Kernels are in tests/gpu/interop.cu.
#include <cudamem/cudamem.hpp>
#include <cudamem/interop/mdspan.hpp>

#include "catch.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

using namespace cudamem;

namespace {
bool contains(const error& e, const char* text) { return std::string(e.message()).find(text) != std::string::npos; }

// Distinct values: element i holds i * 3 + 1.
std::vector<int> counting(std::size_t count) {
  std::vector<int> cells(count);
  for (std::size_t i = 0; i < count; ++i) cells[i] = static_cast<int>(i * 3 + 1);
  return cells;
}
}  // namespace

TEST_CASE("a span is a 1D mdspan over the same elements", "[mdspan]") {
  auto cells = counting(6);
  const auto md = to_mdspan(span(cells));
  static_assert(decltype(md)::rank() == 1);
  REQUIRE(md.extent(0) == 6);
  CHECK(md.data_handle() == cells.data());
  for (std::size_t i = 0; i < 6; ++i) CHECK(md(i) == cells[i]);

  auto back = to_span<host>(md);
  REQUIRE(back);
  CHECK(back->data().get() == cells.data());
  CHECK(back->size() == 6);
}

TEST_CASE("pitched rows are a 2D mdspan whose element (r, c) is the view's", "[mdspan]") {
  auto cells = counting(4 * 8);
  auto rows = make_pitched(host_ptr<int>(cells.data()), 5, 4, 8 * sizeof(int));
  REQUIRE(rows);
  auto md = to_mdspan(*rows);
  REQUIRE(md);
  CHECK((md->extent(0) == 4 && md->extent(1) == 5));
  CHECK((md->stride(0) == 8 && md->stride(1) == 1));
  for (std::size_t r = 0; r < 4; ++r)
    for (std::size_t c = 0; c < 5; ++c) CHECK((*md)(r, c) == (*rows)(r, c));

  SECTION("submdspan keeps the pitch, and converts back to the same rectangle as subspan") {
    auto corner = cuda::std::submdspan(*md, cuda::std::pair<std::size_t, std::size_t>{1, 3},
                                       cuda::std::pair<std::size_t, std::size_t>{2, 5});
    CHECK((corner.extent(0) == 2 && corner.extent(1) == 3 && corner.stride(0) == 8));
    auto back = to_pitched_span<host>(corner);
    REQUIRE(back);
    auto expected = rows->subspan(1, 2, 2, 3);
    REQUIRE(expected);
    CHECK(back->data() == expected->data());
    CHECK((back->width() == 3 && back->height() == 2 && back->pitch_bytes() == 8 * sizeof(int)));
    CHECK((*back)(1, 2) == cells[2 * 8 + 4]);
  }
  SECTION("one column of it is a strided 1D mdspan, which is no span") {
    auto column = cuda::std::submdspan(*md, cuda::std::full_extent, 3);
    CHECK(column(2) == cells[2 * 8 + 3]);
    auto refused = to_span<host>(column);
    REQUIRE(!refused);
    CHECK(refused.error().code() == errc::invalid_argument);
    CHECK(contains(refused.error(), "to_span: the columns are 8 elements apart, not adjacent"));
  }
  SECTION("one row of it is a span") {
    auto row = cuda::std::submdspan(*md, 2, cuda::std::full_extent);
    auto back = to_span<host>(row);
    REQUIRE(back);
    CHECK(back->data().get() == cells.data() + 16);
    CHECK(back->size() == 5);
  }
}

TEST_CASE("a pitch that is no whole number of elements has no mdspan", "[mdspan]") {
  struct rgb {
    float r, g, b;
  };
  // 12-byte elements in rows padded to 64 bytes: allowed for a pitched view (alignof is 4), not for strides.
  const host_pitched_span<rgb> rows(host_ptr<rgb>(reinterpret_cast<rgb*>(0x1000)), 5, 3, 64);
  auto refused = to_mdspan(rows);
  REQUIRE(!refused);
  CHECK(refused.error().code() == errc::invalid_argument);
  CHECK(contains(refused.error(), "to_mdspan: pitch (64 bytes) is not a multiple of the element's size (12)"));

  const host_pitched_span<rgb> whole(host_ptr<rgb>(reinterpret_cast<rgb*>(0x1000)), 5, 3, 72);
  auto allowed = to_mdspan(whole);
  REQUIRE(allowed);
  CHECK(allowed->stride(0) == 6);
}

TEST_CASE("an empty pitched view is an empty mdspan", "[mdspan]") {
  auto md = to_mdspan(host_pitched_span<float>());
  REQUIRE(md);
  CHECK(md->size() == 0);
}

TEST_CASE("mdspans of device memory go back with the kind and device the caller names", "[mdspan]") {
  auto* address = reinterpret_cast<float*>(0x80000);
  const device_pitched_span<float> rows(device_ptr<float>(address, device_id(2)), 16, 8, 128);
  auto md = to_mdspan(rows);
  REQUIRE(md);
  auto back = to_pitched_span<device>(*md, device_id(2));
  REQUIRE(back);
  CHECK(back->data() == rows.data());
  CHECK((back->width() == 16 && back->height() == 8 && back->pitch_bytes() == 128));

  auto flat = to_span<managed>(to_mdspan(make_span<managed>(address, 10, device_id(1))), device_id(1));
  REQUIRE(flat);
  CHECK(flat->device() == device_id(1));
}

TEST_CASE("mdspans that are no pitched rows are refused", "[mdspan]") {
  std::vector<float> cells(64);
  using extents = cuda::std::dextents<std::size_t, 2>;
  const auto strided = [&](std::size_t rows, std::size_t columns, std::size_t row_stride, std::size_t column_stride) {
    return cuda::std::mdspan<float, extents, cuda::std::layout_stride>(
        cells.data(), cuda::std::layout_stride::mapping<extents>(
                          extents(rows, columns), cuda::std::array<std::size_t, 2>{row_stride, column_stride}));
  };
  SECTION("columns apart (a transposed or column-major view)") {
    auto refused = to_pitched_span<host>(strided(3, 4, 1, 3));
    REQUIRE(!refused);
    CHECK(contains(refused.error(), "to_pitched_span: the columns are 3 elements apart, not adjacent"));
    const cuda::std::mdspan<float, extents, cuda::std::layout_left> column_major(cells.data(), 3, 4);
    CHECK(!to_pitched_span<host>(column_major));
  }
  SECTION("rows that overlap") {
    auto refused = to_pitched_span<host>(strided(3, 4, 2, 1));
    REQUIRE(!refused);
    CHECK(refused.error().code() == errc::invalid_argument);
    CHECK(contains(refused.error(), "to_pitched_span: pitch (8 bytes) is less than a row"));
  }
  SECTION("layout_right and a single row are accepted") {
    const cuda::std::mdspan<float, extents> compact(cells.data(), 3, 4);
    auto rows = to_pitched_span<pinned>(compact);
    REQUIRE(rows);
    CHECK(rows->pitch_bytes() == 4 * sizeof(float));
    auto single = to_pitched_span<host>(strided(1, 4, 1000, 1));  // a lone row's stride reaches nothing
    REQUIRE(single);
    CHECK(single->pitch_bytes() == 4 * sizeof(float));
  }
}

TEST_CASE("cuda::std::span converts both ways, the caller naming the kind", "[mdspan]") {
  auto cells = counting(5);
  const cuda::std::span<int> common = to_cuda_span(span(cells));
  CHECK(common.data() == cells.data());
  CHECK(common.size() == 5);

  const host_span<int> back = from_cuda_span<host>(common);
  CHECK(back.data().get() == cells.data());
  CHECK(back.size() == 5);
  CHECK(back.device() == device_id::host());

  const cuda::std::span<const int, 3> fixed(cells.data(), 3);
  const device_span<const int> on_device = from_cuda_span<device>(fixed, device_id(3));
  CHECK(on_device.size() == 3);
  CHECK(on_device.device() == device_id(3));
}
