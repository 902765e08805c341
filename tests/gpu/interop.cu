// SPDX-License-Identifier: MIT
// cudamem views as cuda::std::mdspan and cuda::std::span in kernels: a kernel writes pitched device rows through the
// mdspan (and through submdspan of it), the rows are read back with cudamem copies and checked against values
// computed here; views go to cuda::std types and back, on the host and inside kernels.
#include <cudamem/interop/mdspan.hpp>

#include "common.cuh"

#include <cstdint>
#include <utility>
#include <vector>

using namespace cudamem;
using test::take;

namespace {
using index_pair = cuda::std::pair<std::size_t, std::size_t>;

__host__ __device__ float code_of(std::size_t r, std::size_t c) { return static_cast<float>(r * 1000 + c); }

__global__ void write_codes(pitched_mdspan<float> rows) {
  const std::size_t c = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x, r = blockIdx.y;
  if (r < rows.extent(0) && c < rows.extent(1)) rows(r, c) = code_of(r, c);
}

// Negates the rectangle rows [r0, r1) x columns [c0, c1), taken with submdspan inside the kernel.
__global__ void negate_rectangle(pitched_mdspan<float> rows, index_pair row_range, index_pair column_range) {
  auto rectangle = cuda::std::submdspan(rows, row_range, column_range);
  const std::size_t c = threadIdx.x, r = blockIdx.x;
  if (r < rectangle.extent(0) && c < rectangle.extent(1)) rectangle(r, c) = -rectangle(r, c);
}

// Views arrive as cuda::std::span and cudamem span and are converted inside the kernel, both ways.
__global__ void scale_through_conversions(cuda::std::span<int> common, device_span<int> typed) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  const device_span<int> from_common = from_cuda_span<device>(common, typed.device());
  const auto as_md = to_mdspan(typed);
  if (i < from_common.size()) from_common[i] *= 3;
  if (i < as_md.extent(0)) as_md(i) += 1;
}

// The rows of `view` as a flat host vector, row after row.
std::vector<float> read_rows(pitched_span<const float, device> view) {
  std::vector<float> out(view.width() * view.height());
  REQUIRE_OK(copy(span(out), view));
  return out;
}
}  // namespace

TEST_CASE("a kernel writes pitched device rows through their mdspan", "[interop][mdspan]") {
  constexpr std::size_t width = 37, height = 11;
  auto rows = take(device_pitched_buffer<float>::allocate(width, height));
  REQUIRE(rows.pitch_bytes() > width * sizeof(float));  // the pitch must matter for the test to mean anything
  auto md = take(to_mdspan(rows.view()));
  REQUIRE(md.stride(0) == rows.pitch_bytes() / sizeof(float));

  write_codes<<<dim3(1, height), 64>>>(md);
  REQUIRE_OK(check_launch("write_codes"));
  auto back = read_rows(rows.view());
  std::size_t wrong = 0;
  for (std::size_t r = 0; r < height; ++r)
    for (std::size_t c = 0; c < width; ++c) wrong += back[r * width + c] != code_of(r, c);
  CHECK(wrong == 0);

  SECTION("submdspan in a kernel reaches exactly the rectangle") {
    negate_rectangle<<<3, 32>>>(md, index_pair{4, 7}, index_pair{10, 30});
    REQUIRE_OK(check_launch("negate_rectangle"));
    back = read_rows(rows.view());
    wrong = 0;
    for (std::size_t r = 0; r < height; ++r)
      for (std::size_t c = 0; c < width; ++c) {
        const bool inside = r >= 4 && r < 7 && c >= 10 && c < 30;
        wrong += back[r * width + c] != (inside ? -code_of(r, c) : code_of(r, c));
      }
    CHECK(wrong == 0);
  }
  SECTION("submdspan on the host converts back to the rectangle subspan gives") {
    auto rectangle = cuda::std::submdspan(md, index_pair{2, 9}, index_pair{5, 21});
    auto view = take(to_pitched_span<device>(rectangle, rows.device()));
    auto expected = take(rows.view().subspan(2, 5, 7, 16));
    CHECK(view.data() == expected.data());
    CHECK((view.width() == 16 && view.height() == 7 && view.pitch_bytes() == rows.pitch_bytes()));
    auto values = read_rows(view);
    std::size_t rectangle_wrong = 0;
    for (std::size_t r = 0; r < 7; ++r)
      for (std::size_t c = 0; c < 16; ++c) rectangle_wrong += values[r * 16 + c] != code_of(r + 2, c + 5);
    CHECK(rectangle_wrong == 0);
  }
  SECTION("the whole mdspan converts back to the buffer's view") {
    auto view = take(to_pitched_span<device>(md, rows.device()));
    CHECK(view.data() == rows.data());
    CHECK((view.width() == width && view.height() == height && view.pitch_bytes() == rows.pitch_bytes()));
  }
}

TEST_CASE("spans cross to cuda::std::span and mdspan and back, in kernels too", "[interop][mdspan]") {
  constexpr std::size_t count = 1000;
  std::vector<int> values(count);
  for (std::size_t i = 0; i < count; ++i) values[i] = static_cast<int>(i) - 300;
  auto on_device = take(device_buffer<int>::allocate(count));
  REQUIRE_OK(copy(on_device, span(values)));

  const cuda::std::span<int> common = to_cuda_span(on_device.view());
  CHECK(common.data() == on_device.data().get());
  const device_span<int> back = from_cuda_span<device>(common, on_device.device());
  CHECK(back.data() == on_device.data());
  CHECK(back.size() == count);

  // First half through the cuda::std::span, all of it through the mdspan: x * 3 + 1, then x + 1.
  scale_through_conversions<<<(count + 255) / 256, 256>>>(common.first(count / 2), on_device.view());
  REQUIRE_OK(check_launch("scale_through_conversions"));
  std::vector<int> result(count);
  REQUIRE_OK(copy(span(result), back));
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) wrong += result[i] != (i < count / 2 ? values[i] * 3 + 1 : values[i] + 1);
  CHECK(wrong == 0);

  auto md_back = take(to_span<device>(to_mdspan(on_device.view()), on_device.device()));
  CHECK(md_back.data() == on_device.data());
  CHECK(md_back.size() == count);
}
