// SPDX-License-Identifier: MIT
// Shared by the package consumers (tests/package/*): uses cudamem the way a user would.
// host_checks() needs no device; device_round_trip() runs only when device_count() finds one.
// Each function prints what failed and returns false.
#pragma once

#include <cudamem/cudamem.hpp>
// The CCCL interop header needs <cuda/std/...>: a host compiler finds it only through the
// toolkit's include/cccl directory, which the cudamem::cudamem target must supply. The single
// header consumer has no interop headers (single_include/ holds only cudamem.hpp).
#ifndef PACKAGE_NO_INTEROP
#include <cudamem/interop/expected.hpp>
#endif

#include <cstddef>
#include <cstdio>
#include <utility>
#include <vector>

#ifndef PACKAGE_CONSUMER
#define PACKAGE_CONSUMER "consumer"
#endif

namespace consumer {

inline bool fail(const char* what) {
  std::fprintf(stderr, PACKAGE_CONSUMER ": FAILED: %s\n", what);
  return false;
}

inline bool fail(const char* what, const cudamem::error& e) {
  std::fprintf(stderr, PACKAGE_CONSUMER ": FAILED: %s: %s\n", what, e.message());
  return false;
}

// A pageable host buffer, spans over it, checked slicing, and synchronous host copies: none of it
// reaches the driver, so it runs on a machine with no GPU.
inline bool host_checks() {
  constexpr std::size_t n = 16;
  auto source = cudamem::host_buffer<int>::allocate(n);
  if (!source) return fail("host_buffer::allocate", source.error());
  for (std::size_t i = 0; i < n; ++i) (*source)[i] = 3 * static_cast<int>(i);

  const cudamem::host_span<int> all = source->view();
  if (all.size() != n) return fail("host_buffer::view size");
  auto middle = all.subspan(4, 8);
  if (!middle) return fail("subspan(4, 8)", middle.error());
  if (middle->size() != 8 || (*middle)[0] != 12) return fail("subspan(4, 8) contents");
  auto beyond = all.subspan(10, 8);
  if (beyond || beyond.error().code() != cudamem::errc::out_of_range) return fail("subspan(10, 8) was not refused");

  std::vector<int> target(8, -1);
  if (auto ok = cudamem::copy(cudamem::span(target), *middle); !ok) return fail("host copy", ok.error());
  for (std::size_t i = 0; i < target.size(); ++i)
    if (target[i] != 3 * static_cast<int>(i + 4)) return fail("host copy contents");

  std::vector<int> shorter(7);
  auto refused = cudamem::copy(cudamem::span(shorter), *middle);
  if (refused || refused.error().code() != cudamem::errc::extents_mismatch)
    return fail("a copy with differing extents was not refused");

#ifndef PACKAGE_NO_INTEROP
  auto as_expected = cudamem::to_expected(all.subspan(2, 3));
  if (!as_expected || as_expected->size() != 3 || (*as_expected)[0] != 6) return fail("to_expected(subspan(2, 3))");
  auto back = cudamem::from_expected(std::move(as_expected));
  if (!back || back->data().get() != all.data().get() + 2) return fail("from_expected");
  auto refused_expected = cudamem::to_expected(all.subspan(20, 1));
  if (refused_expected || refused_expected.error().code() != cudamem::errc::out_of_range)
    return fail("to_expected of a refused subspan");
#endif
  return true;
}

// True when a device is usable; otherwise prints why not (no device, no driver) and returns false.
inline bool device_present() {
  auto count = cudamem::device_count();
  if (count && *count > 0) return true;
  std::printf(PACKAGE_CONSUMER ": no CUDA device (%s): device checks skipped\n",
              count ? "device_count() is 0" : count.error().message());
  return false;
}

// Pageable host -> device -> pageable host through the synchronous copies.
inline bool device_round_trip() {
  constexpr std::size_t n = 4096;
  std::vector<int> host(n);
  for (std::size_t i = 0; i < n; ++i) host[i] = static_cast<int>(i) - 100;
  auto device = cudamem::device_buffer<int>::allocate(n);
  if (!device) return fail("device_buffer::allocate", device.error());
  if (auto ok = cudamem::copy(*device, cudamem::span(host)); !ok) return fail("copy to device", ok.error());
  std::vector<int> back(n, 0);
  if (auto ok = cudamem::copy(cudamem::span(back), *device); !ok) return fail("copy to host", ok.error());
  if (back != host) return fail("device round trip contents");
  return true;
}

}  // namespace consumer
