// SPDX-License-Identifier: MIT
// thrust_pool: sort and sum a cudamem buffer with Thrust on a cudamem stream. A caching pool is registered on the
// stream, so the buffer and Thrust's temporary storage both come from it: after the first sort, later sorts reuse
// the pool's blocks instead of calling cudaMallocAsync and cudaFreeAsync each time.
#include <cudamem/cudamem.hpp>
#include <cudamem/interop/thrust.hpp>

#include <thrust/reduce.h>
#include <thrust/sort.h>

#include <cstdint>
#include <cstdio>

namespace {
int report(const cudamem::error& e) {
  std::fprintf(stderr, "thrust_pool: %s\n", e.message());
  return 1;
}
}  // namespace

int main() {
  using namespace cudamem;
  constexpr std::size_t count = std::size_t{1} << 22;
  if (auto devices = device_count(); !devices || *devices == 0) {
    std::fprintf(stderr, "thrust_pool: no CUDA driver or no GPU (%s)\n",
                 devices ? "no device found" : devices.error().message());
    return 1;
  }
  auto s = stream::create();
  if (!s) return report(s.error());
  device_pool_resource upstream;
  caching_pool<device_pool_resource> pool(upstream);  // declared before the buffers: it outlives them
  auto registered = register_allocator(*s, pool);
  if (!registered) return report(registered.error());

  auto host = pinned_buffer<std::int32_t>::allocate(count);
  if (!host) return report(host.error());
  std::uint32_t state = 12345u;
  std::int64_t expected_sum = 0;
  for (std::size_t i = 0; i < count; ++i) {
    state = state * 1664525u + 1013904223u;
    (*host)[i] = static_cast<std::int32_t>(state >> 12) - (1 << 19);
    expected_sum += (*host)[i];
  }
  auto values = device_buffer<std::int32_t>::allocate(count, *s);  // from the registered pool
  if (!values) return report(values.error());
  const auto policy = thrust_policy(*s);  // temporaries from the registered pool too
  std::int64_t sum = 0;
  for (int round = 0; round < 3; ++round) {  // later rounds reuse the pool's blocks
    if (auto ok = copy(*values, *host, *s); !ok) return report(ok.error());
    thrust::sort(policy, thrust_begin(values->view()), thrust_end(values->view()));
    sum = thrust::reduce(policy, thrust_begin(values->view()), thrust_end(values->view()), std::int64_t{0});
  }
  auto sorted = pinned_buffer<std::int32_t>::allocate(count);
  if (!sorted) return report(sorted.error());
  if (auto ok = copy(*sorted, *values, *s); !ok) return report(ok.error());
  if (auto ok = s->synchronize(); !ok) return report(ok.error());
  for (std::size_t i = 1; i < count; ++i) {
    if ((*sorted)[i - 1] > (*sorted)[i]) {
      std::fprintf(stderr, "thrust_pool: not sorted at %zu\n", i);
      return 1;
    }
  }
  if (sum != expected_sum) {
    std::fprintf(stderr, "thrust_pool: sum %lld, expected %lld\n", static_cast<long long>(sum),
                 static_cast<long long>(expected_sum));
    return 1;
  }
  const caching_statistics st = pool.statistics();
  std::printf("thrust_pool: sorted and summed %zu ints (sum %lld); pool: %zu upstream allocations, %zu reuses\n", count,
              static_cast<long long>(sum), st.upstream_allocations, st.reused);
  return 0;
}
