// SPDX-License-Identifier: MIT
// Pitched 2D memory (docs/pitched.md) and code ported from Ascend's ACL (docs/acl-mapping.md).
#include <cudamem/cudamem.hpp>

#include <cstdint>
#include <vector>

namespace example {
using namespace cudamem;

// [kernel]
// One thread per element; v(r, c) finds row r through the pitch, then column c within it.
__global__ void brighten(device_pitched_span<float> image, float amount) {
  const std::size_t c = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  const std::size_t r = blockIdx.y;
  if (r < image.height() && c < image.width()) image(r, c) += amount;
}
// [/kernel]

// [round_trip]
status brighten_on_gpu(std::size_t width, std::size_t height, stream_ref s) {
  // Rows padded to the pitch each kind wants; pinned so that the copies can be stream-ordered.
  auto host_rows = pinned_pitched_buffer<float>::allocate(width, height);
  auto device_rows = device_pitched_buffer<float>::allocate(width, height, s);
  if (!host_rows) return host_rows.error();
  if (!device_rows) return device_rows.error();

  auto pixels = host_rows->view();
  for (std::size_t r = 0; r < height; ++r)
    for (std::size_t c = 0; c < width; ++c) pixels(r, c) = static_cast<float>(r + c);

  CUDAMEM_TRY(copy(*device_rows, *host_rows, s));  // one 2D copy: rows only, never the padding
  const dim3 blocks(static_cast<unsigned>((width + 255) / 256), static_cast<unsigned>(height));
  brighten<<<blocks, 256, 0, s.get()>>>(*device_rows, 0.5f);
  CUDAMEM_TRY(check_launch("brighten"));
  CUDAMEM_TRY(copy(*host_rows, *device_rows, s));
  return s.synchronize();
}
// [/round_trip]

// [flat]
status to_rows(const std::vector<float>& flat, std::size_t width, device_pitched_span<float> rows) {
  // rows.width() * rows.height() == flat.size(): the vector's elements fill the rows in order.
  CUDAMEM_TRY(copy(rows, span(flat)));
  // Or view the vector itself as rows (pitch = width * sizeof(float)) and copy a corner of it.
  auto grid = as_pitched(span(flat), width, flat.size() / width);  // checked: a result
  if (!grid) return grid.error();
  auto from = grid->subspan(0, 0, 2, 2);  // rows [0, 2), columns [0, 2): checked
  auto to = rows.subspan(0, 0, 2, 2);
  if (!from) return from.error();
  if (!to) return to.error();
  return copy(*to, *from);
}
// [/flat]

// [acl]
// Was: aclrtMemcpy2d(dev, dpitch, host, spitch, width_bytes, height, ACL_MEMCPY_HOST_TO_DEVICE);
status upload_rows(device_ptr<std::uint8_t> dev, std::size_t dpitch, const std::vector<std::uint8_t>& host,
                   std::size_t spitch, std::size_t width_bytes, std::size_t height) {
  // The direction comes from the pointer kinds; the checks (width <= both pitches, the device's
  // maximum pitch, no overlap) run before any CUDA call. Synchronous, as aclrtMemcpy2d.
  return copy_2d(dev, dpitch, host_ptr<const std::uint8_t>(host.data()), spitch, width_bytes, height);
}
// [/acl]
}  // namespace example

int main() {
  using namespace cudamem;
  if (auto count = device_count(); !count || *count == 0) return 77;  // no device: skipped
  if (!example::brighten_on_gpu(1000, 30, stream_ref::legacy())) return 1;
  auto rows = device_pitched_buffer<float>::allocate(8, 4);
  if (!rows) return 1;
  std::vector<float> flat(32, 2.0f);
  if (!example::to_rows(flat, 8, *rows)) return 1;
  auto bytes = device_pitched_buffer<std::uint8_t>::allocate(100, 3);
  if (!bytes) return 1;
  std::vector<std::uint8_t> host(120 * 3, 7);
  return example::upload_rows(bytes->data(), bytes->pitch_bytes(), host, 120, 100, 3) ? 0 : 1;
}
