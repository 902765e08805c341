/// \file
/// `span<T, Kind>`: a typed pointer and a count, the 1D view passed to copies and kernels.
#pragma once

#include <cudamem/detail/transfer.hpp>
#include <cudamem/ptr.hpp>

#include <concepts>
#include <cstddef>
#include <type_traits>
#include <utility>

namespace cudamem {

template <class T, memory_kind Kind>
class span;

/// Anything that names its memory kind (`kind`) and offers a typed 1D view through `view()`: span,
/// buffer, host_registration. Copies and fills take these, so a buffer needs no conversion at the
/// call site.
template <class V>
concept viewable = requires(const V& v) {
  typename V::kind;
  { v.view() };
};

/// A non-owning view of `size()` elements of kind Kind. Trivially copyable; pass it to kernels by
/// value. Host-side slicing is bounds-checked and returns a result; operator[] is unchecked, and
/// compiles only on a side that may touch the memory. The members copy_from, copy_to, copy_to_host,
/// copy_from_host, copy_from_device and memset are CuPy's MemoryPointer operations, typed
/// (docs/cupy-mapping.md): without a stream they synchronize (complete before returning); with one
/// they are stream-ordered and do not synchronize, and then the host side must be page-locked
/// (checked at compile time). Their errors are those of cudamem::copy and cudamem::fill_bytes.
template <class T, memory_kind Kind>
class span {
 public:
  /// T, with its const.
  using element_type = T;
  /// T without const or volatile.
  using value_type = std::remove_cv_t<T>;
  /// The memory kind.
  using kind = Kind;
  /// The typed address of the first element.
  using pointer = ptr<T, Kind>;

  /// An empty view.
  CUDAMEM_HD constexpr span() noexcept : data_(), size_(0) {}
  /// `count` elements from `first`. Not checked here: a null `first` with a count is refused by
  /// every operation that would touch it.
  CUDAMEM_HD constexpr span(pointer first, std::size_t count) noexcept : data_(first), size_(count) {}
  /// The same elements, with const added or pinned widened to host (implicit; never the reverse).
  template <class U, class K2>
    requires(std::is_convertible_v<U (*)[], T (*)[]> && kind_convertible<K2, Kind> &&
             !(std::is_same_v<U, T> && std::is_same_v<K2, Kind>))
  CUDAMEM_HD constexpr span(span<U, K2> other) noexcept : data_(other.data()), size_(other.size()) {}
  /// Views a host container with data() and size() (std::vector, std::array, std::string, ...);
  /// host spans only, lvalues only.
  template <class Range>
    requires(std::is_same_v<Kind, host> && !std::is_same_v<std::remove_cvref_t<Range>, span> &&
             requires(Range& r) {
               { r.data() } -> std::convertible_to<T*>;
               { r.size() } -> std::convertible_to<std::size_t>;
             } && std::is_lvalue_reference_v<Range>)
  constexpr span(Range&& range) noexcept : data_(pointer(range.data())), size_(range.size()) {}
  /// Views a host array; host spans only.
  template <std::size_t N>
    requires std::is_same_v<Kind, host>
  constexpr span(T (&array)[N]) noexcept : data_(pointer(array)), size_(N) {}

  /// The typed address of the first element.
  CUDAMEM_HD constexpr pointer data() const noexcept { return data_; }
  /// The number of elements.
  CUDAMEM_HD constexpr std::size_t size() const noexcept { return size_; }
  /// size() * sizeof(T), unchecked: it wraps when the product overflows. Copies and fills check it
  /// and refuse such a span with errc::size_overflow.
  CUDAMEM_HD constexpr std::size_t size_bytes() const noexcept { return size_ * sizeof(T); }
  /// True when size() is 0.
  CUDAMEM_HD constexpr bool empty() const noexcept { return size_ == 0; }
  /// The device the memory lives on (device_id::host() for host and pinned memory).
  CUDAMEM_HD constexpr device_id device() const noexcept { return data_.device(); }
  /// This view (so that spans and buffers are interchangeable in copies).
  CUDAMEM_HD constexpr span view() const noexcept { return *this; }

