/// \file
/// `buffer<T, Kind>`: owning memory of one kind; move-only, freed when it goes.
#pragma once

#include <cudamem/span.hpp>

#include <cstddef>
#include <new>
#include <type_traits>

namespace cudamem {

/// Owns `size()` elements of kind Kind. Move-only; a moved-from buffer is empty. Elements are not
/// initialized. How it allocates, by kind and call:
/// - device, allocate(n) or allocate(n, device_id): cudaMalloc on that device (or the current one);
///   usable on any stream at once; cudaFree on destruction (which synchronizes).
/// - device, allocate(n, stream): cudaMallocAsync on the stream's device, ordered on `stream`;
///   freed by cudaFreeAsync on the same stream, which must outlive the buffer.
/// - pinned: cudaMallocHost, freed by cudaFreeHost; managed: cudaMallocManaged (current device),
///   freed by cudaFree; host: aligned operator new. The stream argument only records the stream for
///   these kinds.
///
/// A failed release goes to the release handler (set_release_handler).
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

  /// An empty buffer.
  buffer() noexcept = default;

  /// Allocates `count` elements (on the current device for device and managed memory). Synchronous
  /// for every kind. Errors: size_overflow; out_of_memory (host kind); CUDA errors
  /// (cudaErrorMemoryAllocation when it does not fit, no device). Nothing is allocated on error.
  /// count == 0 allocates nothing.
  [[nodiscard]] static result<buffer> allocate(std::size_t count) noexcept {
    auto here = std::is_same_v<Kind, host> || std::is_same_v<Kind, pinned> ? result<device_id>(device_id::host())
                                                                           : current_device();
    if (!here) return here.error().with_api("buffer::allocate");
    return allocate_sync(count, *here);
  }
  /// Allocates `count` elements of device or managed memory on device `id`; the current device is
  /// left as it was. Errors: as allocate(count), and out_of_range for a bad id.
  [[nodiscard]] static result<buffer> allocate(std::size_t count, device_id id) noexcept
    requires(std::is_same_v<Kind, cudamem::device> || std::is_same_v<Kind, managed>)
  {
    auto guard = device_guard::set(id);
    if (!guard) return guard.error().with_api("buffer::allocate");
    return allocate_sync(count, id);
  }
  /// Allocates `count` elements ordered on `s`. Device memory: cudaMallocAsync from the current pool
  /// of the stream's device; does not synchronize: use the memory on `s`, or order other streams
  /// after it with an event; freed by cudaFreeAsync on `s`, which must outlive the buffer. Other
  /// kinds: as allocate(count), and `s` is only recorded. Errors: as allocate(count), and
  /// invalid_argument for a moved-from stream.
  [[nodiscard]] static result<buffer> allocate(std::size_t count, stream_ref s) noexcept {
    constexpr const char* api = "buffer::allocate";
    if (auto ok = detail::check_stream(s, api); !ok) return ok.error();
    if constexpr (std::is_same_v<Kind, cudamem::device>) {
      auto bytes = detail::bytes_of(count, sizeof(T), api);
      if (!bytes) return bytes.error();
      int ordinal = 0;
      if (auto ok = detail::check(cudaStreamGetDevice(s.get(), &ordinal), api, "cudaStreamGetDevice"); !ok)
        return ok.error();
      if (*bytes == 0) return buffer(nullptr, 0, device_id(ordinal), origin::none, s);
      void* raw = nullptr;
      if (auto ok = detail::check(cudaMallocAsync(&raw, *bytes, s.get()), api, "cudaMallocAsync"); !ok)
        return ok.error();
      return buffer(static_cast<T*>(raw), count, device_id(ordinal), origin::stream_ordered, s);
    } else {
      auto made = allocate(count);
      if (made) made->stream_ = s;
      return made;
    }
  }

  /// Takes over the memory of `other`, which is left empty.
  buffer(buffer&& other) noexcept
      : data_(other.data_), size_(other.size_), device_(other.device_), origin_(other.origin_), stream_(other.stream_) {
    other.forget();
  }
  /// Frees this buffer's memory (as the destructor does), then takes over the memory of `other`.
  buffer& operator=(buffer&& other) noexcept {
    if (this != &other) {
      free();
      data_ = other.data_;
      size_ = other.size_;
      device_ = other.device_;
      origin_ = other.origin_;
      stream_ = other.stream_;
      other.forget();
    }
    return *this;
  }
  buffer(const buffer&) = delete;
  buffer& operator=(const buffer&) = delete;
  /// Frees the memory the way it was allocated (see the class comment). cudaFree and cudaFreeHost
  /// synchronize the device; cudaFreeAsync is ordered on the buffer's stream and does not.
  ~buffer() { free(); }

