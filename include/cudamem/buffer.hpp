// SPDX-License-Identifier: MIT
/// \file
/// `buffer<T, Kind>`: owning memory of one kind; move-only, deep-const, freed through its resource in stream order.
///
///     buffer<T, Kind>::allocate(count [, device_id | stream_ref [, resource_ref<Kind>]])   result<buffer>
///       view(), data(), size(), size_bytes(), empty(), device(), stream(), resource(), set_stream(s)
///       use_on(s)                          its free waits for the work queued on `s` so far (copies record theirs)
///       b[i], begin(), end()               host-side, host-accessible kinds only
///       release()                          gives up ownership: free through resource() yourself
///       move-only, deep-const (a const buffer views const T); no view or pointer of a temporary
///     device_buffer<T>, pinned_buffer<T>, host_buffer<T>, managed_buffer<T>
///     set_stream_use_checking(on), check_stream_uses()   the checking mode of use tracking (docs/allocators.md)
#pragma once

#include <cudamem/detail/storage.hpp>
#include <cudamem/detail/stream_uses.hpp>
#include <cudamem/registry.hpp>
#include <cudamem/resource.hpp>
#include <cudamem/span.hpp>

#include <cstddef>
#include <type_traits>

namespace cudamem {

/// Owns `size()` uninitialized elements of kind Kind; no view or pointer of a temporary. Freed by its resource with
/// its device current, on its stream (a default stream: its device's legacy one), after the work on every other stream
/// it was used on (use_on; stream-ordered copies and fills given the buffer); failures go to the release handler.
template <class T, memory_kind Kind>
class buffer {
  static_assert(std::is_trivially_copyable_v<T>,
                "cudamem::buffer<T>: T must be trivially copyable, since its bytes are copied without running "
                "constructors; use a plain struct or an array of values");
  static_assert(!std::is_const_v<T>, "cudamem::buffer<T>: T must not be const (take a span<const T> of it)");
  static constexpr bool on_device = !std::is_same_v<Kind, host> && !std::is_same_v<Kind, pinned>;

 public:
  using element_type = T;                    ///< T.
  using value_type = T;                      ///< T.
  using kind = Kind;                         ///< The memory kind.
  static constexpr bool owns_memory = true;  ///< Stream-ordered operations refuse a temporary buffer.
  buffer() noexcept = default;               ///< An empty buffer.

  /// `count` elements on the current device from the kind's default resource (device: cudaMalloc); synchronous. Errors:
  /// size_overflow, not_supported (alignof(T) > 256 for CUDA memory), out_of_memory (host), CUDA errors.
  [[nodiscard]] static result<buffer> allocate(std::size_t count) noexcept {
    return allocate(count, stream_ref(), default_resource<Kind>());
  }
  /// As allocate(count), on device `id` (the current device stays). Errors: also out_of_range (no such device).
  [[nodiscard]] static result<buffer> allocate(std::size_t count, device_id id) noexcept
    requires on_device
  {
    return make(count, id, stream_ref(), default_resource<Kind>());
  }
  /// `count` elements on `s`'s device, freed on `s`: device memory from `s`'s registered allocator, else the pool (not
  /// synchronizing, capturable); others synchronously. Errors: as allocate(count); invalid_argument, capture_active.
  [[nodiscard]] static result<buffer> allocate(std::size_t count, stream_ref s) noexcept {
    if constexpr (std::is_same_v<Kind, cudamem::device>) return allocate(count, s, allocator_for(s));
    else return allocate(count, s, default_resource<Kind>(true));
  }
  /// As allocate(count, s), from `resource`. Errors: also whatever the resource reports.
  [[nodiscard]] static result<buffer> allocate(std::size_t count, stream_ref s, resource_ref<Kind> resource) noexcept {
    if (!s.valid()) return detail::handle_moved_from("buffer::allocate", "stream");
    using where = detail::maybe<device_id>;  // none: the stream's device
    return make(count, on_device ? where() : where(device_id::host()), s, resource);
  }

  /// Takes over the memory of `other`, leaving it empty.
  buffer(buffer&& other) noexcept
      : data_(other.data_),
        size_(other.size_),
        device_(other.device_),
        stream_(other.stream_),
        resource_(other.resource_),
        uses_(static_cast<detail::stream_uses&&>(other.uses_)) {
    other.forget();
  }
  /// Frees this buffer's memory, then takes over that of `other`.
  buffer& operator=(buffer&& other) noexcept {
    if (this != &other) {
      free();
      data_ = other.data_;
      size_ = other.size_;
      device_ = other.device_;
      stream_ = other.stream_;
      resource_ = other.resource_;
      uses_ = static_cast<detail::stream_uses&&>(other.uses_);
      other.forget();
    }
    return *this;
  }
  buffer(const buffer&) = delete;
  buffer& operator=(const buffer&) = delete;
  ~buffer() { free(); }  ///< Frees the memory through its resource, with its device current, on its stream.

