// SPDX-License-Identifier: MIT
// cudamem: a reserved virtual address range that physical chunks are mapped into and out of (the driver's virtual
// memory management), behind growable_buffer. The driver calls are a table passed in (the driver's, loaded at run
// time, or a fake in the host tests), so the arithmetic and every unwinding path are tested without a device.
// Internal; docs/growable.md, docs/decisions.md.
#pragma once

#include <cudamem/detail/driver.hpp>
#include <cudamem/detail/storage.hpp>
#include <cudamem/error.hpp>

#include <cstddef>

namespace cudamem::detail {

// The driver's VMM types in layout-equal form, so that no header needs <cuda.h> (26,000 lines); the enums are
// int-sized there. tests/host/growable.cpp holds each of them, and the constants below, to <cuda.h>'s.
struct vmm_location {
  int type = 0;  // CUmemLocationType
  int id = 0;
};
struct vmm_allocation_prop {  // CUmemAllocationProp
  int type = 0;                    // CUmemAllocationType
  int requested_handle_types = 0;  // CUmemAllocationHandleType
  vmm_location location;
  void* win32_handle_metadata = nullptr;
  struct {
    unsigned char compression_type = 0;
    unsigned char gpu_direct_rdma_capable = 0;
    unsigned short usage = 0;
    unsigned char reserved[4] = {};
  } alloc_flags;
};
struct vmm_access_desc {  // CUmemAccessDesc
  vmm_location location;
  int flags = 0;  // CUmemAccess_flags
};
inline constexpr int vmm_allocation_pinned = 1;     // CU_MEM_ALLOCATION_TYPE_PINNED
inline constexpr int vmm_location_device = 1;       // CU_MEM_LOCATION_TYPE_DEVICE
inline constexpr int vmm_access_read_write = 3;     // CU_MEM_ACCESS_FLAGS_PROT_READWRITE
inline constexpr int vmm_access_none = 0;           // CU_MEM_ACCESS_FLAGS_PROT_NONE
inline constexpr int vmm_handle_none = 0;           // CU_MEM_HANDLE_TYPE_NONE
inline constexpr int vmm_handle_posix_fd = 1;       // CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
inline constexpr int vmm_granularity_recommended = 1;  // CU_MEM_ALLOC_GRANULARITY_RECOMMENDED
inline constexpr int vmm_attribute_supported = 102;    // CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
inline constexpr int vmm_attribute_posix_fd = 103;  // CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED

/// The driver entry points the range uses; CUresult is returned as cudaError_t (int-sized; the codes the library
/// names, success and out of memory among them, are equal in both), CUdeviceptr and the handle as unsigned long long.
struct vmm_calls {
  cudaError_t (*address_reserve)(unsigned long long*, std::size_t, std::size_t, unsigned long long,
                                 unsigned long long) = nullptr;
  cudaError_t (*address_free)(unsigned long long, std::size_t) = nullptr;
  cudaError_t (*create)(unsigned long long*, std::size_t, const vmm_allocation_prop*, unsigned long long) = nullptr;
  cudaError_t (*release)(unsigned long long) = nullptr;
  cudaError_t (*map)(unsigned long long, std::size_t, std::size_t, unsigned long long, unsigned long long) = nullptr;
  cudaError_t (*unmap)(unsigned long long, std::size_t) = nullptr;
  cudaError_t (*set_access)(unsigned long long, std::size_t, const vmm_access_desc*, std::size_t) = nullptr;
  cudaError_t (*granularity)(std::size_t*, const vmm_allocation_prop*, int) = nullptr;
  // What the device supports: cuDeviceGet (ordinal -> CUdevice, an int) and cuDeviceGetAttribute.
  cudaError_t (*device_get)(int*, int) = nullptr;
  cudaError_t (*device_attribute)(int*, int, int) = nullptr;
  bool complete() const noexcept {
    return address_reserve && address_free && create && release && map && unmap && set_access && granularity;
  }
};
[[gnu::noinline]] inline vmm_calls load_vmm_calls() noexcept {
  vmm_calls t;
  const cudaError_t earlier = cudaPeekAtLastError();
  load_driver_entry("cuMemAddressReserve", t.address_reserve);
  load_driver_entry("cuMemAddressFree", t.address_free);
  load_driver_entry("cuMemCreate", t.create);
  load_driver_entry("cuMemRelease", t.release);
  load_driver_entry("cuMemMap", t.map);
  load_driver_entry("cuMemUnmap", t.unmap);
  load_driver_entry("cuMemSetAccess", t.set_access);
  load_driver_entry("cuMemGetAllocationGranularity", t.granularity);
  load_driver_entry("cuDeviceGet", t.device_get);
  load_driver_entry("cuDeviceGetAttribute", t.device_attribute);
  if (earlier == cudaSuccess) (void)cudaGetLastError();  // a failed lookup's own error, not the caller's
  return t;
}
/// The driver's table, loaded once.
inline const vmm_calls& driver_vmm() noexcept {
  static const vmm_calls table = load_vmm_calls();
  return table;
}
/// Whether device `ordinal` answers the driver attribute `attribute` (one of the two above) with non-zero; a driver
/// without the query answers not_supported.
inline result<bool> vmm_device_supports(const vmm_calls& calls, int ordinal, int attribute, const char* api) noexcept {
  if (calls.device_get == nullptr || calls.device_attribute == nullptr)
    return error(errc::not_supported, api, "the driver lacks cuDeviceGetAttribute");
  int device = 0, value = 0;
  CUDAMEM_TRY(check_driver(calls.device_get(&device, ordinal), api, "cuDeviceGet"));
  CUDAMEM_TRY(check_driver(calls.device_attribute(&value, attribute, device), api, "cuDeviceGetAttribute"));
  return value != 0;
}

/// `bytes` rounded up to a multiple of `granularity` (a power of two), or size_overflow naming `api`.
inline result<std::size_t> round_up_to(std::size_t bytes, std::size_t granularity, const char* api) noexcept {
  if (granularity == 0 || (granularity & (granularity - 1)) != 0)
    return error(errc::invalid_argument, api, "granularity %zu is not a power of two", granularity);
  std::size_t padded = 0;
  if (__builtin_add_overflow(bytes, granularity - 1, &padded))
    return error(errc::size_overflow, api, "%zu bytes rounded up to %zu overflow std::size_t", bytes, granularity);
  return padded & ~(granularity - 1);
}

/// One physical allocation, mapped at `offset` bytes into the range.
struct vmm_chunk {
  unsigned long long handle = 0;  ///< CUmemGenericAllocationHandle: what cuMemExportToShareableHandle takes.
  std::size_t offset = 0;  ///< Its first byte, from the start of the range.
  std::size_t bytes = 0;  ///< Its size, a multiple of the granularity.
};

/// A reserved range of `reserved()` bytes on one device, of which [0, mapped()) is backed by chunks, each readable
/// and writable from the owner and from every device in `accessors()` (a bit per ordinal, the owner's included).
/// Every operation either completes or leaves the range as it was. Not thread-safe; move-only.
class vmm_range {
 public:
  vmm_range() noexcept = default;
  vmm_range(vmm_range&& other) noexcept { take(other); }
  vmm_range& operator=(vmm_range&& other) noexcept {
    if (this != &other) {
      destroy();
      take(other);
    }
    return *this;
  }
  vmm_range(const vmm_range&) = delete;
  vmm_range& operator=(const vmm_range&) = delete;
  ~vmm_range() { destroy(); }