  /// A view of the whole buffer, valid while the buffer lives.
  [[nodiscard]] span<T, Kind> view() const noexcept { return span<T, Kind>(data(), size_); }
  /// As view().
  operator span<T, Kind>() const noexcept { return view(); }
  /// As view(), read-only.
  operator span<const T, Kind>() const noexcept { return view(); }
  /// The typed address of the first element (null when empty).
  [[nodiscard]] ptr<T, Kind> data() const noexcept { return ptr<T, Kind>(data_, device_); }
  /// The number of elements.
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  /// size() * sizeof(T).
  [[nodiscard]] std::size_t size_bytes() const noexcept { return size_ * sizeof(T); }
  /// True when size() is 0.
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  /// The device the memory lives on (device_id::host() for host and pinned memory).
  [[nodiscard]] device_id device() const noexcept { return device_; }
  /// The stream the buffer was allocated on (the legacy default stream when none was given).
  [[nodiscard]] stream_ref stream() const noexcept { return stream_; }

  /// Element `i`, unchecked; host-side access for kinds the host may touch. Device memory: does not
  /// compile.
  template <class K_ = Kind>
  T& operator[](std::size_t i) const noexcept {
    static_assert(K_::host_accessible, "cudamem: device memory cannot be read or written on the host; copy it into a "
                                       "host or pinned buffer first (cudamem::copy), or use managed memory");
    return data_[i];
  }
  /// The raw address of the first element, for range-for on the host. Device memory: does not compile.
  template <class K_ = Kind>
  T* begin() const noexcept {
    static_assert(K_::host_accessible, "cudamem: device memory cannot be read or written on the host; copy it into a "
                                       "host or pinned buffer first (cudamem::copy), or use managed memory");
    return data_;
  }
  /// The raw address past the last element. Device memory: does not compile.
  template <class K_ = Kind>
  T* end() const noexcept {
    return begin<K_>() + size_;
  }

  /// Copies `src` into the buffer (span::copy_from). Synchronizes. Errors: as cudamem::copy.
  template <viewable Src>
  [[nodiscard]] status copy_from(const Src& src) const noexcept { return view().copy_from(src); }
  /// Copies `src` into the buffer on `s` (span::copy_from). Does not synchronize. Errors: as
  /// cudamem::copy with a stream.
  template <viewable Src>
  [[nodiscard]] status copy_from(const Src& src, stream_ref s) const noexcept { return view().copy_from(src, s); }
  /// Copies the buffer into `dst` (span::copy_to). Synchronizes. Errors: as cudamem::copy.
  template <viewable Dst>
  [[nodiscard]] status copy_to(const Dst& dst) const noexcept { return view().copy_to(dst); }
  /// Copies the buffer into `dst` on `s` (span::copy_to). Does not synchronize. Errors: as
  /// cudamem::copy with a stream.
  template <viewable Dst>
  [[nodiscard]] status copy_to(const Dst& dst, stream_ref s) const noexcept { return view().copy_to(dst, s); }
  /// Copies the buffer into host-side `dst` (span::copy_to_host). Synchronizes. Errors: as
  /// cudamem::copy.
  template <viewable Dst>
  [[nodiscard]] status copy_to_host(const Dst& dst) const noexcept { return view().copy_to_host(dst); }
  /// Copies the buffer into pinned or managed `dst` on `s` (span::copy_to_host). Does not
  /// synchronize. Errors: as cudamem::copy with a stream.
  template <viewable Dst>
  [[nodiscard]] status copy_to_host(const Dst& dst, stream_ref s) const noexcept { return view().copy_to_host(dst, s); }
  /// Copies host-side `src` into the buffer (span::copy_from_host). Synchronizes. Errors: as
  /// cudamem::copy.
  template <viewable Src>
  [[nodiscard]] status copy_from_host(const Src& src) const noexcept { return view().copy_from_host(src); }
  /// Copies pinned or managed `src` into the buffer on `s` (span::copy_from_host). Does not
  /// synchronize. Errors: as cudamem::copy with a stream.
  template <viewable Src>
  [[nodiscard]] status copy_from_host(const Src& src, stream_ref s) const noexcept { return view().copy_from_host(src, s); }
  /// Copies device or managed `src` into the buffer (span::copy_from_device). Synchronizes. Errors:
  /// as cudamem::copy.
  template <viewable Src>
  [[nodiscard]] status copy_from_device(const Src& src) const noexcept { return view().copy_from_device(src); }
  /// Copies device or managed `src` into the buffer on `s` (span::copy_from_device). Does not
  /// synchronize. Errors: as cudamem::copy with a stream.
  template <viewable Src>
  [[nodiscard]] status copy_from_device(const Src& src, stream_ref s) const noexcept { return view().copy_from_device(src, s); }
  /// Sets every byte to `value` (span::memset). Synchronizes. Errors: as cudamem::fill_bytes.
  [[nodiscard]] status memset(unsigned char value) const noexcept { return view().memset(value); }
  /// Sets every byte to `value` on `s` (span::memset). Does not synchronize. Errors: as
  /// cudamem::fill_bytes with a stream.
  [[nodiscard]] status memset(unsigned char value, stream_ref s) const noexcept { return view().memset(value, s); }

