// SPDX-License-Identifier: MIT
// Compiled twice as an object, never run (host_copy2d_only_where_used in tests/CMakeLists.txt looks into both): an nvcc
// translation unit whose copies cannot be 2D device-to-device (here a device buffer from a pinned one) builds none of
// the engine's 2D copy kernels (detail/copy2d.hpp) into its device image; with CUDAMEM_TEST_2D_DEVICE_COPY, a copy
// between pitched device buffers does (the control: the check cannot pass because the names are not visible).
#include <cudamem/pitched.hpp>

cudamem::status copy_from_pinned(cudamem::device_buffer<float>& dst, const cudamem::pinned_buffer<float>& src,
                                 cudamem::stream_ref s) {
  return cudamem::copy(dst, src, s);
}

#if defined(CUDAMEM_TEST_2D_DEVICE_COPY)
cudamem::status copy_2d_device(cudamem::device_pitched_buffer<float>& dst,
                               const cudamem::device_pitched_buffer<float>& src, cudamem::stream_ref s) {
  return cudamem::copy(dst, src, s);
}
#endif