  /// Reserves `bytes` (rounded up to the recommended granularity) on `device`; chunks to come are made exportable as
  /// `handle_type` (vmm_handle_none or vmm_handle_posix_fd). Errors: not_supported (no VMM entry points),
  /// size_overflow, CUDA errors (the reservation's, cudaErrorMemoryAllocation for a range the device cannot reserve).
  static result<vmm_range> reserve(const vmm_calls& calls, int device, std::size_t bytes, int handle_type,
                                   const char* api) noexcept {
    if (!calls.complete())
      return error(errc::not_supported, api, "the driver lacks the virtual memory management entry points");
    vmm_range range;
    range.calls_ = &calls;
    range.device_ = device;
    range.handle_type_ = handle_type;
    range.accessors_ = 1ull << device;
    const vmm_allocation_prop prop = range.properties();
    CUDAMEM_TRY(check_driver(calls.granularity(&range.granularity_, &prop, vmm_granularity_recommended), api,
                             "cuMemGetAllocationGranularity"));
    auto whole = round_up_to(bytes == 0 ? 1 : bytes, range.granularity_, api);
    if (!whole) return whole.error();
    unsigned long long base = 0;
    CUDAMEM_TRY(
        check_driver(calls.address_reserve(&base, *whole, range.granularity_, 0, 0), api, "cuMemAddressReserve"));
    range.base_ = base;
    range.reserved_ = *whole;
    return range;
  }

