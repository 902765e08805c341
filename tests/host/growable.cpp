// SPDX-License-Identifier: MIT
// The growable buffer's address range (detail::vmm_range) against a fake driver that models reservations, physical
// handles, mappings and access byte-exactly in a map of its own: chunk rounding, capacity arithmetic and overflow,
// shrinking, peer access from the registry, and every failure unwinding to the state before the call. The driver
// structs the library declares are held to <cuda.h>'s layout.
#include <cudamem/growable.hpp>

#include "catch.hpp"

#include <cuda.h>

#include <cstddef>
#include <map>
#include <string>

using namespace cudamem;
using detail::vmm_range;

// The layout-equal declarations and constants match the driver's header.
static_assert(sizeof(detail::vmm_location) == sizeof(CUmemLocation));
static_assert(offsetof(detail::vmm_location, id) == offsetof(CUmemLocation, id));
static_assert(sizeof(detail::vmm_allocation_prop) == sizeof(CUmemAllocationProp));
static_assert(offsetof(detail::vmm_allocation_prop, requested_handle_types) ==
              offsetof(CUmemAllocationProp, requestedHandleTypes));
static_assert(offsetof(detail::vmm_allocation_prop, location) == offsetof(CUmemAllocationProp, location));
static_assert(offsetof(detail::vmm_allocation_prop, win32_handle_metadata) ==
              offsetof(CUmemAllocationProp, win32HandleMetaData));
static_assert(offsetof(detail::vmm_allocation_prop, alloc_flags) == offsetof(CUmemAllocationProp, allocFlags));
static_assert(sizeof(detail::vmm_access_desc) == sizeof(CUmemAccessDesc));
static_assert(offsetof(detail::vmm_access_desc, flags) == offsetof(CUmemAccessDesc, flags));
static_assert(sizeof(CUmemLocationType) == sizeof(int) && sizeof(CUmemAccess_flags) == sizeof(int) &&
              sizeof(CUresult) == sizeof(cudaError_t) && sizeof(CUdeviceptr) == sizeof(unsigned long long) &&
              sizeof(CUmemGenericAllocationHandle) == sizeof(unsigned long long));
static_assert(detail::vmm_allocation_pinned == CU_MEM_ALLOCATION_TYPE_PINNED &&
              detail::vmm_location_device == CU_MEM_LOCATION_TYPE_DEVICE &&
              detail::vmm_access_read_write == CU_MEM_ACCESS_FLAGS_PROT_READWRITE &&
              detail::vmm_access_none == CU_MEM_ACCESS_FLAGS_PROT_NONE &&
              detail::vmm_handle_none == CU_MEM_HANDLE_TYPE_NONE &&
              detail::vmm_handle_posix_fd == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR &&
              detail::vmm_granularity_recommended == CU_MEM_ALLOC_GRANULARITY_RECOMMENDED &&
              detail::vmm_attribute_supported == CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED &&
              detail::vmm_attribute_posix_fd == CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED);
static_assert(static_cast<int>(CUDA_ERROR_OUT_OF_MEMORY) == static_cast<int>(cudaErrorMemoryAllocation) &&
              static_cast<int>(CUDA_ERROR_INVALID_VALUE) == static_cast<int>(cudaErrorInvalidValue));

