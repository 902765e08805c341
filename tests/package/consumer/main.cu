// SPDX-License-Identifier: MIT
// The nvcc consumer: the shared host checks, and with a device a kernel that takes a
// cudamem::device_span by value. Exits 0 when there is no device.
#include "consumer_checks.hpp"

__global__ void add_index(cudamem::device_span<int> values, int factor) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i < values.size()) values[i] += factor * static_cast<int>(i);
}

namespace {
bool kernel_round_trip() {
  constexpr std::size_t n = 1000;
  std::vector<int> host(n, 5);
  auto device = cudamem::device_buffer<int>::allocate(n);
  if (!device) return consumer::fail("device_buffer::allocate", device.error());
  if (auto ok = cudamem::copy(*device, cudamem::span(host)); !ok) return consumer::fail("copy to device", ok.error());
  add_index<<<(n + 127) / 128, 128>>>(*device, 2);
  if (auto launched = cudamem::check_launch("add_index"); !launched) return consumer::fail("launch", launched.error());
  // The synchronous copy is ordered after the kernel on the legacy default stream.
  if (auto ok = cudamem::copy(cudamem::span(host), *device); !ok) return consumer::fail("copy to host", ok.error());
  for (std::size_t i = 0; i < n; ++i)
    if (host[i] != 5 + 2 * static_cast<int>(i)) return consumer::fail("kernel results");
  return true;
}
}  // namespace

int main() {
  if (!consumer::host_checks()) return 1;
  if (!consumer::device_present()) {
    std::printf(PACKAGE_CONSUMER ": host checks passed\n");
    return 0;
  }
  if (!consumer::device_round_trip() || !kernel_round_trip()) return 1;
  std::printf(PACKAGE_CONSUMER ": host checks, device round trip and kernel passed\n");
  return 0;
}