  /// Backs [0, round_up(bytes)) with one new chunk for what is not mapped yet, accessible from accessors() | `more`
  /// (which join accessors() on success). Errors, nothing changed: out_of_range (past reserved()), size_overflow,
  /// CUDA errors (cuMemCreate's cudaErrorMemoryAllocation when the device is full).
  status map_to(std::size_t bytes, unsigned long long more, const char* api) noexcept {
    if (bytes > reserved_)
      return error(errc::out_of_range, api, "%zu bytes exceed the reserved capacity of %zu bytes", bytes, reserved_);
    auto whole = round_up_to(bytes, granularity_, api);
    if (!whole) return whole.error();
    const unsigned long long accessors = accessors_ | more;
    if (accessors != accessors_) CUDAMEM_TRY(set_access(0, mapped_, accessors, api));  // the mapped part first
    if (*whole > mapped_) {
      if (const status grown = add_chunk(*whole - mapped_, accessors, api); !grown) {
        if (accessors != accessors_) (void)set_access(0, mapped_, 0, api, more & ~accessors_);  // revoke the new
        return grown;
      }
    }
    accessors_ = accessors;
    return {};
  }
  /// Unmaps and releases the chunks wholly past round_up(bytes); a chunk partly below stays. Errors, nothing
  /// changed: CUDA errors (cuMemUnmap's; the chunks unmapped before it failed are mapped again).
  status unmap_past(std::size_t bytes, const char* api) noexcept {
    auto whole = round_up_to(bytes, granularity_, api);
    if (!whole) return whole.error();
    std::size_t keep = chunks_.size();
    while (keep > 0 && chunks_[keep - 1].offset >= *whole) --keep;
    for (std::size_t i = chunks_.size(); i > keep; --i) {
      const vmm_chunk& c = chunks_[i - 1];
      if (const status gone = check_driver(calls_->unmap(base_ + c.offset, c.bytes), api, "cuMemUnmap"); !gone) {
        for (std::size_t j = i; j < chunks_.size(); ++j) (void)remap(chunks_[j]);  // undo this call's unmaps
        return gone;
      }
    }
    while (chunks_.size() > keep) {
      check_driver_release(calls_->release(chunks_[chunks_.size() - 1].handle), "cuMemRelease");
      chunks_.pop_back();
    }
    mapped_ = keep == 0 ? 0 : chunks_[keep - 1].offset + chunks_[keep - 1].bytes;
    return {};
  }

  unsigned long long base() const noexcept { return base_; }  ///< The range's first byte (0: none).
  std::size_t reserved() const noexcept { return reserved_; }  ///< Reserved bytes.
  std::size_t mapped() const noexcept { return mapped_; }  ///< Bytes backed from the start.
  std::size_t granularity() const noexcept { return granularity_; }  ///< Chunk sizes are multiples of it.
  unsigned long long accessors() const noexcept { return accessors_; }  ///< Devices that reach it, a bit each.
  int handle_type() const noexcept { return handle_type_; }  ///< The chunks' shareable handle type.
  const vmm_chunk* chunks() const noexcept { return chunks_.empty() ? nullptr : &chunks_[0]; }  ///< In order.
  std::size_t chunk_count() const noexcept { return chunks_.size(); }  ///< How many chunks are mapped.

