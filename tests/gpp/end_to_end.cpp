// SPDX-License-Identifier: MIT
// A plain g++ program (no nvcc) that drives the GPU end to end through cudamem, built with
// -fno-exceptions. Exits 77 when there is no device, 1 on any failure.
#include <cudamem/cudamem.hpp>

#include <cstdio>
#include <vector>

namespace {
int fail(const cudamem::error& e) {
  std::fprintf(stderr, "FAILED: %s\n", e.message());
  return 1;
}
}  // namespace

int main() {
  using namespace cudamem;
  auto count = device_count();
  if (!count || *count == 0) {
    std::printf("skipped: %s\n", count ? "no CUDA device" : count.error().message());
    return 77;
  }
  constexpr std::size_t n = 1 << 20;
  auto s = stream::create();
  if (!s) return fail(s.error());
  auto staging = pinned_buffer<double>::allocate(n);
  if (!staging) return fail(staging.error());
  auto d = device_buffer<double>::allocate(n, *s);
  if (!d) return fail(d.error());
  for (std::size_t i = 0; i < n; ++i) (*staging)[i] = 0.5 * static_cast<double>(i);

  if (auto ok = copy(*d, *staging, *s); !ok) return fail(ok.error());
  if (auto ok = fill_bytes(*staging, 0, *s); !ok) return fail(ok.error());
  if (auto ok = cudamem::copy_to_host(*staging, *d, *s); !ok) return fail(ok.error());
  if (auto ok = s->synchronize(); !ok) return fail(ok.error());
  for (std::size_t i = 0; i < n; ++i)
    if ((*staging)[i] != 0.5 * static_cast<double>(i)) {
      std::fprintf(stderr, "FAILED: element %zu is %f\n", i, (*staging)[i]);
      return 1;
    }

  std::vector<double> shorter(n - 1);
  auto refused = copy(span(shorter), *d);
  if (refused || refused.error().code() != errc::extents_mismatch) {
    std::fprintf(stderr, "FAILED: a copy with differing extents was not refused\n");
    return 1;
  }
  std::printf("ok: %zu doubles through pinned -> device -> pinned; misuse refused: %s\n", n, refused.error().message());
  return 0;
}
