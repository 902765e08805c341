// SPDX-License-Identifier: MIT
/// \file
/// Pitched 2D memory of one kind: rows of `width()` elements, `pitch_bytes()` apart. Views and owners take part in
/// copy.hpp's copies and fills like spans: with 2D of the same extents, or with a span of as many elements.
///
///   pitched_span<T, Kind>: v(row, col), v.row(r), subspan; make_pitched, as_pitched   checked: result<pitched_span>
///   pitched_buffer<T, Kind>::allocate(width, height [, device_id | stream_ref [, resource_ref<Kind>]])   owning
///   copy_2d(dst, dpitch, src, spitch, width_bytes, height [, stream])   cudaMemcpy2D on typed pointers
#pragma once

#include <cudamem/buffer.hpp>
#include <cudamem/copy.hpp>
#include <cudamem/detail/transfer.hpp>
#include <cudamem/span.hpp>

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

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
  // For copy.hpp's copies and fills (found by argument-dependent lookup).
  friend detail::operand operand_of(pitched_span v) noexcept {
    return {v.data_.get(), v.width_, v.height_, v.pitch_, v.device(), detail::kind_id_of<Kind>};
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

/// Owns uninitialized pitched rows, freed as the buffer it holds. Move-only (moved-from: empty), deep-const.
template <class T, memory_kind Kind>
class pitched_buffer {
  static constexpr bool on_device = !std::is_same_v<Kind, host> && !std::is_same_v<Kind, pinned>;

 public:
  using element_type = T;                    ///< T.
  using value_type = T;                      ///< T.
  using kind = Kind;                         ///< The memory kind.
  static constexpr bool owns_memory = true;  ///< Stream-ordered operations refuse a temporary one.
  pitched_buffer() noexcept = default;       ///< An empty buffer.

  /// `height` rows of `width` elements (device, managed: on the current device) from the kind's default resource,
  /// padded as cudaMallocPitch (host, pinned: 512 bytes). Synchronous; empty for 0. Errors: as buffer::allocate.
  [[nodiscard]] static result<pitched_buffer> allocate(std::size_t width, std::size_t height) noexcept {
    return make(width, height, on_device ? current_device() : device_id::host());
  }
  /// As allocate(width, height), on device `id` (the current device stays).
  [[nodiscard]] static result<pitched_buffer> allocate(std::size_t width, std::size_t height, device_id id) noexcept
    requires on_device
  {
    return make(width, height, id, id);
  }
  /// Rows ordered on `s`, on its device, as buffer::allocate(count, s) (device memory: not synchronizing, capturable;
  /// rows padded to cudaDevAttrTexturePitchAlignment). Errors: as buffer::allocate(count, s).
  [[nodiscard]] static result<pitched_buffer> allocate(std::size_t width, std::size_t height, stream_ref s) noexcept {
    if (!s.valid()) return detail::handle_moved_from(api, "stream");
    return make(width, height, on_device ? s.device() : device_id::host(), s);
  }
  /// As allocate(width, height, s), from `resource`. Errors: also whatever the resource reports.
  [[nodiscard]] static result<pitched_buffer> allocate(std::size_t width, std::size_t height, stream_ref s,
                                                       resource_ref<Kind> resource) noexcept {
    if (!s.valid()) return detail::handle_moved_from(api, "stream");
    return make(width, height, on_device ? s.device() : device_id::host(), s, resource);
  }

  pitched_buffer(pitched_buffer&& other) noexcept { *this = std::move(other); }  ///< Takes over `other`, emptied.
  /// Frees its memory, then takes over `other`'s.
  pitched_buffer& operator=(pitched_buffer&& other) noexcept {
    if (this != &other) {
      rows_ = std::move(other.rows_);
      width_ = std::exchange(other.width_, 0);
      height_ = std::exchange(other.height_, 0);
      pitch_ = std::exchange(other.pitch_, 0);
    }
    return *this;
  }

  ///@{
  /// The rows as a view, valid while the buffer lives; const elements for a const buffer. Not of a temporary.
  [[nodiscard]] pitched_span<T, Kind> view() & noexcept { return {rows_.data(), width_, height_, pitch_}; }
  [[nodiscard]] pitched_span<const T, Kind> view() const& noexcept { return {rows_.data(), width_, height_, pitch_}; }
  void view() const&& = delete;
  operator pitched_span<T, Kind>() & noexcept { return view(); }
  operator pitched_span<const T, Kind>() const& noexcept { return view(); }
  operator pitched_span<T, Kind>() const&& = delete;
  operator pitched_span<const T, Kind>() const&& = delete;
  ///@}
  [[nodiscard]] ptr<T, Kind> data() & noexcept { return rows_.data(); }  ///< The first element (null when empty).
  [[nodiscard]] ptr<const T, Kind> data() const& noexcept { return rows_.data(); }  ///< As data(), of const T.
  void data() const&& = delete;
  [[nodiscard]] std::size_t width() const noexcept { return width_; }  ///< Elements per row.
  [[nodiscard]] std::size_t height() const noexcept { return height_; }  ///< Rows.
  [[nodiscard]] std::size_t pitch_bytes() const noexcept { return pitch_; }  ///< Bytes from a row to the next.
  [[nodiscard]] bool empty() const noexcept { return width_ == 0 || height_ == 0; }  ///< No element.
  [[nodiscard]] device_id device() const noexcept { return rows_.device(); }  ///< As buffer::device().
  [[nodiscard]] stream_ref stream() const noexcept { return rows_.stream(); }  ///< The stream it is freed on.
  [[nodiscard]] resource_ref<Kind> resource() const noexcept { return rows_.resource(); }  ///< Where it came from.
  void set_stream(stream_ref s) noexcept { rows_.set_stream(s); }  ///< As buffer::set_stream.

 private:
  using storage = buffer<T, Kind>;
  static constexpr const char* api = "pitched_buffer::allocate";

  pitched_buffer(storage rows, std::size_t width, std::size_t height, std::size_t pitch) noexcept
      : rows_(std::move(rows)), width_(width), height_(height), pitch_(pitch) {}

  // Rows on `where`, padded as docs/decisions.md says, from buffer::allocate(count, args...): the caller's overload.
  template <class... Args>
  static result<pitched_buffer> make(std::size_t width, std::size_t height, result<device_id> where,
                                     Args... args) noexcept {
    constexpr bool stream_ordered = (std::is_same_v<Args, stream_ref> || ...);
    if (!where) return where.error().with_api(api);
    std::size_t step = 512;
    if constexpr (on_device) {
      auto alignment = stream_ordered && std::is_same_v<Kind, cudamem::device>
                           ? detail::cached_attribute<cudaDevAttrTexturePitchAlignment>(*where, api)
                           : detail::cached_attribute<cudaDevAttrTextureAlignment>(*where, api);
      if (!alignment) return alignment.error();
      step = static_cast<std::size_t>(*alignment);
    }
    if (step < alignof(T)) step = alignof(T);
    auto row_bytes = detail::bytes_of(width, sizeof(T), api);
    if (!row_bytes) return row_bytes.error();
    std::size_t pitch = 0;
    if (__builtin_add_overflow(*row_bytes, step - 1, &pitch))
      return error(errc::size_overflow, api, "a row of %zu bytes cannot be padded to %zu", *row_bytes, step);
    pitch = pitch / step * step;
    auto total = detail::bytes_of(height, pitch, api);
    if (!total) return total.error();
    auto rows = storage::allocate(*total / sizeof(T) + (*total % sizeof(T) != 0), args...);
    if (!rows) return rows.error().with_api(api);
    return pitched_buffer(std::move(*rows), width, height, pitch);
  }

  storage rows_;
  std::size_t width_ = 0, height_ = 0, pitch_ = 0;
};

template <class T>
using device_pitched_buffer = pitched_buffer<T, device>;  ///< Owning pitched device memory.
template <class T>
using pinned_pitched_buffer = pitched_buffer<T, pinned>;  ///< Owning pitched page-locked host memory.
template <class T>
using host_pitched_buffer = pitched_buffer<T, host>;  ///< Owning pitched pageable host memory.
template <class T>
using managed_pitched_buffer = pitched_buffer<T, managed>;  ///< Owning pitched managed memory.

namespace detail {
template <class T, class DK, class U, class SK>
status copy_rows(ptr<T, DK> dst, std::size_t dpitch, ptr<U, SK> src, std::size_t spitch, std::size_t width_bytes,
                 std::size_t height, const stream_ref* s) noexcept {
  check_copy_types<ptr<T, DK>, ptr<U, SK>>();
  return copy_operands({dst.get(), width_bytes, height, dpitch, dst.device(), kind_id_of<DK>},
                       {src.get(), width_bytes, height, spitch, src.device(), kind_id_of<SK>}, 1,
                       copy_direction<DK, SK>, s, "copy_2d");
}
}  // namespace detail

/// Copies `height` rows of `width_bytes` bytes from `src` (rows `spitch` bytes apart) to `dst` (`dpitch` apart) with
/// copy's checks and synchronization (cudaMemcpy2D). Compile-time: same element type, dst not const. Errors: as copy.
template <class T, memory_kind DK, class U, memory_kind SK>
[[nodiscard]] status copy_2d(ptr<T, DK> dst, std::size_t dpitch, ptr<U, SK> src, std::size_t spitch,
                             std::size_t width_bytes, std::size_t height) noexcept {
  return detail::copy_rows(dst, dpitch, src, spitch, width_bytes, height, nullptr);
}
/// As copy_2d, ordered on `s` (cudaMemcpy2DAsync); does not synchronize; can be captured. No pageable host memory.
template <class T, memory_kind DK, class U, memory_kind SK>
[[nodiscard]] status copy_2d(ptr<T, DK> dst, std::size_t dpitch, ptr<U, SK> src, std::size_t spitch,
                             std::size_t width_bytes, std::size_t height, stream_ref s) noexcept {
  detail::check_stream_ordered<ptr<T, DK>, ptr<U, SK>>();
  return detail::copy_rows(dst, dpitch, src, spitch, width_bytes, height, &s);
}

}  // namespace cudamem
