// SPDX-License-Identifier: MIT
/// \file
/// `growable_buffer<T>`: device memory whose address never moves. It reserves a virtual address range once and maps
/// physical memory into it as it grows (the driver's virtual memory management: cuMemAddressReserve, cuMemCreate,
/// cuMemMap, cuMemSetAccess), so its pointer and every span taken from it stay valid, and no byte is copied.
/// Not in the umbrella header: include <cudamem/growable.hpp>. Guide: docs/growable.md.
///
///     growable_buffer<T>::create(max_size [, device_id | stream_ref] [, growable_options])   result<growable_buffer>
///       grow(n)            size() = n >= size(), mapping what is missing; synchronous, no copy, nothing moves
///       reserve(n)         capacity() >= n, size() unchanged;  resize(n): either way, nothing unmapped
///       shrink_to_fit()    synchronizes stream(), then unmaps the chunks wholly past size()
///       refresh_peer_access()   gives every device holding a peer_access guard to device() access, now
///       view(), data(), size(), capacity(), max_size(), granularity(), device(), stream(), set_stream(s)
///       accessible_from(device_id), chunks() (physical handles, for export), handle_type()
///     growable_options: handle (shareable_handle::none or posix_fd)
#pragma once

#include <cudamem/detail/capture.hpp>
#include <cudamem/detail/peer_registry.hpp>
#include <cudamem/detail/vmm.hpp>
#include <cudamem/span.hpp>
#include <cudamem/stream.hpp>

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace cudamem {

/// The handle type the physical chunks are created exportable as (cuMemExportToShareableHandle), chosen at creation.
enum class shareable_handle : unsigned char {
  none,      ///< Not exportable (CU_MEM_HANDLE_TYPE_NONE).
  posix_fd,  ///< A POSIX file descriptor (CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR), passed over a Unix socket.
};
/// How a growable_buffer is made.
struct growable_options {
  shareable_handle handle = shareable_handle::none;  ///< What its chunks can be exported as.
};
/// One physical allocation of a growable_buffer: `handle` (CUmemGenericAllocationHandle, owned by the buffer: export
/// it, never release it), mapped `offset` bytes from data(), `bytes` long (a multiple of granularity()).
using physical_chunk = detail::vmm_chunk;

namespace detail {
inline int vmm_handle_of(shareable_handle h) noexcept {
  return h == shareable_handle::posix_fd ? vmm_handle_posix_fd : vmm_handle_none;
}
/// The devices that hold a peer_access guard reaching `owner` now, a bit per ordinal.
inline unsigned long long guarded_accessors(device_id owner) noexcept {
  return process_wide<peer_table>().accessors_of(owner);
}
}  // namespace detail

/// Device memory of up to max_size() elements of T at one address, of which capacity() are backed by physical memory
/// and size() are in use (uninitialized when mapped). Move-only, deep-const; not thread-safe (as a buffer is not).
///
/// Order: growing is synchronous on the host and maps only memory past capacity() (a device joining the accessor set
/// also gets access to the mapped part, which only adds a device); kernels still reading the old extent run on
/// undisturbed, and work queued after grow() returns, on any stream, may use the new extent. No synchronization is
/// needed. Unmapping (shrink_to_fit, the destructor) synchronizes stream(); work on other streams
/// that touches the unmapped part must be complete (or ordered before stream() with an event) by then.
///
/// Peer access: every chunk is readable and writable from device() and from each device in the buffer's accessor set.
/// That set starts as the devices holding a peer_access guard to device() at creation, and each grow, reserve or
/// refresh_peer_access adds the devices that hold one then; it never shrinks while the buffer lives (releasing a
/// guard does not revoke the buffer's mapping access). A guard taken later reaches the buffer after the next grow,
/// reserve or refresh_peer_access().
template <class T, memory_kind Kind = cudamem::device>
class growable_buffer {
  static_assert(std::is_same_v<Kind, cudamem::device>,
                "cudamem::growable_buffer: only device memory can be grown in place");
  static_assert(std::is_trivially_copyable_v<T>, "cudamem::growable_buffer<T>: T must be trivially copyable");
  static_assert(!std::is_const_v<T>, "cudamem::growable_buffer<T>: T must not be const (take a span<const T>)");

 public:
  using element_type = T;  ///< T.
  using value_type = T;  ///< T.
  using kind = Kind;  ///< cudamem::device.
  static constexpr bool owns_memory = true;  ///< Stream-ordered operations refuse a temporary buffer.
  growable_buffer() noexcept = default;  ///< Empty, reserving nothing (max_size() 0).

  /// Reserves room for `max_size` elements (rounded up to the granularity) on the current device; maps nothing.
  /// Synchronous. Errors: size_overflow, not_supported (no VMM on the device or in the driver), out_of_range, CUDA
  /// errors (cudaErrorMemoryAllocation: an address range the device cannot reserve).
  [[nodiscard]] static result<growable_buffer> create(std::size_t max_size, growable_options options = {}) noexcept {
    auto id = current_device();
    if (!id) return id.error().with_api(api_create);
    return make(max_size, *id, stream_ref(), options);
  }
  /// As create(max_size, options), on device `id`, freed after synchronizing its legacy default stream.
  [[nodiscard]] static result<growable_buffer> create(std::size_t max_size, device_id id,
                                                      growable_options options = {}) noexcept {
    return make(max_size, id, stream_ref(), options);
  }
  /// As create(max_size, options), on `s`'s device; shrink_to_fit and the destructor synchronize `s`.
  [[nodiscard]] static result<growable_buffer> create(std::size_t max_size, stream_ref s,
                                                      growable_options options = {}) noexcept {
    if (!s.valid()) return detail::handle_moved_from(api_create, "stream");
    auto id = s.device();
    if (!id) return id.error().with_api(api_create);
    return make(max_size, *id, s, options);
  }

  /// Takes over the memory of `other`, leaving it empty.
  growable_buffer(growable_buffer&& other) noexcept
      : range_(static_cast<detail::vmm_range&&>(other.range_)),
        size_(other.size_),
        device_(other.device_),
        stream_(other.stream_) {
    other.size_ = 0;
  }
  /// Unmaps this buffer's memory (as the destructor), then takes over that of `other`.
  growable_buffer& operator=(growable_buffer&& other) noexcept {
    if (this != &other) {
      settle();
      range_ = static_cast<detail::vmm_range&&>(other.range_);
      size_ = other.size_;
      device_ = other.device_;
      stream_ = other.stream_;
      other.size_ = 0;
    }
    return *this;
  }
  growable_buffer(const growable_buffer&) = delete;
  growable_buffer& operator=(const growable_buffer&) = delete;
  /// Synchronizes stream() (unless it is capturing: then work on the buffer must be complete), then unmaps and frees
  /// everything. Failures go to the release handler.
  ~growable_buffer() { settle(); }

  /// Sets size() to `count` >= size(), first mapping one chunk for what capacity() lacks; the address stays, no byte
  /// moves, existing views stay valid. Synchronous; no stream involved. Errors, nothing changed: invalid_argument
  /// (count < size(), or moved from), out_of_range (count > max_size()), CUDA errors (cudaErrorMemoryAllocation from
  /// cuMemCreate when the device is full).
  [[nodiscard]] status grow(std::size_t count) noexcept {
    constexpr const char* api = "growable_buffer::grow";
    if (count < size_)
      return error(errc::invalid_argument, api, "%zu elements is less than size() %zu (use resize)", count, size_);
    CUDAMEM_TRY(ensure_mapped(count, api));
    size_ = count;
    return {};
  }
  /// Maps memory for at least `count` elements; size() stays. Errors, nothing changed: as grow (but count < size()).
  [[nodiscard]] status reserve(std::size_t count) noexcept { return ensure_mapped(count, "growable_buffer::reserve"); }
  /// Sets size() to `count`: grows as grow(count) does, or shrinks the view without unmapping. Errors: as grow.
  [[nodiscard]] status resize(std::size_t count) noexcept {
    CUDAMEM_TRY(ensure_mapped(count, "growable_buffer::resize"));
    size_ = count;
    return {};
  }
  /// Synchronizes stream(), then unmaps and frees the chunks lying wholly past size() (a chunk partly in use stays:
  /// chunks are never split). Errors, nothing changed: capture_active (stream() is capturing: refused before
  /// anything), invalid_argument (moved from), CUDA errors.
  [[nodiscard]] status shrink_to_fit() noexcept {
    constexpr const char* api = "growable_buffer::shrink_to_fit";
    CUDAMEM_TRY(check_usable(api));
    if (capacity_bytes() == 0) return {};
    auto bound = bind(device_, api);
    if (!bound) return bound.error();
    if (const status waited = stream_.synchronize(); !waited) return waited.error().with_api(api);
    detail::relaxed_capture_scope relaxed;
    return range_.unmap_past(size_ * sizeof(T), api);
  }
  /// Gives every device now holding a peer_access guard to device() read-write access to all of the mapped memory
  /// (and to chunks mapped later). Synchronous. Errors, nothing changed: invalid_argument (moved from), CUDA errors.
  [[nodiscard]] status refresh_peer_access() noexcept {
    return ensure_mapped(0, "growable_buffer::refresh_peer_access");
  }

  [[nodiscard]] span<T, Kind> view() & noexcept { return {data(), size_}; }  ///< The elements in use, while it lives.
  [[nodiscard]] span<const T, Kind> view() const& noexcept { return {data(), size_}; }  ///< As view(), of const T.
  [[nodiscard]] ptr<T, Kind> data() & noexcept { return {first(), device_}; }  ///< The first element; never moves.
  [[nodiscard]] ptr<const T, Kind> data() const& noexcept { return {first(), device_}; }  ///< As data(), const T.
  ///@{
  /// Converts to its view as view() does; not a temporary buffer, whose view would dangle.
  CUDAMEM_DETAIL_OWNER_VIEWS((span<T, Kind>), (span<const T, Kind>));
  ///@}
  [[nodiscard]] std::size_t size() const noexcept { return size_; }  ///< The elements in use.
  [[nodiscard]] std::size_t size_bytes() const noexcept { return size_ * sizeof(T); }  ///< size() * sizeof(T).
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }  ///< True when size() is 0.
  /// The elements the mapped memory holds: growth up to it maps nothing.
  [[nodiscard]] std::size_t capacity() const noexcept { return range_.mapped() / sizeof(T); }
  /// The elements the reserved address range holds: growth past it fails with out_of_range.
  [[nodiscard]] std::size_t max_size() const noexcept { return range_.reserved() / sizeof(T); }
  /// The bytes of one mapping step (cuMemGetAllocationGranularity, recommended); chunks are multiples of it.
  [[nodiscard]] std::size_t granularity() const noexcept { return range_.granularity(); }
  [[nodiscard]] device_id device() const noexcept { return device_; }  ///< The device whose memory it is.
  [[nodiscard]] stream_ref stream() const noexcept { return stream_; }  ///< Synchronized before unmapping.
  /// Synchronizes `s` before unmapping from now on; the caller orders `s` after the buffer's work elsewhere.
  void set_stream(stream_ref s) noexcept { stream_ = s; }
  /// Whether kernels on `id` may read and write the mapped memory (device() itself, or in the accessor set).
  [[nodiscard]] bool accessible_from(device_id id) const noexcept {
    return detail::peer_table::in_table(id) && ((range_.accessors() >> id.get()) & 1u) != 0;
  }
  /// The physical chunks in address order, for export (cuMemExportToShareableHandle with handle_type()); valid until
  /// the next grow, reserve, resize or shrink_to_fit. The buffer keeps owning them.
  [[nodiscard]] span<const physical_chunk, host> chunks() const noexcept {
    return {ptr<const physical_chunk, host>(range_.chunks(), device_id::host()), range_.chunk_count()};
  }
  /// What the chunks can be exported as.
  [[nodiscard]] shareable_handle handle_type() const noexcept {
    return range_.handle_type() == detail::vmm_handle_posix_fd ? shareable_handle::posix_fd : shareable_handle::none;
  }

 private:
  static constexpr const char* api_create = "growable_buffer::create";
  static result<growable_buffer> make(std::size_t max_size, device_id id, stream_ref s,
                                      growable_options options) noexcept {
    CUDAMEM_TRY(detail::check_device(id, api_create));
    if (!detail::peer_table::in_table(id))
      return error(errc::not_supported, api_create, "growable buffers are tracked for devices 0 to %d",
                   detail::peer_table::max_devices - 1);
    auto bytes = detail::bytes_of(max_size, sizeof(T), api_create);
    if (!bytes) return bytes.error();
    const detail::vmm_calls& calls = detail::driver_vmm();
    auto vmm = detail::vmm_device_supports(calls, id.get(), detail::vmm_attribute_supported, api_create);
    if (!vmm) return vmm.error();
    if (!*vmm) return error(errc::not_supported, api_create, "device %d has no virtual memory management", id.get());
    if (options.handle == shareable_handle::posix_fd) {
      auto fd = detail::vmm_device_supports(calls, id.get(), detail::vmm_attribute_posix_fd, api_create);
      if (!fd) return fd.error();
      if (!*fd) return error(errc::not_supported, api_create, "device %d cannot export memory as a POSIX fd", id.get());
    }
    auto bound = bind(id, api_create);
    if (!bound) return bound.error();
    detail::relaxed_capture_scope relaxed;
    auto range = detail::vmm_range::reserve(calls, id.get(), *bytes, detail::vmm_handle_of(options.handle), api_create);
    if (!range) return range.error();
    growable_buffer made;
    made.range_ = static_cast<detail::vmm_range&&>(*range);
    made.device_ = id;
    made.stream_ = s;
    if (auto access = made.ensure_mapped(0, api_create); !access) return access.error();
    return made;
  }
  // The device current, its primary context bound to this thread (the driver's VMM calls need one; cudaSetDevice makes
  // and binds it even where the device was nominally current already); the previous device comes back after.
  static result<device_guard> bind(device_id id, const char* api) noexcept {
    auto current = device_guard::set(id);
    if (!current) return current.error().with_api(api);
    CUDAMEM_TRY(detail::check(cudaSetDevice(id.get()), api, "cudaSetDevice"));
    return current;
  }
  status check_usable(const char* api) const noexcept {
    if (range_.base() == 0) return error(errc::invalid_argument, api, "the growable buffer is empty or moved from");
    return {};
  }
  // Mapped for `count` elements, with access for every device that holds a guard now.
  status ensure_mapped(std::size_t count, const char* api) noexcept {
    CUDAMEM_TRY(check_usable(api));
    if (count > max_size())
      return error(errc::out_of_range, api, "%zu elements exceed max_size() %zu (%zu bytes reserved)", count,
                   max_size(), range_.reserved());
    const unsigned long long more = detail::guarded_accessors(device_) & ~range_.accessors();
    if (count * sizeof(T) <= range_.mapped() && more == 0) return {};  // the common case: no driver call
    auto bound = bind(device_, api);
    if (!bound) return bound.error();
    detail::relaxed_capture_scope relaxed;
    return range_.map_to(count * sizeof(T), more, api);
  }
  T* first() const noexcept { return reinterpret_cast<T*>(static_cast<std::uintptr_t>(range_.base())); }
  std::size_t capacity_bytes() const noexcept { return range_.mapped(); }
  void settle() noexcept {
    if (range_.base() == 0) return;
    auto bound = bind(device_, "growable_buffer::~growable_buffer");  // failed: unmap anyway
    if (bound && capacity_bytes() != 0) (void)stream_.synchronize();  // capturing: it may not be waited on
    detail::relaxed_capture_scope relaxed;
    range_ = detail::vmm_range();
    size_ = 0;
  }

  detail::vmm_range range_;
  std::size_t size_ = 0;
  device_id device_ = device_id(0);
  stream_ref stream_;
};

}  // namespace cudamem
