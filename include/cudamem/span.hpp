// SPDX-License-Identifier: MIT
/// \file
/// `span<T, Kind>`: a typed pointer and a count, the 1D view passed to copies and kernels.
///
///     span<T, Kind>(ptr, count); span(host container), span(host array)   unchecked; by value to kernels
///       data(), size(), size_bytes(), empty(), device(), view(), s[i], begin(), end()   (where Kind may be touched)
///       subspan_unchecked(offset, count)   kernel-side; debug builds: CUDAMEM_ASSERT
///       subspan(offset [, count]), first(count), last(count)   checked: result<span>
///     device_span<T>, pinned_span<T>, host_span<T>, managed_span<T>
///     make_span<Kind>(raw, count, device_id), make_host_span(raw, count)
///     as_bytes(span), as_writable_bytes(span)   checked: result<span<[const] std::byte, Kind>>
///     viewable<V>                          what copies take: a `kind` and a `view()`
#pragma once

#include <cudamem/detail/arith.hpp>
#include <cudamem/ptr.hpp>

#include <concepts>
#include <cstddef>
#include <type_traits>
#include <utility>

namespace cudamem {

/// What copies and fills take: a `kind` and a typed `view()` (span, buffer, host_registration); owners: `owns_memory`.
template <class V>
concept viewable = requires(const V& v) {
  typename V::kind;
  { v.view() };
};

/// A non-owning view of `size()` elements of kind Kind, passed to kernels by value; element access as ptr allows.
template <class T, memory_kind Kind>
class span {
 public:
  using element_type = T;                  ///< T, with its const.
  using value_type = std::remove_cv_t<T>;  ///< T without const or volatile.
  using kind = Kind;                       ///< The memory kind.
  using pointer = ptr<T, Kind>;            ///< The typed address of the first element.

  CUDAMEM_HD constexpr span() noexcept : data_(), size_(0) {}  ///< An empty view.
  /// `count` elements from `first`; not checked (operations that touch a null `first` with a count refuse it).
  CUDAMEM_HD constexpr span(pointer first, std::size_t count) noexcept : data_(first), size_(count) {}
  /// The same elements, with const added or pinned widened to host (implicit; never the reverse).
  template <class U, class K2>
    requires(std::is_convertible_v<ptr<U, K2>, pointer> && !std::is_same_v<span<U, K2>, span>)
  CUDAMEM_HD constexpr span(span<U, K2> other) noexcept : data_(other.data()), size_(other.size()) {}
  /// Views a host container with data() and size() (std::vector, std::string, ...); host spans, lvalues only.
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
  CUDAMEM_HD constexpr pointer data() const noexcept { return data_; }          ///< The first element's address.
  CUDAMEM_HD constexpr std::size_t size() const noexcept { return size_; }      ///< The number of elements.
  CUDAMEM_HD constexpr bool empty() const noexcept { return size_ == 0; }       ///< True when size() is 0.
  CUDAMEM_HD constexpr device_id device() const noexcept { return data_.device(); }  ///< As data().device().
  CUDAMEM_HD constexpr span view() const noexcept { return *this; }  ///< This view, as a buffer's view().
  CUDAMEM_HD constexpr std::size_t size_bytes() const noexcept { return size_ * sizeof(T); }  ///< Wraps on overflow.
  /// Element `i`; checked by CUDAMEM_ASSERT in debug builds only.
  CUDAMEM_DETAIL_ACCESSORS(T&, operator[](std::size_t i), {
    CUDAMEM_ASSERT(i < size_, "span index out of range");
    return data_.get()[i];
  })
  CUDAMEM_DETAIL_ACCESSORS(T*, begin(), { return data_.get(); })       ///< The first element's raw address.
  CUDAMEM_DETAIL_ACCESSORS(T*, end(), { return data_.get() + size_; })  ///< The raw address past the last.
  /// Elements [offset, offset + count), checked by CUDAMEM_ASSERT in debug builds only: for kernels, hot loops.
  CUDAMEM_HD constexpr span subspan_unchecked(std::size_t offset, std::size_t count) const noexcept {
    CUDAMEM_ASSERT(offset <= size_ && count <= size_ - offset, "subspan out of range");
    return span(data_ + static_cast<std::ptrdiff_t>(offset), count);
  }
  /// Elements [offset, offset + count). Errors: out_of_range when that leaves the view.
  [[nodiscard]] result<span> subspan(std::size_t offset, std::size_t count) const noexcept {
    if (offset > size_ || count > size_ - offset)
      return error(errc::out_of_range, "span::subspan", "[%zu, %zu + %zu) is outside a span of %zu", offset, offset,
                   count, size_);
    return slice(offset, count, "span::subspan");
  }
  /// Elements [offset, size()). Errors: out_of_range when offset > size().
  [[nodiscard]] result<span> subspan(std::size_t offset) const noexcept {
    if (offset > size_)
      return error(errc::out_of_range, "span::subspan", "offset %zu is outside a span of %zu", offset, size_);
    return slice(offset, size_ - offset, "span::subspan");
  }
  /// The first `count` elements. Errors: out_of_range when count > size().
  [[nodiscard]] result<span> first(std::size_t count) const noexcept { return edge(count, false, "span::first"); }
  /// The last `count` elements. Errors: out_of_range when count > size().
  [[nodiscard]] result<span> last(std::size_t count) const noexcept { return edge(count, true, "span::last"); }

