// SPDX-License-Identifier: MIT
// host_program: a plain C++ program, compiled by g++ alone and linked with cudart, that drives the
// GPU through cudamem: no kernels, only memory. Device memory cannot be dereferenced here (that
// would not compile); data moves with copies.
#include <cudamem/cudamem.hpp>

#include <cstdint>
#include <cstdio>
#include <numeric>
#include <vector>

namespace {
// Errors propagate with CUDAMEM_TRY, like `?` in other languages.
cudamem::status round_trip(std::vector<std::uint32_t>& data) {
  using namespace cudamem;
  auto s = stream::create();
  if (!s) return s.error();
  auto staging = host_register(span(data));  // page-lock the vector for stream-ordered copies
  if (!staging) return staging.error();
  auto device_copy = device_buffer<std::uint32_t>::allocate(data.size(), *s);
  if (!device_copy) return device_copy.error();
  CUDAMEM_TRY(copy(*device_copy, *staging, *s));
  CUDAMEM_TRY(fill_bytes(*staging, 0, *s));
  CUDAMEM_TRY(copy(*staging, *device_copy, *s));
  return s->synchronize();
}
}  // namespace

int main() {
  if (auto devices = cudamem::device_count(); !devices || *devices == 0) {
    std::fprintf(stderr, "host_program: no CUDA driver or no GPU (%s)\n",
                 devices ? "no device found" : devices.error().message());
    return 1;
  }
  std::vector<std::uint32_t> data(1 << 22);
  std::iota(data.begin(), data.end(), 7u);
  if (auto ok = round_trip(data); !ok) {
    std::fprintf(stderr, "host_program: %s\n", ok.error().message());
    return 1;
  }
  for (std::size_t i = 0; i < data.size(); ++i)
    if (data[i] != 7u + i) {
      std::fprintf(stderr, "host_program: wrong value at %zu\n", i);
      return 1;
    }
  std::printf("host_program: %zu values through the device and back, all correct\n", data.size());
  return 0;
}
