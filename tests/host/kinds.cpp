// SPDX-License-Identifier: MIT
// Kinds: the traits table, the copy-direction table and the conversions it allows.
#include <cudamem/buffer.hpp>
#include <cudamem/kind.hpp>
#include <cudamem/ptr.hpp>
#include <cudamem/resource.hpp>
#include <cudamem/span.hpp>

#include "catch.hpp"

#include <type_traits>

using namespace cudamem;

TEST_CASE("kind traits say who may touch the memory", "[kind]") {
  STATIC_REQUIRE(host::host_accessible && !host::device_accessible && !host::page_locked);
  STATIC_REQUIRE(pinned::host_accessible && pinned::device_accessible && pinned::page_locked);
  STATIC_REQUIRE(!device::host_accessible && device::device_accessible);
  STATIC_REQUIRE(managed::host_accessible && managed::device_accessible);
  STATIC_REQUIRE(memory_kind<host> && memory_kind<pinned> && memory_kind<device> && memory_kind<managed>);
  STATIC_REQUIRE_FALSE(memory_kind<int>);
}

TEST_CASE("the built-in resources serve their kinds", "[kind][resource]") {
  STATIC_REQUIRE(memory_resource_for<device_malloc_resource, device> &&
                 memory_resource_for<device_pool_resource, device>);
  STATIC_REQUIRE(memory_resource_for<pinned_resource, pinned> && memory_resource_for<managed_resource, managed>);
  STATIC_REQUIRE(memory_resource_for<host_resource, host> && !memory_resource_for<host_resource, pinned>);
}

TEST_CASE("only pageable host memory is refused by stream-ordered operations", "[kind]") {
  STATIC_REQUIRE_FALSE(stream_orderable<host>);
  STATIC_REQUIRE(stream_orderable<pinned>);
  STATIC_REQUIRE(stream_orderable<device>);
  STATIC_REQUIRE(stream_orderable<managed>);
}

TEST_CASE("the copy direction is a compile-time function of the two kinds", "[kind]") {
  // dst, src
  STATIC_REQUIRE(copy_direction<host, host> == cudaMemcpyHostToHost);
  STATIC_REQUIRE(copy_direction<host, pinned> == cudaMemcpyHostToHost);
  STATIC_REQUIRE(copy_direction<pinned, host> == cudaMemcpyHostToHost);
  STATIC_REQUIRE(copy_direction<pinned, pinned> == cudaMemcpyHostToHost);
  STATIC_REQUIRE(copy_direction<device, host> == cudaMemcpyHostToDevice);
  STATIC_REQUIRE(copy_direction<device, pinned> == cudaMemcpyHostToDevice);
  STATIC_REQUIRE(copy_direction<host, device> == cudaMemcpyDeviceToHost);
  STATIC_REQUIRE(copy_direction<pinned, device> == cudaMemcpyDeviceToHost);
  STATIC_REQUIRE(copy_direction<device, device> == cudaMemcpyDeviceToDevice);
  STATIC_REQUIRE(copy_direction<managed, managed> == cudaMemcpyDefault);
  STATIC_REQUIRE(copy_direction<managed, host> == cudaMemcpyDefault);
  STATIC_REQUIRE(copy_direction<managed, pinned> == cudaMemcpyDefault);
  STATIC_REQUIRE(copy_direction<managed, device> == cudaMemcpyDefault);
  STATIC_REQUIRE(copy_direction<host, managed> == cudaMemcpyDefault);
  STATIC_REQUIRE(copy_direction<pinned, managed> == cudaMemcpyDefault);
  STATIC_REQUIRE(copy_direction<device, managed> == cudaMemcpyDefault);
}

TEST_CASE("conversions only add const or widen pinned to host", "[kind][ptr]") {
  STATIC_REQUIRE(std::is_convertible_v<ptr<int, pinned>, ptr<int, host>>);
  STATIC_REQUIRE(std::is_convertible_v<ptr<int, device>, ptr<const int, device>>);
  STATIC_REQUIRE(std::is_convertible_v<ptr<int, pinned>, ptr<const int, host>>);
  STATIC_REQUIRE_FALSE(std::is_convertible_v<ptr<int, host>, ptr<int, pinned>>);
  STATIC_REQUIRE_FALSE(std::is_convertible_v<ptr<int, device>, ptr<int, host>>);
  STATIC_REQUIRE_FALSE(std::is_convertible_v<ptr<int, managed>, ptr<int, device>>);
  STATIC_REQUIRE_FALSE(std::is_convertible_v<ptr<const int, device>, ptr<int, device>>);
  STATIC_REQUIRE_FALSE(std::is_convertible_v<ptr<int, device>, ptr<long, device>>);

  STATIC_REQUIRE(std::is_convertible_v<span<int, pinned>, span<const int, host>>);
  STATIC_REQUIRE(std::is_convertible_v<buffer<int, device>&, span<const int, device>>);
  STATIC_REQUIRE_FALSE(std::is_convertible_v<span<int, host>, span<int, pinned>>);
  STATIC_REQUIRE_FALSE(std::is_convertible_v<span<int, device>, span<int, managed>>);
}

TEST_CASE("views are cheap to pass to kernels; buffers own and do not copy", "[kind]") {
  STATIC_REQUIRE(std::is_trivially_copyable_v<ptr<float, device>>);
  STATIC_REQUIRE(std::is_trivially_copyable_v<span<float, device>>);
  STATIC_REQUIRE(sizeof(span<float, device>) <= 3 * sizeof(void*));
  STATIC_REQUIRE_FALSE(std::is_copy_constructible_v<buffer<float, device>>);
  STATIC_REQUIRE(std::is_nothrow_move_constructible_v<buffer<float, device>>);
}
