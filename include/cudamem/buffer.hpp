// SPDX-License-Identifier: MIT
/// \file
/// `buffer<T, Kind>`: owning memory of one kind; move-only, deep-const, freed through the resource
/// it came from, with its device current, in its stream's order.
///
///   static result<buffer> allocate(count)                    current device (device memory: cudaMalloc)
///   static result<buffer> allocate(count, device_id)         on that device (device and managed)
///   static result<buffer> allocate(count, stream_ref)        ordered on the stream (device: its pool)
///   static result<buffer> allocate(count, stream_ref, resource_ref<Kind>)
///   view(), data(), operator[], begin(), end()               const buffer -> const elements
///   size(), size_bytes(), empty(), device(), stream(), resource(), set_stream(s), release()
#pragma once

#include <cudamem/resource.hpp>
#include <cudamem/span.hpp>

#include <cstddef>
#include <type_traits>

namespace cudamem {

/// Owns `size()` elements of kind Kind, not initialized. Move-only; a moved-from buffer is empty.
/// Deep-const, and no view or pointer of a temporary buffer. Freed through the resource it came
/// from (see allocate), with its device current, on its stream; a buffer on a default stream
/// (stream_ref{}, legacy(), per_thread()) on the legacy stream of its device, which waits for every
/// blocking stream there. A failed release goes to the release handler.
template <class T, memory_kind Kind>
class buffer {
  static_assert(std::is_trivially_copyable_v<T>,
                "cudamem::buffer<T>: T must be trivially copyable, since its bytes are copied without running "
                "constructors; use a plain struct or an array of values");
  static_assert(!std::is_const_v<T>, "cudamem::buffer<T>: T must not be const (take a span<const T> of it)");

 public:
  /// T.
  using element_type = T;
  /// T.
  using value_type = T;
  /// The memory kind.
  using kind = Kind;
  /// A buffer owns its memory: stream-ordered operations refuse a temporary one.
  static constexpr bool owns_memory = true;

  /// An empty buffer.
  buffer() noexcept = default;

  /// `count` elements (device and managed memory: on the current device) from the kind's default
  /// resource (device memory: cudaMalloc, usable on any stream at once). Synchronous. Errors:
  /// size_overflow; not_supported (alignof(T) > 256 for CUDA memory); out_of_memory (host); CUDA
  /// errors. Nothing is allocated on error; count == 0 allocates nothing.
  [[nodiscard]] static result<buffer> allocate(std::size_t count) noexcept {
    auto where = home_of_current();
    if (!where) return where.error();
    return make(count, *where, stream_ref(), default_resource<Kind>());
  }
  /// As allocate(count), on device `id` (the current device is left as it was). Errors: also
  /// out_of_range for an id that names no device.
  [[nodiscard]] static result<buffer> allocate(std::size_t count, device_id id) noexcept
    requires(!std::is_same_v<Kind, host> && !std::is_same_v<Kind, pinned>)
  {
    return make(count, id, stream_ref(), default_resource<Kind>());
  }
  /// `count` elements ordered on `s`, on its device. Device memory: the stream-ordered pool; does not
  /// synchronize, can be captured, usable on `s`. Other kinds allocate synchronously and record `s`
  /// for the free. Errors: as allocate(count); invalid_argument (moved-from stream); capture_active
  /// (a capturing raw handle of unknown device: see stream_ref::from_native_handle).
  [[nodiscard]] static result<buffer> allocate(std::size_t count, stream_ref s) noexcept {
    return allocate(count, s, default_resource<Kind>(true));
  }
  /// As allocate(count, s), from `resource`. Errors: also whatever the resource reports.
  [[nodiscard]] static result<buffer> allocate(std::size_t count, stream_ref s, resource_ref<Kind> resource) noexcept {
    if (!s.valid()) return error(errc::invalid_argument, "buffer::allocate", "the stream was moved from");
    if (auto bytes = detail::bytes_of(count, sizeof(T), "buffer::allocate"); !bytes) return bytes.error();
    device_id where = device_id::host();
    if constexpr (!std::is_same_v<Kind, host> && !std::is_same_v<Kind, pinned>) {
      auto stream_device = s.device();
      if (!stream_device) return stream_device.error().with_api("buffer::allocate");
      where = *stream_device;
    }
    return make(count, where, s, resource);
  }

  /// Takes over the memory of `other`, which is left empty.
  buffer(buffer&& other) noexcept
      : data_(other.data_),
        size_(other.size_),
        device_(other.device_),
        stream_(other.stream_),
        resource_(other.resource_) {
    other.forget();
  }
  /// Frees this buffer's memory (as the destructor does), then takes over the memory of `other`.
  buffer& operator=(buffer&& other) noexcept {
    if (this != &other) {
      free();
      data_ = other.data_;
      size_ = other.size_;
      device_ = other.device_;
      stream_ = other.stream_;
      resource_ = other.resource_;
      other.forget();
    }
    return *this;
  }
  buffer(const buffer&) = delete;
  buffer& operator=(const buffer&) = delete;
  /// Frees the memory through its resource, with the buffer's device current, on its stream.
  ~buffer() { free(); }

