// SPDX-License-Identifier: MIT
// Must not compile: stream-ordered 2D copies from pageable host memory, as a view and through copy_2d.
// Fix: allocate the host rows as a pinned_pitched_buffer (or host_register them), or copy without a stream.
#include <cudamem/cudamem.hpp>

#include <vector>

int main() {
  auto image = cudamem::device_pitched_buffer<int>::allocate(6, 3);
  auto stream = cudamem::stream::create();
  if (!image || !stream) return 1;
#ifdef CUDAMEM_EXPECT_COMPILE_ERROR
  std::vector<int> values(6 * 3, 1);
  auto rows = cudamem::as_pitched(cudamem::span(values), 6, 3);
  if (!rows) return 1;
  auto done = cudamem::copy(*image, *rows, *stream);
  auto raw = cudamem::copy_2d(image->data(), image->pitch_bytes(), cudamem::host_ptr<const int>(values.data()),
                              6 * sizeof(int), 6 * sizeof(int), 3, *stream);
  if (!raw) return 1;
#else
  auto values = cudamem::pinned_pitched_buffer<int>::allocate(6, 3);
  if (!values || !cudamem::fill_bytes(*values, 1)) return 1;
  auto done = cudamem::copy(*image, *values, *stream);
#endif
  return done && stream->synchronize() ? 0 : 1;
}
