// SPDX-License-Identifier: MIT
/// \file
/// `pitched_span<T, Kind>`: rows of `width()` elements, `pitch_bytes()` apart, the 2D view passed to copies and
/// kernels, as span is the 1D one. Only the view layer: a kernel that takes a pitched view compiles no owner, lock or
/// copy engine (the owner is in pitched.hpp; the copies are in copy.hpp).
///
///   pitched_span<T, Kind>(first, width, height, pitch_bytes)   unchecked; trivially copyable, by value to kernels
///     v(r, c), v.row(r), v.subspan_unchecked(r, c, rows, cols)   kernel-side; debug builds: CUDAMEM_ASSERT
///     v.subspan(r, c, rows, cols)   checked: result<pitched_span>
///     data(), width(), height(), pitch_bytes(), size(), empty(), device(), view()
///   device_pitched_span<T>, pinned_pitched_span<T>, host_pitched_span<T>, managed_pitched_span<T>
///   make_pitched(ptr, width, height, pitch_bytes)   checked: result<pitched_span>
///   as_pitched(span, width, height)   a contiguous span as rows: result<pitched_span>
#pragma once

#include <cudamem/detail/arith.hpp>
#include <cudamem/detail/config.hpp>
#include <cudamem/kind.hpp>
#include <cudamem/ptr.hpp>
#include <cudamem/span.hpp>

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace cudamem {

/// A non-owning 2D view, trivially copyable (kernels take it by value); element access compiles where span's does.
template <class T, memory_kind Kind>
class pitched_span {
 public:
  using element_type = T;                  ///< T, with its const.
  using value_type = std::remove_cv_t<T>;  ///< T without const or volatile.
  using kind = Kind;                       ///< The memory kind.
  using pointer = ptr<T, Kind>;            ///< The typed address of the first element.
  using row_type = span<T, Kind>;          ///< One row.

  CUDAMEM_HD constexpr pitched_span() noexcept : data_(), width_(0), height_(0), pitch_(0) {}  ///< An empty view.
  /// `height` rows of `width` elements from `first`, `pitch_bytes` apart. Not checked: see make_pitched.
  CUDAMEM_HD constexpr pitched_span(ptr<T, Kind> first, std::size_t width, std::size_t height,
                                    std::size_t pitch_bytes) noexcept
      : data_(first), width_(width), height_(height), pitch_(pitch_bytes) {}
  /// The same elements, with const added or pinned widened to host (implicit; never the reverse).
  template <class U, class K2>
    requires(std::is_convertible_v<ptr<U, K2>, pointer> && !std::is_same_v<pitched_span<U, K2>, pitched_span>)
  CUDAMEM_HD constexpr pitched_span(pitched_span<U, K2> other) noexcept
      : pitched_span(other.data(), other.width(), other.height(), other.pitch_bytes()) {}

  CUDAMEM_HD constexpr pointer data() const noexcept { return data_; }               ///< The first element.
  CUDAMEM_HD constexpr std::size_t width() const noexcept { return width_; }         ///< Elements per row.
  CUDAMEM_HD constexpr std::size_t height() const noexcept { return height_; }       ///< Rows.
  CUDAMEM_HD constexpr std::size_t pitch_bytes() const noexcept { return pitch_; }   ///< Bytes between rows.
  CUDAMEM_HD constexpr std::size_t size() const noexcept { return width_ * height_; }  ///< Elements, unchecked.
  CUDAMEM_HD constexpr bool empty() const noexcept { return width_ == 0 || height_ == 0; }  ///< No element.
  CUDAMEM_HD constexpr device_id device() const noexcept { return data_.device(); }  ///< As data().device().
  CUDAMEM_HD constexpr pitched_span view() const noexcept { return *this; }  ///< This view, as an owner's view().
  /// Element (r, c); checked by CUDAMEM_ASSERT in debug builds only (host and device).
  CUDAMEM_DETAIL_ACCESSORS(T&, operator()(std::size_t r, std::size_t c), {
    CUDAMEM_ASSERT(r < height_ && c < width_, "pitched_span index out of range");
    return row_address(r)[c];
  })
  /// Row r as a span of width() elements; checked by CUDAMEM_ASSERT in debug builds only.
  CUDAMEM_DETAIL_ACCESSORS(row_type, row(std::size_t r), {
    CUDAMEM_ASSERT(r < height_, "pitched_span row out of range");
    return row_type(pointer(row_address(r), data_.device()), width_);
  })
  /// Rows [r, r + rows) of columns [c, c + cols); unchecked but for CUDAMEM_ASSERT in debug builds (kernels).
  CUDAMEM_HD pitched_span subspan_unchecked(std::size_t r, std::size_t c, std::size_t rows,
                                            std::size_t cols) const noexcept {
    CUDAMEM_ASSERT(r <= height_ && rows <= height_ - r && c <= width_ && cols <= width_ - c,
                   "pitched_span subspan out of range");
    return pitched_span(pointer(row_address(r) + c, data_.device()), cols, rows, pitch_);
  }
  /// As subspan_unchecked, checked; a null view stays null. Errors: out_of_range (leaves the view), size_overflow.
  [[nodiscard]] result<pitched_span> subspan(std::size_t r, std::size_t c, std::size_t rows,
                                             std::size_t cols) const noexcept {
    constexpr const char* api = "pitched_span::subspan";
    if (r > height_ || rows > height_ - r || c > width_ || cols > width_ - c)
      return error(errc::out_of_range, api, "rows [%zu, %zu + %zu) x columns [%zu, %zu + %zu) leave a %zu x %zu view",
                   r, r, rows, c, c, cols, width_, height_);
    std::size_t row_offset = 0, column_offset = 0, offset = 0;
    if (__builtin_mul_overflow(r, pitch_, &row_offset) || __builtin_mul_overflow(c, sizeof(T), &column_offset) ||
        __builtin_add_overflow(row_offset, column_offset, &offset) || !detail::steppable(offset, 1))
      return error(errc::size_overflow, api, "row %zu, column %zu is beyond what a pointer can step", r, c);
    if (data_.get() == nullptr) return pitched_span(data_, cols, rows, pitch_);
    return subspan_unchecked(r, c, rows, cols);
  }

 private:
  CUDAMEM_HD T* row_address(std::size_t r) const noexcept {
    using byte = std::conditional_t<std::is_const_v<T>, const unsigned char, unsigned char>;
    return reinterpret_cast<T*>(reinterpret_cast<byte*>(data_.get()) + r * pitch_);
  }
  pointer data_;
  std::size_t width_, height_, pitch_;
};

template <class T>
using device_pitched_span = pitched_span<T, device>;  ///< A 2D view of device memory.
template <class T>
using pinned_pitched_span = pitched_span<T, pinned>;  ///< A 2D view of page-locked host memory.
template <class T>
using host_pitched_span = pitched_span<T, host>;  ///< A 2D view of pageable host memory.
template <class T>
using managed_pitched_span = pitched_span<T, managed>;  ///< A 2D view of managed memory.

/// `height` rows of `width` from `first`, `pitch_bytes` apart, checked. Errors: invalid_argument (pitch below a row or
/// not a multiple of alignof(T)), size_overflow (past the end of the address space).
template <class T, memory_kind Kind>
[[nodiscard]] result<pitched_span<T, Kind>> make_pitched(ptr<T, Kind> first, std::size_t width, std::size_t height,
                                                         std::size_t pitch_bytes) noexcept {
  constexpr const char* api = "make_pitched";
  auto row_bytes = detail::bytes_of(width, sizeof(T), api);
  if (!row_bytes) return row_bytes.error();
  if (pitch_bytes % alignof(T) != 0)
    return error(errc::invalid_argument, api, "pitch (%zu bytes) is not a multiple of the element's alignment (%zu)",
                 pitch_bytes, alignof(T));
  if (height > 0 && pitch_bytes < *row_bytes)
    return error(errc::invalid_argument, api, "pitch (%zu bytes) is less than a row (%zu elements of %zu bytes)",
                 pitch_bytes, width, sizeof(T));
  std::size_t footprint = 0, end = 0;
  if (height > 0 && (__builtin_mul_overflow(pitch_bytes, height - 1, &footprint) ||
                     __builtin_add_overflow(footprint, *row_bytes, &footprint) || !detail::steppable(footprint, 1) ||
                     __builtin_add_overflow(reinterpret_cast<std::uintptr_t>(first.get()), footprint, &end)))
    return error(errc::size_overflow, api, "%zu rows of %zu bytes reach past the end of the address space", height,
                 pitch_bytes);
  return pitched_span<T, Kind>(first, width, height, pitch_bytes);
}
/// `flat` as `height` contiguous rows of `width`. Errors: extents_mismatch (width * height != size()), size_overflow.
template <class T, memory_kind Kind>
[[nodiscard]] result<pitched_span<T, Kind>> as_pitched(span<T, Kind> flat, std::size_t width,
                                                       std::size_t height) noexcept {
  constexpr const char* api = "as_pitched";
  std::size_t count = 0;
  if (__builtin_mul_overflow(width, height, &count) || count != flat.size())
    return error(errc::extents_mismatch, api, "%zu x %zu elements do not match a span of %zu", width, height,
                 flat.size());
  auto row_bytes = detail::bytes_of(width, sizeof(T), api);
  if (!row_bytes) return row_bytes.error();
  return pitched_span<T, Kind>(flat.data(), width, height, *row_bytes);
}

}  // namespace cudamem
