// SPDX-License-Identifier: MIT
// Uses the generated single header alone, with no include/ on the path. Needs no device: host
// buffers, spans, slicing and synchronous host-to-host copies never reach the driver.
#include <cudamem/cudamem.hpp>

#include <cstdio>

namespace {
int check(bool ok, const char* what) {
  if (!ok) std::fprintf(stderr, "single_include: %s failed\n", what);
  return ok ? 0 : 1;
}
}  // namespace

int main() {
  auto source = cudamem::host_buffer<int>::allocate(8);
  auto target = cudamem::host_buffer<int>::allocate(4);
  if (check(source && target, "host_buffer::allocate")) return 1;
  for (std::size_t i = 0; i < source->size(); ++i) (*source)[i] = static_cast<int>(i);

  const cudamem::host_span<int> all = source->view();
  auto middle = all.subspan(2, 4);
  if (check(middle && middle->size() == 4 && (*middle)[0] == 2, "subspan")) return 1;
  auto beyond = all.subspan(6, 4);
  if (check(!beyond && beyond.error().code() == cudamem::errc::out_of_range, "subspan out of range")) return 1;
  static_assert(cudamem::copy_direction<cudamem::device, cudamem::pinned> == cudaMemcpyHostToDevice);
  return check(cudamem::copy(*target, *middle) && (*target)[3] == 5, "copy");
}