 private:
  vmm_allocation_prop properties() const noexcept {
    vmm_allocation_prop prop;
    prop.type = vmm_allocation_pinned;
    prop.requested_handle_types = handle_type_;
    prop.location = {vmm_location_device, device_};
    return prop;
  }
  // Read-write for each device in `accessors`, none for each in `revoked`; the driver leaves devices not named as
  // they were.
  status set_access(std::size_t offset, std::size_t bytes, unsigned long long accessors, const char* api,
                    unsigned long long revoked = 0) noexcept {
    if (bytes == 0) return {};
    vmm_access_desc descs[64];
    std::size_t count = 0;
    for (int d = 0; d < 64; ++d) {
      if ((accessors >> d) & 1u) descs[count++] = {{vmm_location_device, d}, vmm_access_read_write};
      else if ((revoked >> d) & 1u) descs[count++] = {{vmm_location_device, d}, vmm_access_none};
    }
    return check_driver(calls_->set_access(base_ + offset, bytes, descs, count), api, "cuMemSetAccess");
  }
  status add_chunk(std::size_t bytes, unsigned long long accessors, const char* api) noexcept {
    const vmm_allocation_prop prop = properties();
    vmm_chunk c{0, mapped_, bytes};
    CUDAMEM_TRY(check_driver(calls_->create(&c.handle, bytes, &prop, 0), api, "cuMemCreate"));
    status done = check_driver(calls_->map(base_ + c.offset, bytes, 0, c.handle, 0), api, "cuMemMap");
    if (done) {
      done = set_access(c.offset, bytes, accessors, api);
      if (!done) (void)calls_->unmap(base_ + c.offset, bytes);
    }
    if (!done) {
      (void)calls_->release(c.handle);
      return done;
    }
    chunks_.push_back(c);
    mapped_ += bytes;
    return {};
  }
  status remap(const vmm_chunk& c) noexcept {
    CUDAMEM_TRY(check_driver(calls_->map(base_ + c.offset, c.bytes, 0, c.handle, 0), nullptr, "cuMemMap"));
    return set_access(c.offset, c.bytes, accessors_, nullptr);
  }
  void take(vmm_range& other) noexcept {
    calls_ = other.calls_;
    base_ = other.base_;
    reserved_ = other.reserved_;
    mapped_ = other.mapped_;
    granularity_ = other.granularity_;
    accessors_ = other.accessors_;
    device_ = other.device_;
    handle_type_ = other.handle_type_;
    chunks_.swap(other.chunks_);  // this one's are none: fresh or destroyed
    other.forget();
  }
  // Holds nothing, as a default-made range: no device reaches it (accessible_from says no after a move).
  void forget() noexcept {
    base_ = 0;
    reserved_ = mapped_ = granularity_ = 0;
    accessors_ = 0;
  }
  // Failures go to the release handler; the caller has made sure no work still uses the range.
  void destroy() noexcept {
    if (base_ == 0) return;
    for (std::size_t i = chunks_.size(); i > 0; --i) {
      const vmm_chunk& c = chunks_[i - 1];
      check_driver_release(calls_->unmap(base_ + c.offset, c.bytes), "cuMemUnmap");
      check_driver_release(calls_->release(c.handle), "cuMemRelease");
    }
    chunks_.erase(chunks_.begin(), chunks_.end());
    check_driver_release(calls_->address_free(base_, reserved_), "cuMemAddressFree");
    forget();
  }

  const vmm_calls* calls_ = nullptr;
  unsigned long long base_ = 0;
  std::size_t reserved_ = 0, mapped_ = 0, granularity_ = 0;
  unsigned long long accessors_ = 0;
  int device_ = 0;
  int handle_type_ = vmm_handle_none;
  vec<vmm_chunk> chunks_;
};

}  // namespace cudamem::detail