  /// Element `i`; unchecked. Compiles only on a side that may touch Kind (see ptr).
  CUDAMEM_DETAIL_ACCESSORS(T&, operator[]([[maybe_unused]] std::size_t i), { return data_.get()[i]; })
  /// The raw address of the first element, for range-for. Compiles only where Kind may be touched.
  CUDAMEM_DETAIL_ACCESSORS(T*, begin(), { return data_.get(); })
  /// The raw address past the last element. Compiles only where Kind may be touched.
  CUDAMEM_DETAIL_ACCESSORS(T*, end(), { return data_.get() + size_; })

  /// Elements [offset, offset + count). Errors: out_of_range when that leaves the view.
  [[nodiscard]] result<span> subspan(std::size_t offset, std::size_t count) const noexcept {
    if (offset > size_ || count > size_ - offset)
      return error(errc::out_of_range, "span::subspan", "[%zu, %zu + %zu) is outside a span of %zu", offset, offset,
                   count, size_);
    return span(data_ + static_cast<std::ptrdiff_t>(offset), count);
  }
  /// Elements [offset, size()). Errors: out_of_range when offset > size().
  [[nodiscard]] result<span> subspan(std::size_t offset) const noexcept {
    if (offset > size_)
      return error(errc::out_of_range, "span::subspan", "offset %zu is outside a span of %zu", offset, size_);
    return span(data_ + static_cast<std::ptrdiff_t>(offset), size_ - offset);
  }
  /// The first `count` elements. Errors: out_of_range when count > size().
  [[nodiscard]] result<span> first(std::size_t count) const noexcept {
    if (count > size_) return error(errc::out_of_range, "span::first", "%zu elements from a span of %zu", count, size_);
    return span(data_, count);
  }
  /// The last `count` elements. Errors: out_of_range when count > size().
  [[nodiscard]] result<span> last(std::size_t count) const noexcept {
    if (count > size_) return error(errc::out_of_range, "span::last", "%zu elements from a span of %zu", count, size_);
    return span(data_ + static_cast<std::ptrdiff_t>(size_ - count), count);
  }

  /// Copies `src` into this view, as `copy(*this, src)` (CuPy: copy_from, copy_from_device,
  /// copy_from_host). Synchronizes. Errors: as cudamem::copy.
  template <viewable Src>
  [[nodiscard]] status copy_from(const Src& src) const noexcept;
  /// Copies `src` into this view on `s`, as `copy(*this, src, s)` (CuPy: copy_from_async and its
  /// _device/_host forms). Does not synchronize. Errors: as cudamem::copy with a stream.
  template <viewable Src>
  [[nodiscard]] status copy_from(const Src& src, stream_ref s) const noexcept;
  /// Copies this view into `dst`, as `copy(dst, *this)`. Synchronizes. Errors: as cudamem::copy.
  template <viewable Dst>
  [[nodiscard]] status copy_to(const Dst& dst) const noexcept;
  /// Copies this view into `dst` on `s`, as `copy(dst, *this, s)`. Does not synchronize. Errors: as
  /// cudamem::copy with a stream.
  template <viewable Dst>
  [[nodiscard]] status copy_to(const Dst& dst, stream_ref s) const noexcept;

