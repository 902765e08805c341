// SPDX-License-Identifier: MIT
// Managed prefetch and advice, and host-located pools, without a device: locations map to CUDA's exactly, bad input
// is refused before CUDA is asked, empty views cost nothing, and the pool resource models the concept.
#include <cudamem/host_pool.hpp>
#include <cudamem/managed.hpp>

#include "catch.hpp"

#include <string>
#include <type_traits>

using namespace cudamem;

static_assert(memory_resource_for<host_pool_resource, pinned>);
static_assert(!std::is_copy_constructible_v<host_pool_resource> &&
              std::is_nothrow_move_constructible_v<host_pool_resource>);
static_assert(std::is_trivially_copyable_v<memory_location>);

TEST_CASE("memory locations are CUDA's", "[managed]") {
  const cudaMemLocation d = memory_location::device(device_id(3)).native();
  CHECK(d.type == cudaMemLocationTypeDevice);
  CHECK(d.id == 3);
  CHECK(memory_location::host().native().type == cudaMemLocationTypeHost);
  const cudaMemLocation n = memory_location::host_numa(1).native();
  CHECK(n.type == cudaMemLocationTypeHostNuma);
  CHECK(n.id == 1);
  CHECK(memory_location::host_numa_current().native().type == cudaMemLocationTypeHostNumaCurrent);
  CHECK(memory_location::host_numa(1) == memory_location::host_numa(1));
  CHECK(memory_location::host_numa(1) != memory_location::host_numa(0));
  CHECK(memory_location::host() != memory_location::device(device_id(0)));
  CHECK(memory_location::device(device_id(2)).is_device());
  CHECK(!memory_location::host().is_device());
}

TEST_CASE("prefetch and advice refuse bad locations and streams before asking CUDA", "[managed]") {
  float fake[4] = {};
  const span<float, managed> view(managed_ptr<float>(fake, device_id(0)), 4);
  auto negative = prefetch(view, memory_location::host_numa(-1), stream_ref());
  REQUIRE(!negative);
  CHECK(negative.error() == errc::invalid_argument);
  CHECK(std::string(negative.error().message()).find("prefetch: host NUMA node -1") == 0);
  auto advised = advise(view, managed_advice::preferred_location, memory_location::host_numa(-2));
  REQUIRE(!advised);
  CHECK(advised.error() == errc::invalid_argument);
  CHECK(std::string(advised.error().message()).find("advise:") == 0);
  auto many = prefetch_many<float>(nullptr, 2, memory_location::host(), stream_ref());
  REQUIRE(!many);
  CHECK(many.error() == errc::invalid_argument);
  auto discard = discard_and_prefetch_many(&view, 1, memory_location::host_numa(-1), stream_ref());
  REQUIRE(!discard);
  CHECK(discard.error() == errc::invalid_argument);
  // A moved-from stream is refused before the location or the views are looked at.
  const stream_ref gone = stream_ref::from_native_handle(detail::invalid_stream(), device_id(0));
  for (const status& refused :
       {prefetch(view, memory_location::host(), gone), prefetch_many(&view, 1, memory_location::host(), gone),
        discard_and_prefetch_many(&view, 1, memory_location::host(), gone)}) {
    REQUIRE(!refused);
    CHECK(refused.error() == errc::invalid_argument);
    CHECK(std::string(refused.error().message()).find("stream") != std::string::npos);
  }
}

TEST_CASE("empty views and empty batches are done without CUDA", "[managed]") {
  const span<float, managed> none;
  CHECK(prefetch(none, memory_location::host(), stream_ref()));
  CHECK(advise(none, managed_advice::read_mostly, memory_location::host()));
  const span<float, managed> views[3] = {none, none, none};
  CHECK(prefetch_many(views, 3, memory_location::host(), stream_ref()));
  CHECK(discard_and_prefetch_many(views, 3, memory_location::host(), stream_ref()));
  CHECK(prefetch_many(views, 0, memory_location::host(), stream_ref()));
}

TEST_CASE("every advice has its CUDA value", "[managed]") {
  CHECK(detail::native_advice(managed_advice::read_mostly) == cudaMemAdviseSetReadMostly);
  CHECK(detail::native_advice(managed_advice::unset_read_mostly) == cudaMemAdviseUnsetReadMostly);
  CHECK(detail::native_advice(managed_advice::preferred_location) == cudaMemAdviseSetPreferredLocation);
  CHECK(detail::native_advice(managed_advice::unset_preferred_location) == cudaMemAdviseUnsetPreferredLocation);
  CHECK(detail::native_advice(managed_advice::accessed_by) == cudaMemAdviseSetAccessedBy);
  CHECK(detail::native_advice(managed_advice::unset_accessed_by) == cudaMemAdviseUnsetAccessedBy);
}

TEST_CASE("a host pool refuses a device location and host_numa_current before asking CUDA", "[managed][pool]") {
  auto on_device = host_pool_resource::create(memory_location::device(device_id(0)), device_id(0));
  REQUIRE(!on_device);
  CHECK(on_device.error() == errc::invalid_argument);
  CHECK(std::string(on_device.error().message()).find("host_pool_resource::create") == 0);
  auto current = host_pool_resource::create(memory_location::host_numa_current(), device_id(0));
  REQUIRE(!current);
  CHECK(current.error() == errc::invalid_argument);
}

TEST_CASE("with no device, prefetch, advice and host pools fail cleanly, naming the call", "[no_device]") {
  float fake[4] = {};
  const span<float, managed> view(managed_ptr<float>(fake, device_id(0)), 4);
  const auto to_device = memory_location::device(device_id(0));
  auto prefetched = prefetch(view, to_device, stream_ref());
  REQUIRE_FALSE(prefetched);
  CHECK(std::string(prefetched.error().message()).rfind("prefetch", 0) == 0);
  auto advised = advise(view, managed_advice::accessed_by, to_device);
  REQUIRE_FALSE(advised);
  CHECK(std::string(advised.error().message()).rfind("advise", 0) == 0);
  auto many = prefetch_many(&view, 1, to_device, stream_ref());
  REQUIRE_FALSE(many);
  CHECK(std::string(many.error().message()).rfind("prefetch_many", 0) == 0);
  auto refused = [](const result<host_pool_resource>& made) {
    REQUIRE_FALSE(made);
    CHECK(std::string(made.error().message()).rfind("host_pool_resource::create", 0) == 0);
  };
  refused(host_pool_resource::create());
  refused(host_pool_resource::create(memory_location::host(), device_id(0)));
}