 private:
  result<span> edge(std::size_t count, bool last, const char* api) const noexcept {  // first() or last()
    if (count > size_) return error(errc::out_of_range, api, "%zu elements from a span of %zu", count, size_);
    return slice(last ? size_ - count : 0, count, api);
  }
  // A null view stays null (copies still refuse it); an offset a pointer cannot step is refused, not wrapped.
  result<span> slice(std::size_t offset, std::size_t count, const char* api) const noexcept {
    if (!detail::steppable(offset, sizeof(T)))
      return error(errc::size_overflow, api, "offset %zu is beyond what a pointer can step", offset);
    return span(data_ ? data_ + static_cast<std::ptrdiff_t>(offset) : data_, count);
  }
  pointer data_;
  std::size_t size_;
};

template <class T>
using device_span = span<T, device>;  ///< A view of device memory.
template <class T>
using pinned_span = span<T, pinned>;  ///< A view of page-locked host memory.
template <class T>
using host_span = span<T, host>;  ///< A view of pageable host memory.
template <class T>
using managed_span = span<T, managed>;  ///< A view of managed memory.
/// Deduces `span<T, host>` from a host container.
template <class Range>
span(Range&) -> span<std::remove_reference_t<decltype(*std::declval<Range&>().data())>, host>;
/// Deduces `span<T, host>` from a host array.
template <class T, std::size_t N>
span(T (&)[N]) -> span<T, host>;

/// Views `count` elements from `first`, which the caller asserts is memory of kind Kind on `id`. Not checked.
template <memory_kind Kind, class T>
[[nodiscard]] constexpr span<T, Kind> make_span(T* first, std::size_t count, device_id id) noexcept {
  return span<T, Kind>(ptr<T, Kind>(first, id), count);
}
/// Views `count` elements of pageable host memory from `first`. Not checked.
template <class T>
[[nodiscard]] constexpr host_span<T> make_host_span(T* first, std::size_t count) noexcept {
  return host_span<T>(host_ptr<T>(first), count);
}
/// The bytes of a view, const, of the same kind and device, for raw copies. Errors: size_overflow (too many bytes).
template <class T, memory_kind Kind>
[[nodiscard]] result<span<const std::byte, Kind>> as_bytes(span<T, Kind> view) noexcept {
  auto bytes = detail::bytes_of(view.size(), sizeof(T), "as_bytes");
  if (!bytes) return bytes.error();
  return make_span<Kind>(reinterpret_cast<const std::byte*>(view.data().get()), *bytes, view.device());
}
/// The bytes of a view of non-const elements, writable: the destination of a raw copy. Errors: as as_bytes.
template <class T, memory_kind Kind>
  requires(!std::is_const_v<T>)
[[nodiscard]] result<span<std::byte, Kind>> as_writable_bytes(span<T, Kind> view) noexcept {
  auto bytes = detail::bytes_of(view.size(), sizeof(T), "as_writable_bytes");
  if (!bytes) return bytes.error();
  return make_span<Kind>(reinterpret_cast<std::byte*>(view.data().get()), *bytes, view.device());
}

}  // namespace cudamem