  [[nodiscard]] span<T, Kind> view() & noexcept { return {data(), size_}; }  ///< The whole buffer, while it lives.
  [[nodiscard]] span<const T, Kind> view() const& noexcept { return {data(), size_}; }  ///< As view(), of const T.
  [[nodiscard]] ptr<T, Kind> data() & noexcept { return {data_, device_}; }  ///< The first element (null when empty).
  [[nodiscard]] ptr<const T, Kind> data() const& noexcept { return {data_, device_}; }  ///< As data(), of const T.
  ///@{
  /// Converts to its view as view() does; not a temporary buffer, whose view would dangle.
  CUDAMEM_DETAIL_OWNER_VIEWS((span<T, Kind>), (span<const T, Kind>));
  ///@}
  [[nodiscard]] std::size_t size() const noexcept { return size_; }  ///< The number of elements.
  [[nodiscard]] std::size_t size_bytes() const noexcept { return size_ * sizeof(T); }  ///< size() * sizeof(T); fits.
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }  ///< True when size() is 0.
  [[nodiscard]] device_id device() const noexcept { return device_; }  ///< Its device (host and pinned: host()).
  [[nodiscard]] stream_ref stream() const noexcept { return stream_; }  ///< The stream it is freed on (set_stream).
  [[nodiscard]] resource_ref<Kind> resource() const noexcept { return resource_; }  ///< The resource it came from.
  /// Frees on `s` from now on; the caller orders `s` after the buffer's work on its old stream (an event), or calls
  /// use_on(old stream) first.
  void set_stream(stream_ref s) noexcept { stream_ = s; }
  /// Records that the buffer is used on `s` by the work queued there so far: its free (or release()) then waits, on
  /// its own stream, for that work (cudaStreamWaitEvent). Call it after enqueuing the last work on `s` that touches
  /// the buffer, such as a kernel given its view (copies and fills given the buffer itself record theirs). Costs one
  /// event record, on `s`; nothing on its own stream. Does not synchronize. Errors: invalid_argument (moved-from
  /// stream), capture_active (`s` captures a graph that the buffer's stream is not part of: the graph's launches, not
  /// the capture, use the buffer), CUDA's; nothing is recorded then.
  [[nodiscard]] status use_on(stream_ref s) const noexcept {
    if (data_ == nullptr) return s.valid() ? status() : detail::handle_moved_from("buffer::use_on", "stream");
    return uses_.note(stream_, s, "buffer::use_on");
  }

  /// Element `i`, host-side (device memory: does not compile); checked by CUDAMEM_ASSERT in debug builds.
  T& operator[](std::size_t i) & noexcept { return host_side()[i]; }
  const T& operator[](std::size_t i) const& noexcept { return host_side()[i]; }  ///< As operator[], a const element.
  T* begin() & noexcept { return host_side().begin(); }  ///< The first element's address, host-side (range-for).
  const T* begin() const& noexcept { return host_side().begin(); }  ///< As begin(), of const elements.
  T* end() & noexcept { return host_side().end(); }  ///< As begin(), past the last element.
  const T* end() const& noexcept { return host_side().end(); }  ///< As end(), of const elements.

  /// Gives up ownership: free with resource().deallocate(stream(), p, size_bytes(), alignof(T)), its device current.
  /// stream() is made to wait for the uses recorded on other streams first, as the free would.
  [[nodiscard]] span<T, Kind> release() noexcept {
    const span<T, Kind> all = view();
    if (data_ != nullptr) (void)uses_.join(stream_, stream_, "buffer::release");  // kept: the handler heard why
    forget();
    return all;
  }

 private:
  friend struct detail::owner_access;
  const detail::stream_uses& tracked_uses() const noexcept { return uses_; }

  buffer(T* data, std::size_t count, device_id id, stream_ref s, resource_ref<Kind> r) noexcept
      : data_(data), size_(count), device_(id), stream_(s), resource_(r) {}

