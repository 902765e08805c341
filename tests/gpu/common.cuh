// SPDX-License-Identifier: MIT
// Helpers shared by the GPU tests: fresh random data, poisoned destinations, reading any kind back.
#pragma once

#include <cudamem/cudamem.hpp>

#include "catch.hpp"

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace test {

/// Fails the test with the library's message when `outcome` holds an error.
#define REQUIRE_OK(...)                                                                              \
  do {                                                                                               \
    const auto& cudamem_test_outcome = (__VA_ARGS__);                                                \
    if (!cudamem_test_outcome) FAIL(#__VA_ARGS__ << ": " << cudamem_test_outcome.error().message()); \
  } while (0)

/// The value of a result, or a failed test.
template <class T>
T take(cudamem::result<T>&& outcome) {
  if (!outcome) FAIL(outcome.error().message());
  return std::move(*outcome);
}

/// A seed that differs from run to run (the data is fresh), reported on failure.
inline std::uint64_t fresh_seed() {
  static std::uint64_t counter = 0;
  return static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) *
             0x9E3779B97F4A7C15ull +
         ++counter;
}

/// Fills `bytes` bytes with xorshift64* output.
inline void random_bytes(void* target, std::size_t bytes, std::uint64_t seed) {
  std::uint64_t state = seed | 1;
  auto* out = static_cast<unsigned char*>(target);
  std::size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    const std::uint64_t word = state * 0x2545F4914F6CDD1Dull;
    std::memcpy(out + i, &word, 8);
  }
  for (; i < bytes; ++i) out[i] = static_cast<unsigned char>(state >> (8 * (i % 8)));
}

template <class T>
std::vector<T> random_vector(std::size_t count, std::uint64_t seed) {
  std::vector<T> values(count);
  random_bytes(values.data(), count * sizeof(T), seed);
  if constexpr (std::is_floating_point_v<T>)  // no NaN: it compares unequal to itself, and == on vectors would fail
    for (std::size_t i = 0; i < count; ++i)
      if (values[i] != values[i]) values[i] = static_cast<T>(i);
  return values;
}

inline constexpr unsigned char poison = 0xA5;

/// Every element of any kind, copied to a host vector (synchronously).
template <class T, class K>
std::vector<std::remove_cv_t<T>> read_back(cudamem::span<T, K> view) {
  std::vector<std::remove_cv_t<T>> out(view.size());
  REQUIRE_OK(cudamem::copy(cudamem::span(out), view));
  return out;
}

/// True when every byte of `values` equals `byte`.
template <class T>
bool all_bytes(const std::vector<T>& values, unsigned char byte) {
  const auto* raw = reinterpret_cast<const unsigned char*>(values.data());
  for (std::size_t i = 0; i < values.size() * sizeof(T); ++i)
    if (raw[i] != byte) return false;
  return true;
}

/// Spins on the device for about `ns` nanoseconds, then writes `value` to every element.
template <class T>
__global__ void delay_then_write(cudamem::device_span<T> out, T value, unsigned long long ns) {
  if (threadIdx.x == 0) {
    const unsigned long long start = clock64();
    // clock64 counts cycles; assume >= 1 GHz so that this waits at least `ns`.
    while (static_cast<unsigned long long>(clock64()) - start < ns) {}
  }
  __syncthreads();
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < out.size(); i += gridDim.x * blockDim.x)
    out[i] = value;
}

}  // namespace test
