// SPDX-License-Identifier: MIT
// cudamem views as cuda::std::mdspan and cuda::std::span (docs/interop.md).
#include <cudamem/cudamem.hpp>
#include <cudamem/interop/mdspan.hpp>

#include <vector>

namespace example {
using namespace cudamem;

// [kernel]
// A kernel written against cuda::std::mdspan: rows(r, c) steps rows by the pitch, as a pitched view does.
__global__ void add_column_index(pitched_mdspan<float> rows) {
  const std::size_t c = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  const std::size_t r = blockIdx.y;
  if (r < rows.extent(0) && c < rows.extent(1)) rows(r, c) += static_cast<float>(c);
}
// [/kernel]

// [launch]
result<device_pitched_span<float>> add_column_index_to_rows_1_2(device_pitched_span<float> image) {
  auto rows = to_mdspan(image);  // checked: the pitch must be a whole number of elements
  if (!rows) return rows.error();
  // Rows [1, 3) and every column: submdspan keeps the pitch as the row stride.
  auto middle = cuda::std::submdspan(*rows, cuda::std::pair<std::size_t, std::size_t>{1, 3}, cuda::std::full_extent);
  const dim3 blocks(static_cast<unsigned>((middle.extent(1) + 127) / 128), static_cast<unsigned>(middle.extent(0)));
  add_column_index<<<blocks, 128>>>(middle);
  CUDAMEM_TRY(check_launch("add_column_index"));
  // Back to a cudamem view: an mdspan knows neither its kind nor its device, so the caller names them.
  return to_pitched_span<device>(middle, image.device());
}
// [/launch]

// [cuda_span]
// RMM and cudf pass cuda::std::span; the kind and device come back from the caller.
cuda::std::span<const float> for_cudf(device_span<const float> values) { return to_cuda_span(values); }
device_span<const float> from_rmm(cuda::std::span<const float> values, device_id where) {
  return from_cuda_span<device>(values, where);
}
// [/cuda_span]
}  // namespace example

int main() {
  using namespace cudamem;
  if (auto count = device_count(); !count || *count == 0) return 77;  // no device: skipped
  auto image = device_pitched_buffer<float>::allocate(300, 4);
  if (!image) return 1;
  std::vector<float> zeros(300 * 4, 0.0f), back(300 * 4);
  if (!copy(*image, span(zeros))) return 1;
  auto middle = example::add_column_index_to_rows_1_2(*image);
  if (!middle || middle->height() != 2 || middle->width() != 300) return 1;
  if (!copy(span(back), *image)) return 1;
  // Rows 1 and 2 hold their column index, rows 0 and 3 stay zero.
  if (back[300 + 299] != 299.0f || back[2 * 300 + 5] != 5.0f || back[5] != 0.0f || back[3 * 300 + 5] != 0.0f) return 1;
  auto flat = device_buffer<float>::allocate(10);
  if (!flat) return 1;
  const auto round_trip = example::from_rmm(example::for_cudf(flat->view()), flat->device());
  return round_trip.data() == flat->data() && round_trip.size() == 10 ? 0 : 1;
}