  // None for host memory, nor for a resource that selects a stream's device.
  static detail::maybe<result<device_guard>> make_current(device_id id, stream_ref s, resource_ref<Kind> r) noexcept {
    if (id.is_host() || (r.selects_device() && !detail::is_default_stream(s.get()))) return {};
    return device_guard::set(id);
  }
  // On device `id`, else on the stream's.
  static result<buffer> make(std::size_t count, detail::maybe<device_id> id, stream_ref s,
                             resource_ref<Kind> r) noexcept {
    constexpr const char* api = "buffer::allocate";
    auto bytes = detail::bytes_of(count, sizeof(T), api);
    if (!bytes) return bytes.error();
    auto where = id ? result<device_id>(*id) : s.device();
    if (!where) return where.error().with_api(api);
    if (*bytes == 0) return buffer(nullptr, 0, *where, s, r);
    auto guard = make_current(*where, s, r);
    if (guard && !*guard) return guard->error().with_api(api);
    auto raw = r.allocate(s, *bytes, alignof(T));
    if (!raw) return raw.error().with_api(api);
    return buffer(static_cast<T*>(*raw), count, *where, s, r);
  }
  // Instantiated only where used, so a buffer of device memory fails only when touched on the host. Not span's
  // accessors: nvcc lets a host member of a template call a __device__ one, and would accept device memory here.
  span<T, Kind> host_side() const noexcept {
    static_assert(Kind::host_accessible,
                  "cudamem: device memory cannot be read or written on the host; copy it into a "
                  "host or pinned buffer first (cudamem::copy), or use managed memory");
    return span<T, Kind>(ptr<T, Kind>(data_, device_), size_);
  }
  void free() noexcept {
    if (data_ == nullptr) return;
    const stream_ref on = free_stream(stream_);
    auto guard = make_current(device_, on, resource_);  // failed: free anyway, on the current device
    if (!uses_.join(stream_, on, "buffer::free")) [[unlikely]] {  // the release handler heard why it stays
      forget();
      return;
    }
    resource_.deallocate(on, data_, size_bytes(), alignof(T));
    forget();
  }
  // A default stream's buffer frees on the legacy stream, which is ordered after every blocking stream whichever
  // thread frees it; but while the freeing thread captures its per-thread stream, the legacy stream would join that
  // capture and invalidate it, so the free is captured there instead (a buffer allocated in that capture: the graph's
  // own free node).
  static stream_ref free_stream(stream_ref s) noexcept {
    if (!detail::is_default_stream(s.get())) return s;
#if defined(CUDA_API_PER_THREAD_DEFAULT_STREAM)
    const bool per_thread = s.get() != cudaStreamLegacy;  // null is this build's per-thread stream
#else
    const bool per_thread = s.get() == cudaStreamPerThread;
#endif
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    if (per_thread && detail::driver_capture_status(cudaStreamPerThread, capture) &&
        capture != cudaStreamCaptureStatusNone)
      return stream_ref::per_thread();
    return stream_ref::legacy();
  }
  void forget() noexcept {
    data_ = nullptr;
    size_ = 0;
  }

  T* data_ = nullptr;
  std::size_t size_ = 0;
  device_id device_ = device_id::host();
  stream_ref stream_;
  resource_ref<Kind> resource_ = default_resource<Kind>();
  detail::stream_uses uses_;  // one pointer, null while used on its own stream only
};

template <class T>
using device_buffer = buffer<T, device>;  ///< Owning device memory.
template <class T>
using pinned_buffer = buffer<T, pinned>;  ///< Owning page-locked host memory: the host side of stream-ordered copies.
template <class T>
using host_buffer = buffer<T, host>;  ///< Owning pageable host memory.
template <class T>
using managed_buffer = buffer<T, managed>;  ///< Owning managed memory.

/// Turns the checking mode of use tracking on or off for the process; the previous setting. Off unless the macro or
/// the environment variable CUDAMEM_CHECK_STREAM_USES is 1. When on, each free of a buffer used on other streams also
/// checks whether the program ordered it after those uses itself; check_stream_uses() reports those it did not.
inline bool set_stream_use_checking(bool on) noexcept {
  const bool was = detail::use_checking(detail::cuda_use_order{});
  __atomic_store_n(&detail::cuda_use_order::checks().enabled, on ? 1 : 0, __ATOMIC_RELEASE);
  return was;
}
/// Settles the checking mode's pending checks, waiting for each checked free to be reached on its stream (an event
/// synchronize, not a device one): every use on another stream that was not done by then goes to the release handler,
/// naming the buffer's, the using and the freeing streams. Returns how many. Later frees settle the checks whose free
/// was reached by then without waiting; this settles the rest.
inline std::size_t check_stream_uses() noexcept { return detail::settle_use_checks(detail::cuda_use_order{}, true); }

}  // namespace cudamem