namespace {
constexpr std::size_t gran = 1u << 21;  // the fake's granularity: 2 MiB, as an H200's
constexpr unsigned long long fake_base = 1ull << 40;

// Everything the fake driver holds; a byte map would be large, so mappings are kept per mapped range (the driver's
// own rule: unmap and set access take whole mappings).
struct fake_driver {
  std::size_t reserved = 0;      // bytes reserved at fake_base (0: none)
  std::map<unsigned long long, std::size_t> handles;  // live physical handles -> bytes
  struct mapping {
    std::size_t bytes;
    unsigned long long handle;
    unsigned long long access;  // accessor bits
  };
  std::map<unsigned long long, mapping> mappings;  // address -> mapping
  unsigned long long next_handle = 1;
  int prop_handle_type = -1;
  std::string fail;  // the call that fails next ("cuMemCreate", ...), once
  int calls = 0;
  bool take_failure(const char* name) {
    ++calls;
    if (fail != name) return false;
    fail.clear();
    return true;
  }
  // Whether [addr, addr + bytes) is exactly a run of whole mappings.
  bool whole_mappings(unsigned long long addr, std::size_t bytes) const {
    unsigned long long at = addr;
    while (at < addr + bytes) {
      auto m = mappings.find(at);
      if (m == mappings.end()) return false;
      at += m->second.bytes;
    }
    return at == addr + bytes;
  }
} drv;

cudaError_t fake_reserve(unsigned long long* p, std::size_t bytes, std::size_t align, unsigned long long,
                         unsigned long long) {
  if (drv.take_failure("cuMemAddressReserve") || bytes > (std::size_t{1} << 50) || drv.reserved != 0)
    return cudaErrorMemoryAllocation;
  if (bytes % gran != 0 || align % gran != 0) return cudaErrorInvalidValue;
  drv.reserved = bytes;
  *p = fake_base;
  return cudaSuccess;
}
cudaError_t fake_free(unsigned long long p, std::size_t bytes) {
  if (p != fake_base || bytes != drv.reserved || !drv.mappings.empty()) return cudaErrorInvalidValue;
  drv.reserved = 0;
  return cudaSuccess;
}
cudaError_t fake_create(unsigned long long* h, std::size_t bytes, const detail::vmm_allocation_prop* prop,
                        unsigned long long) {
  if (drv.take_failure("cuMemCreate")) return cudaErrorMemoryAllocation;
  if (bytes == 0 || bytes % gran != 0 || prop->type != detail::vmm_allocation_pinned) return cudaErrorInvalidValue;
  drv.prop_handle_type = prop->requested_handle_types;
  *h = drv.next_handle++;
  drv.handles[*h] = bytes;
  return cudaSuccess;
}
cudaError_t fake_release(unsigned long long h) {
  if (drv.take_failure("cuMemRelease")) return cudaErrorInvalidValue;
  return drv.handles.erase(h) == 1 ? cudaSuccess : cudaErrorInvalidValue;
}
cudaError_t fake_map(unsigned long long p, std::size_t bytes, std::size_t offset, unsigned long long h,
                     unsigned long long) {
  if (drv.take_failure("cuMemMap")) return cudaErrorInvalidValue;
  auto handle = drv.handles.find(h);
  if (handle == drv.handles.end() || offset != 0 || bytes != handle->second) return cudaErrorInvalidValue;
  if (p < fake_base || p + bytes > fake_base + drv.reserved) return cudaErrorInvalidValue;
  for (const auto& [at, m] : drv.mappings)
    if (p < at + m.bytes && at < p + bytes) return cudaErrorInvalidValue;  // overlap
  drv.mappings[p] = {bytes, h, 0};
  return cudaSuccess;
}
cudaError_t fake_unmap(unsigned long long p, std::size_t bytes) {
  if (drv.take_failure("cuMemUnmap")) return cudaErrorInvalidValue;
  auto m = drv.mappings.find(p);
  if (m == drv.mappings.end() || m->second.bytes != bytes) return cudaErrorInvalidValue;
  drv.mappings.erase(m);
  return cudaSuccess;
}
cudaError_t fake_set_access(unsigned long long p, std::size_t bytes, const detail::vmm_access_desc* descs,
                            std::size_t count) {
  if (drv.take_failure("cuMemSetAccess")) return cudaErrorInvalidDevice;
  if (!drv.whole_mappings(p, bytes)) return cudaErrorInvalidValue;
  for (std::size_t i = 0; i < count; ++i)
    if (descs[i].location.type != detail::vmm_location_device ||
        (descs[i].flags != detail::vmm_access_read_write && descs[i].flags != detail::vmm_access_none))
      return cudaErrorInvalidValue;
  // As the driver: each device named gets its flags; devices not named keep theirs.
  for (unsigned long long at = p; at < p + bytes; at += drv.mappings[at].bytes)
    for (std::size_t i = 0; i < count; ++i) {
      const unsigned long long bit = 1ull << descs[i].location.id;
      auto& access = drv.mappings[at].access;
      access = descs[i].flags == detail::vmm_access_read_write ? access | bit : access & ~bit;
    }
  return cudaSuccess;
}
cudaError_t fake_granularity(std::size_t* g, const detail::vmm_allocation_prop*, int option) {
  if (option != detail::vmm_granularity_recommended) return cudaErrorInvalidValue;
  *g = gran;
  return cudaSuccess;
}
constexpr detail::vmm_calls fake_calls{.address_reserve = &fake_reserve,
                                       .address_free = &fake_free,
                                       .create = &fake_create,
                                       .release = &fake_release,
                                       .map = &fake_map,
                                       .unmap = &fake_unmap,
                                       .set_access = &fake_set_access,
                                       .granularity = &fake_granularity};
// An unmap that fails on the n-th call (1-based) and works otherwise.
int unmaps_until_failure = 0;
cudaError_t flaky_unmap(unsigned long long p, std::size_t bytes) {
  return --unmaps_until_failure == 0 ? cudaErrorNotPermitted : fake_unmap(p, bytes);
}

// The fake's state, to compare before and after a failed call.
struct snapshot {
  std::size_t reserved, handles, mappings;
  std::size_t mapped_bytes;
  unsigned long long access_or;
  friend bool operator==(const snapshot&, const snapshot&) = default;
};
snapshot take_snapshot() {
  snapshot s{drv.reserved, drv.handles.size(), drv.mappings.size(), 0, 0};
  for (const auto& [at, m] : drv.mappings) {
    s.mapped_bytes += m.bytes;
    s.access_or |= m.access;
  }
  return s;
}
// The range's own figures agree with the fake's: contiguous from the base, every mapping with the range's access.
void check_consistent(const vmm_range& r) {
  std::size_t at = 0;
  for (std::size_t i = 0; i < r.chunk_count(); ++i) {
    const auto& c = r.chunks()[i];
    REQUIRE(c.offset == at);
    auto m = drv.mappings.find(fake_base + c.offset);
    REQUIRE(m != drv.mappings.end());
    REQUIRE(m->second.bytes == c.bytes);
    REQUIRE(m->second.handle == c.handle);
    REQUIRE(m->second.access == r.accessors());
    at += c.bytes;
  }
  REQUIRE(at == r.mapped());
  REQUIRE(drv.mappings.size() == r.chunk_count());
  REQUIRE(drv.handles.size() == r.chunk_count());
}
vmm_range reserved_range(std::size_t bytes, int device = 0) {
  drv = fake_driver();
  auto r = vmm_range::reserve(fake_calls, device, bytes, detail::vmm_handle_none, "test");
  REQUIRE(r);
  return static_cast<vmm_range&&>(*r);
}
}  // namespace

