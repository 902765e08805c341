// SPDX-License-Identifier: MIT
// Buffers of every kind, where their memory lives, who may touch it, and that it is freed.
#include "common.cuh"

using namespace cudamem;
using test::take;

namespace {
cudaMemoryType memory_type(const void* p) {
  cudaPointerAttributes attributes{};
  REQUIRE(cudaPointerGetAttributes(&attributes, p) == cudaSuccess);
  return attributes.type;
}

template <class Kind>
__global__ void add_one(span<int, Kind> values) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < values.size(); i += gridDim.x * blockDim.x)
    values[i] += 1;
}
}  // namespace

TEST_CASE("each kind allocates the memory it names", "[buffer]") {
  for (std::size_t n : {std::size_t{1}, std::size_t{3}, std::size_t{1001}}) {
    auto d = take(device_buffer<int>::allocate(n));
    CHECK(d.size() == n);
    CHECK(d.size_bytes() == n * sizeof(int));
    CHECK(d.device() == take(current_device()));
    CHECK(memory_type(d.data().get()) == cudaMemoryTypeDevice);
    auto p = take(pinned_buffer<int>::allocate(n));
    CHECK(memory_type(p.data().get()) == cudaMemoryTypeHost);
    CHECK(p.device().is_host());
    auto m = take(managed_buffer<int>::allocate(n));
    CHECK(memory_type(m.data().get()) == cudaMemoryTypeManaged);
    auto h = take(host_buffer<int>::allocate(n));
    CHECK(memory_type(h.data().get()) == cudaMemoryTypeUnregistered);
  }
  auto empty = take(device_buffer<int>::allocate(0));
  CHECK(empty.empty());
  CHECK(empty.data().get() == nullptr);
}

TEST_CASE("kernels take device, pinned and managed views by value", "[buffer][kernel]") {
  constexpr std::size_t n = 5000;
  auto s = take(stream::create());
  std::vector<int> values(n);
  for (std::size_t i = 0; i < n; ++i) values[i] = static_cast<int>(i);
  std::vector<int> plus_one(values);
  for (int& v : plus_one) v += 1;

  auto d = take(device_buffer<int>::allocate(n, s));
  auto p = take(pinned_buffer<int>::allocate(n));
  auto m = take(managed_buffer<int>::allocate(n));
  std::copy(values.begin(), values.end(), p.begin());
  std::copy(values.begin(), values.end(), m.begin());
  REQUIRE_OK(copy(d, p, s));
  add_one<<<8, 128, 0, s.get()>>>(d.view());
  add_one<<<8, 128, 0, s.get()>>>(p.view());  // zero-copy through the mapped pinned pages
  add_one<<<8, 128, 0, s.get()>>>(m.view());
  REQUIRE(cudaGetLastError() == cudaSuccess);
  REQUIRE_OK(s.synchronize());
  CHECK(test::read_back(d.view()) == plus_one);
  CHECK(std::vector<int>(p.begin(), p.end()) == plus_one);
  CHECK(std::vector<int>(m.begin(), m.end()) == plus_one);
}

TEST_CASE("device memory is returned on destruction and on move-assignment", "[buffer]") {
  // Asked per allocation, not through cudaMemGetInfo: other processes share the device's free memory.
  const void* first = nullptr;
  const void* second = nullptr;
  {
    auto a = take(device_buffer<std::byte>::allocate(std::size_t{64} << 20));
    auto b = take(device_buffer<std::byte>::allocate(std::size_t{64} << 20));
    first = a.data().get();
    second = b.data().get();
    CHECK(memory_type(first) == cudaMemoryTypeDevice);
    a = std::move(b);  // a's first allocation is freed here
    CHECK(b.empty());
    CHECK(a.data().get() == second);
    CHECK(memory_type(first) == cudaMemoryTypeUnregistered);
    CHECK(memory_type(second) == cudaMemoryTypeDevice);
  }
  CHECK(memory_type(second) == cudaMemoryTypeUnregistered);
}

TEST_CASE("stream-ordered buffers live and die on their stream", "[buffer][stream]") {
  auto s = take(stream::create());
  const auto expected = test::random_vector<std::uint8_t>(1 << 20, test::fresh_seed());
  auto staging = take(pinned_buffer<std::uint8_t>::allocate(expected.size()));
  std::copy(expected.begin(), expected.end(), staging.begin());
  std::vector<std::uint8_t> out(expected.size());
  {
    auto d = take(device_buffer<std::uint8_t>::allocate(expected.size(), s));
    CHECK(d.stream() == s.ref());
    REQUIRE_OK(copy(d, staging, s));
    REQUIRE_OK(fill_bytes(staging, 0, s));
    REQUIRE_OK(copy(staging, d, s));
  }  // cudaFreeAsync on s, after the copies
  REQUIRE_OK(s.synchronize());
  CHECK(std::equal(expected.begin(), expected.end(), staging.begin()));

  auto released = take(device_buffer<int>::allocate(10, s));
  auto raw = released.release();
  CHECK(released.empty());
  REQUIRE(cudaFreeAsync(raw.data().get(), s.get()) == cudaSuccess);
  REQUIRE_OK(s.synchronize());
}

TEST_CASE("host_register page-locks a vector for stream-ordered copies", "[host_register]") {
  auto s = take(stream::create());
  auto values = test::random_vector<std::uint32_t>(100'003, test::fresh_seed());
  const auto expected = values;
  auto d = take(device_buffer<std::uint32_t>::allocate(values.size(), s));
  {
    auto pinned_values = take(host_register(span(values)));
    CHECK(memory_type(values.data()) == cudaMemoryTypeHost);
    REQUIRE_OK(copy(d, pinned_values, s));
    REQUIRE_OK(fill_bytes(pinned_values.view(), 0, s));
    REQUIRE_OK(copy(pinned_values, d, s));
    REQUIRE_OK(s.synchronize());
    CHECK(values == expected);

    auto twice = host_register(span(values));
    REQUIRE_FALSE(twice);
    CHECK(twice.error().cuda_status() == cudaErrorHostMemoryAlreadyRegistered);
    CHECK(cudaGetLastError() == cudaSuccess);
    // The first registration is still in force.
    CHECK(memory_type(values.data()) == cudaMemoryTypeHost);
  }
  CHECK(memory_type(values.data()) == cudaMemoryTypeUnregistered);
  std::vector<int> nothing;
  CHECK(host_register(span(nothing)));
}