  /// copy_to restricted to a host-side destination: host, pinned or managed (CuPy: copy_to_host).
  /// Synchronizes. Errors: as cudamem::copy.
  template <viewable Dst>
    requires Dst::kind::host_accessible
  [[nodiscard]] status copy_to_host(const Dst& dst) const noexcept { return copy_to(dst); }
  /// Stream-ordered copy_to_host (CuPy: copy_to_host_async); `dst` must be pinned or managed. Does
  /// not synchronize. Errors: as cudamem::copy with a stream.
  template <viewable Dst>
    requires Dst::kind::host_accessible
  [[nodiscard]] status copy_to_host(const Dst& dst, stream_ref s) const noexcept { return copy_to(dst, s); }
  /// copy_from restricted to a host-side source: host, pinned or managed (CuPy: copy_from_host).
  /// Synchronizes. Errors: as cudamem::copy.
  template <viewable Src>
    requires Src::kind::host_accessible
  [[nodiscard]] status copy_from_host(const Src& src) const noexcept { return copy_from(src); }
  /// Stream-ordered copy_from_host (CuPy: copy_from_host_async); `src` must be pinned or managed.
  /// Does not synchronize. Errors: as cudamem::copy with a stream.
  template <viewable Src>
    requires Src::kind::host_accessible
  [[nodiscard]] status copy_from_host(const Src& src, stream_ref s) const noexcept { return copy_from(src, s); }
  /// copy_from restricted to a device-side source: device or managed (CuPy: copy_from_device).
  /// Synchronizes. Errors: as cudamem::copy.
  template <viewable Src>
    requires(std::is_same_v<typename Src::kind, cudamem::device> || std::is_same_v<typename Src::kind, managed>)
  [[nodiscard]] status copy_from_device(const Src& src) const noexcept { return copy_from(src); }
  /// Stream-ordered copy_from_device (CuPy: copy_from_device_async). Does not synchronize. Errors:
  /// as cudamem::copy with a stream.
  template <viewable Src>
    requires(std::is_same_v<typename Src::kind, cudamem::device> || std::is_same_v<typename Src::kind, managed>)
  [[nodiscard]] status copy_from_device(const Src& src, stream_ref s) const noexcept { return copy_from(src, s); }

  /// Sets every byte to `value`, as `fill_bytes(*this, value)` (CuPy: memset). Synchronizes.
  /// Errors: as cudamem::fill_bytes.
  [[nodiscard]] status memset(unsigned char value) const noexcept;
  /// Sets every byte to `value` on `s`, as `fill_bytes(*this, value, s)` (CuPy: memset_async).
  /// Does not synchronize. Errors: as cudamem::fill_bytes with a stream.
  [[nodiscard]] status memset(unsigned char value, stream_ref s) const noexcept;