TEST_CASE("round_up_to: multiples of a power of two, overflow and bad granularity refused", "[growable]") {
  // Reference: the smallest multiple of g not below n, by repeated addition.
  for (std::size_t g : {std::size_t{1}, std::size_t{2}, std::size_t{4096}, gran})
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, g - 1, g, g + 1, 3 * g, 3 * g + 1}) {
      std::size_t want = 0;
      while (want < n) want += g;
      auto got = detail::round_up_to(n, g, "test");
      REQUIRE(got);
      CHECK(*got == want);
    }
  auto overflow = detail::round_up_to(~std::size_t{0} - 5, gran, "growable_buffer::grow");
  REQUIRE(!overflow);
  CHECK(overflow.error() == errc::size_overflow);
  CHECK(std::string(overflow.error().message()).find("growable_buffer::grow") == 0);
  CHECK(detail::round_up_to(~std::size_t{0} - gran + 1, gran, "t").value() == ~std::size_t{0} - gran + 1);
  auto bad = detail::round_up_to(10, 3 * 1024, "test");
  REQUIRE(!bad);
  CHECK(bad.error() == errc::invalid_argument);
}

TEST_CASE("a reservation is rounded up to the granularity and maps nothing", "[growable]") {
  for (std::size_t bytes : {std::size_t{0}, std::size_t{1}, gran - 1, gran, gran + 1, 10 * gran}) {
    vmm_range r = reserved_range(bytes);
    const std::size_t want = bytes <= gran ? gran : (bytes + gran - 1) / gran * gran;
    CHECK(r.reserved() == want);
    CHECK(drv.reserved == want);
    CHECK(r.mapped() == 0);
    CHECK(r.base() == fake_base);
    CHECK(r.accessors() == 1u);
  }
  CHECK(drv.reserved == 0);  // the last range freed its reservation
}

