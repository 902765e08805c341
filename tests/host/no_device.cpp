// SPDX-License-Identifier: MIT
// With no device (CI has no driver; on a GPU machine CTest hides the devices), every factory and
// operation that needs CUDA returns an error naming the call, and nothing crashes or is written.
#include <cudamem/cudamem.hpp>

#include "catch.hpp"

#include <cstdint>
#include <string>
#include <vector>

using namespace cudamem;

namespace {
template <class T>
void require_cuda_error(const result<T>& outcome, const char* api) {
  REQUIRE_FALSE(outcome);
  INFO(outcome.error().message());
  CHECK(outcome.error().code() == errc::cuda);
  CHECK(outcome.error().cuda_status() != cudaSuccess);
  CHECK(std::string(outcome.error().message()).rfind(api, 0) == 0);
}
}  // namespace

TEST_CASE("device queries fail cleanly", "[no_device]") {
  require_cuda_error(device_count(), "device_count: cudaGetDeviceCount");
  require_cuda_error(current_device(), "current_device");
  require_cuda_error(set_current_device(device_id(0)), "set_current_device");
  require_cuda_error(device_guard::set(device_id(0)), "device_guard::set");
  require_cuda_error(max_pitch(device_id(0)), "max_pitch");
  require_cuda_error(compute_capability(device_id(0)), "compute_capability");
}

TEST_CASE("stream and event factories fail cleanly", "[no_device]") {
  require_cuda_error(stream::create(), "stream::create");
  require_cuda_error(stream::create(device_id(0)), "stream::create");
  require_cuda_error(event::create(), "event::create");
  require_cuda_error(stream_ref::legacy().synchronize(), "stream::synchronize");
  require_cuda_error(stream_ref::per_thread().ready(), "stream::ready");
  require_cuda_error(stream_ref::legacy().device(), "stream::device");
}

TEST_CASE("allocations fail cleanly", "[no_device]") {
  require_cuda_error(device_buffer<float>::allocate(16), "buffer::allocate");
  require_cuda_error(device_buffer<float>::allocate(16, stream_ref::legacy()), "buffer::allocate");
  require_cuda_error(device_buffer<float>::allocate(16, device_id(0)), "buffer::allocate");
  require_cuda_error(pinned_buffer<float>::allocate(16), "buffer::allocate: cudaMallocHost");
  require_cuda_error(managed_buffer<float>::allocate(16), "buffer::allocate");
  // Pageable host memory needs no device.
  CHECK(host_buffer<float>::allocate(16));
  std::vector<int> values(8, 0);
  require_cuda_error(host_register(span(values)), "host_register: cudaHostRegister");
}

TEST_CASE("copies and fills fail cleanly and write nothing", "[no_device]") {
  std::vector<std::uint8_t> host_side(64, 0xab);
  const auto fake = device_span<std::uint8_t>(
      device_ptr<std::uint8_t>(reinterpret_cast<std::uint8_t*>(std::uintptr_t{0x7f0000000000}), device_id(0)), 64);

  require_cuda_error(copy(span(host_side), fake), "");
  require_cuda_error(copy(fake, span(host_side)), "");
  require_cuda_error(copy_to_host(span(host_side), fake), "copy_to_host: cudaGetDevice");
  require_cuda_error(fill_bytes(fake, 1), "");
  require_cuda_error(fill_bytes(fake, 1, stream_ref::legacy()), "fill_bytes: cudaMemsetAsync");
  const auto other = device_span<std::uint8_t>(device_ptr<std::uint8_t>(fake.data().get() + 4096, device_id(0)), 64);
  require_cuda_error(copy(fake, other, stream_ref::legacy()), "copy");
  CHECK(host_side == std::vector<std::uint8_t>(64, 0xab));
}
