// SPDX-License-Identifier: MIT
// Must not compile: an NCCL collective over an element type NCCL has no data type for (16-bit integers).
// Fix: an element type NCCL has (std::int32_t here), or a byte view (std::uint8_t) to move raw bytes.
#include <cudamem/interop/nccl.hpp>

#include <cstdint>

int reduce(cudamem::nccl::communicator& comm, cudamem::stream& s) {
#ifdef CUDAMEM_EXPECT_COMPILE_ERROR
  auto data = cudamem::device_buffer<std::int16_t>::allocate(16);
#else
  auto data = cudamem::device_buffer<std::int32_t>::allocate(16);
#endif
  if (!data) return 1;
  return cudamem::nccl::all_reduce(comm, *data, cudamem::nccl::reduce_op::sum, s) ? 0 : 1;
}

int main() { return 0; }