TEST_CASE("a reservation the driver refuses, or one that overflows, is a clear error", "[growable]") {
  drv = fake_driver();
  auto huge =
      vmm_range::reserve(fake_calls, 0, std::size_t{1} << 60, detail::vmm_handle_none, "growable_buffer::create");
  REQUIRE(!huge);
  CHECK(huge.error() == cudaErrorMemoryAllocation);
  CHECK(std::string(huge.error().message()).find("cuMemAddressReserve") != std::string::npos);
  auto overflow = vmm_range::reserve(fake_calls, 0, ~std::size_t{0}, detail::vmm_handle_none, "t");
  REQUIRE(!overflow);
  CHECK(overflow.error() == errc::size_overflow);
  auto none = vmm_range::reserve(detail::vmm_calls{}, 0, gran, detail::vmm_handle_none, "t");
  REQUIRE(!none);
  CHECK(none.error() == errc::not_supported);
  CHECK(drv.reserved == 0);
}

TEST_CASE("growth maps one chunk per call for the missing bytes, rounded up, contiguous", "[growable]") {
  vmm_range r = reserved_range(64 * gran);
  std::size_t want = 0;
  int chunks = 0;
  for (std::size_t bytes : {std::size_t{1}, gran, gran + 1, 5 * gran - 3, 5 * gran, 17 * gran + 1, 64 * gran}) {
    std::size_t rounded = 0;
    while (rounded < bytes) rounded += gran;
    if (rounded > want) ++chunks;
    want = rounded > want ? rounded : want;
    REQUIRE(r.map_to(bytes, 0, "test"));
    CHECK(r.mapped() == want);
    CHECK(static_cast<int>(r.chunk_count()) == chunks);
    check_consistent(r);
  }
  REQUIRE(r.map_to(3, 0, "test"));  // already mapped: nothing happens
  CHECK(r.mapped() == 64 * gran);
  CHECK(static_cast<int>(r.chunk_count()) == chunks);
}

TEST_CASE("growth past the reservation is out_of_range and changes nothing", "[growable]") {
  vmm_range r = reserved_range(4 * gran);
  REQUIRE(r.map_to(3 * gran, 0, "test"));
  const snapshot before = take_snapshot();
  auto past = r.map_to(4 * gran + 1, 0, "growable_buffer::grow");
  REQUIRE(!past);
  CHECK(past.error() == errc::out_of_range);
  CHECK(std::string(past.error().message()).find("exceed the reserved capacity") != std::string::npos);
  CHECK(take_snapshot() == before);
  CHECK(r.mapped() == 3 * gran);
  REQUIRE(r.map_to(4 * gran, 0, "test"));  // exactly the reservation is fine
  check_consistent(r);
}

TEST_CASE("each failing step of a growth unwinds what the call did", "[growable]") {
  for (const char* step : {"cuMemCreate", "cuMemMap", "cuMemSetAccess"}) {
    CAPTURE(step);
    vmm_range r = reserved_range(16 * gran);
    REQUIRE(r.map_to(2 * gran, 0, "test"));
    const snapshot before = take_snapshot();
    drv.fail = step;
    auto failed = r.map_to(6 * gran, 0, "growable_buffer::grow");
    REQUIRE(!failed);
    CHECK(std::string(failed.error().message()).find(step) != std::string::npos);
    CHECK(take_snapshot() == before);  // no handle leaked, no mapping left
    CHECK(r.mapped() == 2 * gran);
    check_consistent(r);
    REQUIRE(r.map_to(6 * gran, 0, "test"));  // and the next attempt works
    check_consistent(r);
  }
}