  /// Gives up ownership: the caller frees the memory the way this buffer would have (see the class
  /// comment; a device buffer allocated on a stream needs cudaFreeAsync). Empty after.
  [[nodiscard]] span<T, Kind> release() noexcept {
    span<T, Kind> all = view();
    forget();
    return all;
  }

 private:
  enum class origin : unsigned char { none, device_malloc, stream_ordered, host_pinned, managed_malloc, host_new };
  static constexpr std::size_t host_alignment = 64;

  buffer(T* data, std::size_t count, device_id id, origin how, stream_ref s) noexcept
      : data_(data), size_(count), device_(id), origin_(how), stream_(s) {}

  static result<buffer> allocate_sync(std::size_t count, device_id id) noexcept {
    constexpr const char* api = "buffer::allocate";
    auto bytes = detail::bytes_of(count, sizeof(T), api);
    if (!bytes) return bytes.error();
    if (*bytes == 0) return buffer(nullptr, 0, id, origin::none, stream_ref());
    void* raw = nullptr;
    if constexpr (std::is_same_v<Kind, cudamem::device>) {
      if (auto ok = detail::check(cudaMalloc(&raw, *bytes), api, "cudaMalloc"); !ok) return ok.error();
      return buffer(static_cast<T*>(raw), count, id, origin::device_malloc, stream_ref());
    } else if constexpr (std::is_same_v<Kind, pinned>) {
      if (auto ok = detail::check(cudaMallocHost(&raw, *bytes), api, "cudaMallocHost"); !ok) return ok.error();
      return buffer(static_cast<T*>(raw), count, id, origin::host_pinned, stream_ref());
    } else if constexpr (std::is_same_v<Kind, managed>) {
      if (auto ok = detail::check(cudaMallocManaged(&raw, *bytes, cudaMemAttachGlobal), api, "cudaMallocManaged"); !ok)
        return ok.error();
      return buffer(static_cast<T*>(raw), count, id, origin::managed_malloc, stream_ref());
    } else {
      raw = ::operator new(*bytes, std::align_val_t{host_alignment}, std::nothrow);
      if (raw == nullptr) return error(errc::out_of_memory, api, "out of host memory (%zu bytes)", *bytes);
      return buffer(static_cast<T*>(raw), count, id, origin::host_new, stream_ref());
    }
  }

  void free() noexcept {
    switch (origin_) {
      case origin::none: break;
      case origin::device_malloc:
      case origin::managed_malloc: detail::check_release(cudaFree(data_), "cudaFree"); break;
      case origin::stream_ordered: detail::check_release(cudaFreeAsync(data_, stream_.get()), "cudaFreeAsync"); break;
      case origin::host_pinned: detail::check_release(cudaFreeHost(data_), "cudaFreeHost"); break;
      case origin::host_new: ::operator delete(data_, std::align_val_t{host_alignment}); break;
    }
    forget();
  }
  void forget() noexcept {
    data_ = nullptr;
    size_ = 0;
    origin_ = origin::none;
  }

  T* data_ = nullptr;
  std::size_t size_ = 0;
  device_id device_ = device_id::host();
  origin origin_ = origin::none;
  stream_ref stream_;
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
