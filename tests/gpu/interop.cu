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

#if __has_include(<dlpack/dlpack.h>)
#include <cudamem/interop/dlpack.hpp>

namespace {
// The stream-ordered pool, recording the stream each free is ordered on.
struct recording_pool_resource {
  using kind = device;
  device_pool_resource inner;
  std::vector<cudaStream_t> freed_on;
  result<void*> allocate(stream_ref s, std::size_t bytes, std::size_t alignment) noexcept {
    return inner.allocate(s, bytes, alignment);
  }
  void deallocate(stream_ref s, void* p, std::size_t bytes, std::size_t alignment) noexcept {
    freed_on.push_back(s.get());
    inner.deallocate(s, p, bytes, alignment);
  }
};
}  // namespace

TEST_CASE("a buffer handed to DLPack is freed on a live stream, after its stream's work, when its stream is gone",
          "[interop][dlpack]") {
  constexpr std::size_t n = 4096;
  recording_pool_resource recorder;
  auto s = take(stream::create());  // non-blocking: the legacy stream does not wait for it by itself
  auto owner = take(device_buffer<int>::allocate(n, s, recorder));
  const cudaStream_t doomed = s.get();
  REQUIRE_OK(fill_bytes(owner, 0, s));
  test::delay_then_write<<<8, 256, 0, s.get()>>>(owner.view(), 5, 20'000'000ull);  // about 20 ms, then 5s
  REQUIRE(cudaGetLastError() == cudaSuccess);
  auto tensor = take(to_dlpack(std::move(owner)));
  DLManagedTensor* handed_over = tensor.release();
  { auto gone = std::move(s); }  // destroyed while its kernel may still run

  // The consumer reads it synchronously (the legacy stream): the export ordered that stream after the kernel.
  auto imported = take(span_from_dlpack<int, device>(handed_over));
  CHECK(imported.device() == take(current_device()));
  std::vector<int> back(n, -1);
  REQUIRE(cudaMemcpy(back.data(), imported.data().get(), n * sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(back == std::vector<int>(n, 5));

  handed_over->deleter(handed_over);
  REQUIRE(recorder.freed_on.size() == 1);
  CHECK(recorder.freed_on[0] != doomed);
  CHECK(recorder.freed_on[0] == cudaStreamLegacy);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("a managed buffer exports and imports with its own device", "[interop][dlpack]") {
  const device_id here = take(current_device());
  auto owner = take(managed_buffer<int>::allocate(16));
  REQUIRE(owner.device() == here);
  auto tensor = take(to_dlpack(std::move(owner)));
  CHECK(tensor.get()->dl_tensor.device.device_type == kDLCUDAManaged);
  CHECK(tensor.get()->dl_tensor.device.device_id == here.get());
  auto imported = take(span_from_dlpack<int, managed>(tensor.get()));
  CHECK(imported.device() == here);
}
#endif
