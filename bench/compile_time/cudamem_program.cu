// SPDX-License-Identifier: MIT
// compile_time.sh, "program" pair, cudamem side: a buffer, stream-ordered copies and fills (fill_bytes and the typed
// fill), a kernel on a pitched view and a caching pool, through the umbrella header. raw_program.cu does the same with
// the CUDA runtime alone. Compiled, never run.
#include <cudamem/cudamem.hpp>

__global__ void scale_rows(cudamem::device_pitched_span<float> image, float factor) {
  const std::size_t col = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  const std::size_t row = blockIdx.y;
  if (row < image.height() && col < image.width()) image(row, col) *= factor;
}

int main() {
  using namespace cudamem;
  constexpr std::size_t count = 1 << 20, width = 1000, height = 100;
  auto s = stream::create();
  if (!s) return 1;
  device_pool_resource upstream;
  caching_pool<device_pool_resource> pool(upstream);
  auto host = pinned_buffer<float>::allocate(count);
  auto data = device_buffer<float>::allocate(count, *s, pool);
  auto image = device_pitched_buffer<float>::allocate(width, height, *s);
  if (!host || !data || !image) return 1;
  if (!fill_bytes(*data, 0, *s)) return 1;
  if (!fill(*image, 1.0f, *s)) return 1;
  if (!copy(*data, *host, *s)) return 1;
  scale_rows<<<dim3((width + 255) / 256, height), 256, 0, s->get()>>>(*image, 2.0f);
  if (!check_launch("scale_rows")) return 1;
  if (!copy(*host, *data, *s)) return 1;
  return s->synchronize() ? 0 : 1;
}