 private:
  pointer data_;
  std::size_t size_;
};

/// A view of device memory.
template <class T>
using device_span = span<T, device>;
/// A view of page-locked host memory.
template <class T>
using pinned_span = span<T, pinned>;
/// A view of pageable host memory.
template <class T>
using host_span = span<T, host>;
/// A view of managed memory.
template <class T>
using managed_span = span<T, managed>;

/// Deduces `span<T, host>` from a host container.
template <class Range>
span(Range&) -> span<std::remove_reference_t<decltype(*std::declval<Range&>().data())>, host>;
/// Deduces `span<T, host>` from a host array.
template <class T, std::size_t N>
span(T (&)[N]) -> span<T, host>;

/// Views `count` elements from `first`, which the caller asserts is memory of kind Kind on `id`.
/// Not checked.
template <memory_kind Kind, class T>
[[nodiscard]] constexpr span<T, Kind> make_span(T* first, std::size_t count, device_id id) noexcept {
  return span<T, Kind>(ptr<T, Kind>(first, id), count);
}
/// Views `count` elements of pageable host memory from `first`. Not checked.
template <class T>
[[nodiscard]] constexpr host_span<T> make_host_span(T* first, std::size_t count) noexcept {
  return host_span<T>(host_ptr<T>(first), count);
}

/// The bytes of a view, as const bytes of the same kind and device: for copying raw bytes between
/// views of different element types.
template <class T, memory_kind Kind>
[[nodiscard]] CUDAMEM_HD span<const std::byte, Kind> as_bytes(span<T, Kind> view) noexcept {
  return span<const std::byte, Kind>(
      ptr<const std::byte, Kind>(reinterpret_cast<const std::byte*>(view.data().get()), view.device()), view.size_bytes());
}
/// The bytes of a view of non-const elements, writable: the destination side of a raw-byte copy.
template <class T, memory_kind Kind>
  requires(!std::is_const_v<T>)
[[nodiscard]] CUDAMEM_HD span<std::byte, Kind> as_writable_bytes(span<T, Kind> view) noexcept {
  return span<std::byte, Kind>(ptr<std::byte, Kind>(reinterpret_cast<std::byte*>(view.data().get()), view.device()),
                               view.size_bytes());
}

namespace detail {
template <class T, class K>
constexpr operand operand_of(span<T, K> view) noexcept {
  return {view.data().get(), view.size(), view.device(), std::is_same_v<K, device>, std::is_same_v<K, host>};
}

template <class T, class U>
constexpr void check_copy_types() {
  static_assert(std::is_same_v<std::remove_cv_t<T>, std::remove_cv_t<U>>,
                "cudamem::copy: the element types of dst and src differ; copy between spans of the same type "
                "(to copy raw bytes, view both sides with cudamem::as_bytes / as_writable_bytes)");
  static_assert(!std::is_const_v<T>, "cudamem::copy: dst is a view of const elements");
  static_assert(std::is_trivially_copyable_v<T>, "cudamem::copy: T must be trivially copyable");
}

template <class DstKind, class SrcKind>
constexpr void check_stream_ordered_copy() {
  static_assert(stream_orderable<DstKind> && stream_orderable<SrcKind>,
                "cudamem: a stream-ordered copy needs page-locked host memory, and one side is pageable "
                "(kind host): allocate it as a pinned_buffer, or page-lock it with cudamem::host_register, "
                "or call the synchronous form without a stream");
}

template <class Kind>
constexpr void check_stream_ordered_fill() {
  static_assert(stream_orderable<Kind>,
                "cudamem: a stream-ordered fill needs page-locked host memory, and this view is pageable "
                "(kind host): allocate it as a pinned_buffer, or page-lock it with cudamem::host_register, "
                "or call the synchronous form without a stream");
}

template <class T, class DstKind, class U, class SrcKind>
status copy_spans(span<T, DstKind> dst, span<U, SrcKind> src, const char* api) noexcept {
  check_copy_types<T, U>();
  return copy_sync(operand_of(dst), operand_of(src), sizeof(T), copy_direction<DstKind, SrcKind>, api);
}
template <class T, class DstKind, class U, class SrcKind>
status copy_spans(span<T, DstKind> dst, span<U, SrcKind> src, stream_ref s, const char* api) noexcept {
  check_copy_types<T, U>();
  check_stream_ordered_copy<DstKind, SrcKind>();
  return copy_async(operand_of(dst), operand_of(src), sizeof(T), copy_direction<DstKind, SrcKind>, s, api);
}
}  // namespace detail

template <class T, memory_kind Kind>
template <viewable Src>
status span<T, Kind>::copy_from(const Src& src) const noexcept {
  return detail::copy_spans(*this, src.view(), "copy_from");
}
template <class T, memory_kind Kind>
template <viewable Src>
status span<T, Kind>::copy_from(const Src& src, stream_ref s) const noexcept {
  return detail::copy_spans(*this, src.view(), s, "copy_from");
}
template <class T, memory_kind Kind>
template <viewable Dst>
status span<T, Kind>::copy_to(const Dst& dst) const noexcept {
  return detail::copy_spans(dst.view(), *this, "copy_to");
}
template <class T, memory_kind Kind>
template <viewable Dst>
status span<T, Kind>::copy_to(const Dst& dst, stream_ref s) const noexcept {
  return detail::copy_spans(dst.view(), *this, s, "copy_to");
}
template <class T, memory_kind Kind>
status span<T, Kind>::memset(unsigned char value) const noexcept {
  static_assert(!std::is_const_v<T>, "cudamem: memset on a view of const elements");
  return detail::fill_sync(detail::operand_of(*this), sizeof(T), value, "memset");
}
template <class T, memory_kind Kind>
status span<T, Kind>::memset(unsigned char value, stream_ref s) const noexcept {
  static_assert(!std::is_const_v<T>, "cudamem: memset on a view of const elements");
  detail::check_stream_ordered_fill<Kind>();
  return detail::fill_async(detail::operand_of(*this), sizeof(T), value, s, "memset");
}

}  // namespace cudamem
