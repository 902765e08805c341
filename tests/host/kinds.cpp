// SPDX-License-Identifier: MIT
// Kinds: the traits table, the copy-direction table and the conversions it allows.
#include <cudamem/buffer.hpp>
#include <cudamem/kind.hpp>
#include <cudamem/pool.hpp>
#include <cudamem/ptr.hpp>
#include <cudamem/resource.hpp>
#include <cudamem/span.hpp>

#include "catch.hpp"

#include <cstddef>
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

namespace {
struct counting_resource {  // a stateful resource with no operator==: resource_ref compares it by identity
  using kind = device;
  int allocations = 0;
  result<void*> allocate(stream_ref, std::size_t, std::size_t) noexcept { return nullptr; }
  void deallocate(stream_ref, void*, std::size_t, std::size_t) noexcept {}
};
}  // namespace

TEST_CASE("resources compare equal when either frees what the other allocated", "[kind][resource]") {
  device_pool_resource pool_a, pool_b;
  device_malloc_resource malloc_a;
  host_resource host_a, host_b;
  CHECK(pool_a == pool_b);  // stateless: any two are equal
  CHECK(host_a == host_b);
  CHECK(malloc_a == device_malloc_resource());
  CHECK(pinned_resource() == pinned_resource());
  // resource_ref: the resources' own equality, not only the same object.
  CHECK(resource_ref<device>(pool_a) == resource_ref<device>(pool_b));
  CHECK(resource_ref<device>(pool_a) == default_resource<device>(true));
  CHECK(resource_ref<device>(malloc_a) == default_resource<device>());
  CHECK(resource_ref<host>(host_a) == default_resource<host>());
  CHECK(resource_ref<device>(pool_a) != resource_ref<device>(malloc_a));  // another type: never equal
  CHECK(default_resource<device>(true) != default_resource<device>());
  // Stateful: pools and adaptors by identity, and a resource without operator== as well.
  statistics_adaptor<device_pool_resource> counted_a(pool_a), counted_b(pool_a);
  limit_adaptor<device_pool_resource> limited_a(pool_a, 1024), limited_b(pool_a, 1024);
  CHECK(counted_a == counted_a);
  CHECK(counted_a != counted_b);
  CHECK(limited_a == limited_a);
  CHECK(limited_a != limited_b);
  CHECK(resource_ref<device>(counted_a) == resource_ref<device>(counted_a));
  CHECK(resource_ref<device>(counted_a) != resource_ref<device>(counted_b));
  CHECK(resource_ref<device>(limited_a) != resource_ref<device>(limited_b));
  counting_resource plain_a, plain_b;
  CHECK(resource_ref<device>(plain_a) == resource_ref<device>(plain_a));
  CHECK(resource_ref<device>(plain_a) != resource_ref<device>(plain_b));
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
