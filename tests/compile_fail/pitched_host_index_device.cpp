// SPDX-License-Identifier: MIT
// Must not compile (g++): indexing a pitched view of device memory on the host, an element and a row.
// Fix: copy the rows into a pinned or host pitched buffer first, or index the view in a kernel.
#include <cudamem/cudamem.hpp>

int main() {
  auto image = cudamem::device_pitched_buffer<float>::allocate(8, 4);
  if (!image || !cudamem::fill_bytes(*image, 0)) return 1;
  const cudamem::device_pitched_span<float> rows = image->view();
#ifdef CUDAMEM_EXPECT_COMPILE_ERROR
  return static_cast<int>(rows(1, 2) + rows.row(3)[0]);
#else
  auto readable = cudamem::pinned_pitched_buffer<float>::allocate(rows.width(), rows.height());
  if (!readable || !cudamem::copy(*readable, rows)) return 1;
  const cudamem::pinned_pitched_span<float> host_rows = readable->view();
  return static_cast<int>(host_rows(1, 2) + host_rows.row(3)[0]);
#endif
}
