// SPDX-License-Identifier: MIT
// quickstart: scale a vector on the GPU with cudamem. Build: see README.md.
#include <cudamem/cudamem.hpp>

#include <cstdio>
#include <vector>

// Kernels take typed views by value; the kind is part of the type, so only device-accessible
// memory can be indexed here.
__global__ void scale(cudamem::device_span<float> values, float factor) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i < values.size()) values[i] *= factor;
}

int main() {
  using namespace cudamem;
  constexpr std::size_t n = 1 << 20;
  std::vector<float> host(n);
  for (std::size_t i = 0; i < n; ++i) host[i] = static_cast<float>(i);

  // Every fallible call returns a result: check it, or propagate it.
  if (auto devices = device_count(); !devices || *devices == 0) {
    std::fprintf(stderr, "quickstart: no CUDA driver or no GPU (%s)\n",
                 devices ? "no device found" : devices.error().message());
    return 1;
  }
  auto values = device_buffer<float>::allocate(n);
  if (!values) {
    std::fprintf(stderr, "quickstart: %s\n", values.error().message());
    return 1;
  }
  if (auto ok = copy(*values, span(host)); !ok) {  // synchronous: pageable host memory is fine
    std::fprintf(stderr, "quickstart: %s\n", ok.error().message());
    return 1;
  }
  scale<<<(n + 255) / 256, 256>>>(*values, 2.0f);
  // A launch reports its errors (no kernel image for this GPU, a bad configuration) only through
  // cudaGetLastError: check_launch turns them into a status.
  if (auto ok = check_launch("scale"); !ok) {
    std::fprintf(stderr, "quickstart: %s\n", ok.error().message());
    return 1;
  }
  if (auto ok = copy(span(host), *values); !ok) {  // synchronous: waits for the kernel too
    std::fprintf(stderr, "quickstart: %s\n", ok.error().message());
    return 1;
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (host[i] != 2.0f * static_cast<float>(i)) {
      std::fprintf(stderr, "quickstart: wrong value at %zu: %f\n", i, host[i]);
      return 1;
    }
  }
  std::printf("quickstart: scaled %zu floats on the GPU, all correct\n", n);
  return 0;
}
