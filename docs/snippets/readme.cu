// SPDX-License-Identifier: MIT
// The README's taste of the API, compiled by CI so that it stays true.
#include <cstdio>
#include <vector>

// [taste]
#include <cudamem/cudamem.hpp>

__global__ void scale(cudamem::device_span<float> v, float k) {   // kernels take typed views
  auto i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < v.size()) v[i] *= k;
}

cudamem::status run(std::vector<float>& data) {
  using namespace cudamem;
  auto s = stream::create();                                      // result<stream>
  if (!s) return s.error();
  auto pinned = host_register(span(data));                        // page-lock the vector
  if (!pinned) return pinned.error();
  auto d = device_buffer<float>::allocate(data.size(), *s);       // cudaMallocAsync on *s
  if (!d) return d.error();
  CUDAMEM_TRY(copy(*d, *pinned, *s));                             // H2D, decided at compile time
  scale<<<(data.size() + 255) / 256, 256, 0, s->get()>>>(*d, 2.0f);
  CUDAMEM_TRY(check_launch("scale"));                             // the launch error, if any
  CUDAMEM_TRY(copy_to_host(*pinned, *d, *s));                     // CuPy's name for a D2H copy
  return s->synchronize();   // copy(*d, span(data), *s) would not compile: pageable + stream
}
// [/taste]

int main() {
  if (auto count = cudamem::device_count(); !count || *count == 0) return 77;  // no device: skipped
  std::vector<float> data(1000, 1.0f);
  if (auto ok = run(data); !ok) {
    std::printf("%s\n", ok.error().message());
    return 1;
  }
  return data[999] == 2.0f ? 0 : 1;
}
