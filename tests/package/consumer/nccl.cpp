// SPDX-License-Identifier: MIT
// The NCCL consumer (where NCCL is found): cudamem/interop/nccl.hpp compiled and linked through the
// cudamem::nccl target alone, and one NCCL call that needs no device.
#include <cudamem/interop/nccl.hpp>

#include <cstdio>

int main() {
  static_assert(cudamem::nccl::data_type_of<float> == ncclFloat32);
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess || version <= 0) {
    std::fprintf(stderr, PACKAGE_CONSUMER ": FAILED: ncclGetVersion\n");
    return 1;
  }
  std::printf(PACKAGE_CONSUMER ": NCCL %d linked\n", version);
  return 0;
}