TEST_CASE("new accessors reach the mapped part and every later chunk; a failure keeps the old set", "[growable]") {
  vmm_range r = reserved_range(16 * gran, 1);
  CHECK(r.accessors() == 0b10u);
  REQUIRE(r.map_to(2 * gran, 0, "test"));
  REQUIRE(r.map_to(4 * gran, 0b1000u, "test"));  // device 3 joins: both chunks open to it
  CHECK(r.accessors() == 0b1010u);
  check_consistent(r);
  REQUIRE(r.map_to(6 * gran, 0, "test"));  // later chunks inherit it
  check_consistent(r);
  drv.fail = "cuMemSetAccess";
  auto refused = r.map_to(6 * gran, 0b1u, "test");
  REQUIRE(!refused);
  CHECK(r.accessors() == 0b1010u);
  check_consistent(r);
  // Access set on the old part, then the new chunk fails: the old part's access goes back.
  drv.fail = "cuMemCreate";
  REQUIRE(!r.map_to(8 * gran, 0b1u, "test"));
  CHECK(r.accessors() == 0b1010u);
  check_consistent(r);
}

TEST_CASE("unmapping releases the chunks wholly past the kept bytes, never a chunk in use", "[growable]") {
  vmm_range r = reserved_range(32 * gran);
  for (std::size_t bytes : {2 * gran, 3 * gran, 7 * gran, 8 * gran}) REQUIRE(r.map_to(bytes, 0, "test"));
  // chunks: [0,2) [2,3) [3,7) [7,8) in granules
  REQUIRE(r.unmap_past(7 * gran, "test"));
  CHECK(r.mapped() == 7 * gran);
  check_consistent(r);
  REQUIRE(r.unmap_past(4 * gran, "test"));  // [3,7) holds byte 4 granules in: it stays
  CHECK(r.mapped() == 7 * gran);
  REQUIRE(r.unmap_past(3 * gran - 1, "test"));
  CHECK(r.mapped() == 3 * gran);
  check_consistent(r);
  REQUIRE(r.unmap_past(0, "test"));
  CHECK(r.mapped() == 0);
  check_consistent(r);
  REQUIRE(r.map_to(5 * gran, 0, "test"));  // the range maps again after emptying
  check_consistent(r);
}

TEST_CASE("an unmap that fails midway maps back what the call unmapped", "[growable]") {
  detail::vmm_calls flaky = fake_calls;
  flaky.unmap = &flaky_unmap;
  drv = fake_driver();
  unmaps_until_failure = 2;  // unmap_past(gran) unmaps [7,8), then [3,7), then [2,3): the second fails
  {
    auto r = vmm_range::reserve(flaky, 0, 32 * gran, detail::vmm_handle_none, "t");
    REQUIRE(r);
    for (std::size_t bytes : {2 * gran, 3 * gran, 7 * gran, 8 * gran}) REQUIRE(r->map_to(bytes, 0b101u, "test"));
    const snapshot before = take_snapshot();
    auto gone = r->unmap_past(gran, "growable_buffer::shrink_to_fit");
    REQUIRE(!gone);
    CHECK(gone.error() == cudaErrorNotPermitted);
    CHECK(std::string(gone.error().message()).find("growable_buffer::shrink_to_fit") == 0);
    CHECK(take_snapshot() == before);  // [7,8) was mapped again, with its access
    CHECK(r->mapped() == 8 * gran);
    CHECK(r->accessors() == 0b101u);
    check_consistent(*r);
  }
  CHECK(drv.mappings.empty());  // later unmaps work: the range let everything go
  CHECK(drv.handles.empty());
  CHECK(drv.reserved == 0);
}

TEST_CASE("a moved range keeps everything; the moved-from one holds nothing", "[growable]") {
  vmm_range r = reserved_range(8 * gran, 2);
  REQUIRE(r.map_to(3 * gran, 0b1u, "test"));
  vmm_range moved = static_cast<vmm_range&&>(r);
  CHECK(r.base() == 0);
  CHECK(r.mapped() == 0);
  CHECK(r.reserved() == 0);
  CHECK(r.chunk_count() == 0);
  CHECK(r.accessors() == 0);  // no device reaches a range that holds nothing
  CHECK(r.granularity() == 0);
  CHECK(moved.mapped() == 3 * gran);
  CHECK(moved.reserved() == 8 * gran);
  CHECK(moved.accessors() == 0b101u);
  CHECK(moved.granularity() == gran);
  check_consistent(moved);
  moved = static_cast<vmm_range&&>(r);  // the moved-from range, assigned over a live one: that one is freed
  CHECK(drv.handles.empty());
  CHECK(drv.reserved == 0);
  CHECK(moved.base() == 0);
  CHECK(moved.accessors() == 0);
}