  ///@{
  /// A view of the whole buffer, valid while the buffer lives; const elements for a const buffer.
  /// Not from a temporary buffer.
  [[nodiscard]] span<T, Kind> view() & noexcept { return span<T, Kind>(data(), size_); }
  [[nodiscard]] span<const T, Kind> view() const& noexcept { return span<const T, Kind>(data(), size_); }
  void view() const&& = delete;
  operator span<T, Kind>() & noexcept { return view(); }
  operator span<const T, Kind>() const& noexcept { return view(); }
  operator span<T, Kind>() const&& = delete;
  operator span<const T, Kind>() const&& = delete;
  ///@}
  ///@{
  /// The typed address of the first element (null when empty); const for a const buffer.
  [[nodiscard]] ptr<T, Kind> data() & noexcept { return ptr<T, Kind>(data_, device_); }
  [[nodiscard]] ptr<const T, Kind> data() const& noexcept { return ptr<const T, Kind>(data_, device_); }
  void data() const&& = delete;
  ///@}
  /// The number of elements.
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  /// size() * sizeof(T) (it fits: the buffer was allocated).
  [[nodiscard]] std::size_t size_bytes() const noexcept { return size_ * sizeof(T); }
  /// True when size() is 0.
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  /// The device the memory lives on (device_id::host() for host and pinned memory).
  [[nodiscard]] device_id device() const noexcept { return device_; }
  /// The stream the memory is freed on: the one it was allocated on, or the last set_stream.
  [[nodiscard]] stream_ref stream() const noexcept { return stream_; }
  /// The resource the memory came from and goes back to.
  [[nodiscard]] resource_ref<Kind> resource() const noexcept { return resource_; }

  /// Hands the buffer to stream `s`: it is freed in `s`'s order from now on. The caller orders `s`
  /// after the work still using the buffer on its old stream (an event), as for any cross-stream use.
  void set_stream(stream_ref s) noexcept { stream_ = s; }

  ///@{
  /// Element `i`, host-side, for kinds the host may touch (device memory: does not compile);
  /// const for a const buffer. Checked by CUDAMEM_ASSERT in debug builds.
  template <class K_ = Kind>
  T& operator[](std::size_t i) & noexcept {
    return host_side<K_>()[i];
  }
  template <class K_ = Kind>
  const T& operator[](std::size_t i) const& noexcept {
    return host_side<K_>()[i];
  }
  ///@}
  ///@{
  /// The raw address of the first element, for range-for on the host. Device memory: does not compile.
  template <class K_ = Kind>
  T* begin() & noexcept {
    return host_side<K_>().begin();
  }
  template <class K_ = Kind>
  const T* begin() const& noexcept {
    return host_side<K_>().begin();
  }
  template <class K_ = Kind>
  T* end() & noexcept {
    return host_side<K_>().end();
  }
  template <class K_ = Kind>
  const T* end() const& noexcept {
    return host_side<K_>().end();
  }
  ///@}

  /// Gives up ownership: the caller frees the memory with resource().deallocate(stream(), p,
  /// size_bytes(), alignof(T)), its device current. Empty after.
  [[nodiscard]] span<T, Kind> release() noexcept {
    span<T, Kind> all(ptr<T, Kind>(data_, device_), size_);
    forget();
    return all;
  }

 private:
  buffer(T* data, std::size_t count, device_id id, stream_ref s, resource_ref<Kind> r) noexcept
      : data_(data), size_(count), device_(id), stream_(s), resource_(r) {}

  static result<device_id> home_of_current() noexcept {
    if constexpr (std::is_same_v<Kind, host> || std::is_same_v<Kind, pinned>) {
      return device_id::host();
    } else {
      auto id = current_device();
      if (!id) return id.error().with_api("buffer::allocate");
      return *id;
    }
  }

  static result<buffer> make(std::size_t count, device_id id, stream_ref s, resource_ref<Kind> r) noexcept {
    constexpr const char* api = "buffer::allocate";
    auto bytes = detail::bytes_of(count, sizeof(T), api);
    if (!bytes) return bytes.error();
    if (*bytes == 0) return buffer(nullptr, 0, id, s, r);
    const auto take = [&]() -> result<buffer> {
      auto raw = r.allocate(s, *bytes, alignof(T));
      if (!raw) return raw.error().with_api(api);
      return buffer(static_cast<T*>(*raw), count, id, s, r);
    };
    if (id.is_host()) return take();
    auto guard = device_guard::set(id);
    if (!guard) return guard.error().with_api(api);
    return take();
  }

  template <class K_>
  span<T, Kind> host_side() const noexcept {
    static_assert(K_::host_accessible,
                  "cudamem: device memory cannot be read or written on the host; copy it into a "
                  "host or pinned buffer first (cudamem::copy), or use managed memory");
    return span<T, Kind>(ptr<T, Kind>(data_, device_), size_);
  }

  // A default stream means "the one current when used": free on the legacy stream of our device.
  stream_ref free_stream() const noexcept {
    return detail::is_default_stream(stream_.get()) ? stream_ref::legacy() : stream_;
  }

  void free() noexcept {
    if (data_ == nullptr) return;
    if (device_.is_host()) {
      resource_.deallocate(free_stream(), data_, size_bytes(), alignof(T));
    } else {
      auto guard = device_guard::set(device_);  // a failure leaves the current device: still free
      resource_.deallocate(free_stream(), data_, size_bytes(), alignof(T));
    }
    forget();
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
};

/// Owning device memory.
template <class T>
using device_buffer = buffer<T, device>;
/// Owning page-locked host memory: the host side of stream-ordered copies.
template <class T>
using pinned_buffer = buffer<T, pinned>;
/// Owning pageable host memory.
template <class T>
using host_buffer = buffer<T, host>;
/// Owning managed memory.
template <class T>
using managed_buffer = buffer<T, managed>;

}  // namespace cudamem