TEST_CASE("a range frees everything it holds: chunks, handles, reservation", "[growable]") {
  {
    vmm_range r = reserved_range(8 * gran);
    REQUIRE(r.map_to(3 * gran, 0, "test"));
    REQUIRE(r.map_to(8 * gran, 0, "test"));
    CHECK(drv.handles.size() == 2);
  }
  CHECK(drv.handles.empty());
  CHECK(drv.mappings.empty());
  CHECK(drv.reserved == 0);
}

TEST_CASE("chunks are created with the requested shareable handle type", "[growable]") {
  drv = fake_driver();
  auto r = vmm_range::reserve(fake_calls, 0, 4 * gran, detail::vmm_handle_posix_fd, "t");
  REQUIRE(r);
  REQUIRE(r->map_to(gran, 0, "t"));
  CHECK(drv.prop_handle_type == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  CHECK(r->handle_type() == detail::vmm_handle_posix_fd);
}

TEST_CASE("the registry names the accessors holding guards to an owner", "[growable][peer]") {
  detail::peer_table table;
  constexpr detail::peer_switch nothing{[](device_id, device_id, detail::peer_entry&) noexcept { return status(); },
                                        [](device_id, device_id, const detail::peer_entry&) noexcept {}};
  CHECK(table.accessors_of(device_id(0)) == 0);
  REQUIRE(table.acquire(device_id(2), device_id(0), nothing));
  REQUIRE(table.acquire(device_id(5), device_id(0), nothing));
  REQUIRE(table.acquire(device_id(5), device_id(0), nothing));
  REQUIRE(table.acquire(device_id(0), device_id(5), nothing));  // the other direction: not an accessor of 0
  CHECK(table.accessors_of(device_id(0)) == ((1ull << 2) | (1ull << 5)));
  table.release(device_id(5), device_id(0), nothing);
  CHECK(table.accessors_of(device_id(0)) == ((1ull << 2) | (1ull << 5)));  // one guard of (5, 0) left
  table.release(device_id(5), device_id(0), nothing);
  table.release(device_id(2), device_id(0), nothing);
  CHECK(table.accessors_of(device_id(0)) == 0);
  CHECK(table.accessors_of(device_id(-1)) == 0);
  CHECK(table.accessors_of(device_id(64)) == 0);
}

TEST_CASE("a growable buffer on a moved-from stream is refused before CUDA is asked", "[growable]") {
  const stream_ref gone = stream_ref::from_native_handle(detail::invalid_stream(), device_id(0));
  auto made = growable_buffer<float>::create(1000, gone);
  REQUIRE_FALSE(made);
  CHECK(made.error() == errc::invalid_argument);
  CHECK(std::string(made.error().message()).rfind("growable_buffer::create: the stream was moved from", 0) == 0);
}

TEST_CASE("with no device, growable buffers fail cleanly, naming the call", "[no_device]") {
  auto refused = [](const result<growable_buffer<float>>& made) {
    REQUIRE_FALSE(made);
    INFO(made.error().message());
    CHECK(made.error().code() == errc::cuda);
    CHECK(std::string(made.error().message()).rfind("growable_buffer::create", 0) == 0);
  };
  refused(growable_buffer<float>::create(1000));
  refused(growable_buffer<float>::create(1000, device_id(0)));
  refused(growable_buffer<float>::create(1000, stream_ref::legacy()));
  growable_buffer<float> empty;  // nothing reserved: every call refuses, the destructor does nothing
  CHECK(empty.grow(1).error() == errc::invalid_argument);
  CHECK(empty.reserve(1).error() == errc::invalid_argument);
  CHECK(empty.shrink_to_fit().error() == errc::invalid_argument);
  CHECK(empty.refresh_peer_access().error() == errc::invalid_argument);
  CHECK(empty.max_size() == 0);
  CHECK(empty.capacity() == 0);
  CHECK(empty.chunks().size() == 0);
  CHECK(!empty.accessible_from(device_id(0)));
}
