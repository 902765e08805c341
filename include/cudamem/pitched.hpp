// SPDX-License-Identifier: MIT
/// \file
/// `pitched_buffer<T, Kind>`: owning pitched 2D memory of one kind, rows of `width()` elements `pitch_bytes()` apart,
/// as buffer is the 1D owner; its view is a pitched_span (pitched_span.hpp). Views and owners take part in copy.hpp's
/// copies and fills like spans: with 2D of the same extents, or with a span of as many elements. This header also
/// brings in copy.hpp, where copy_2d is, so that code written against it before copy_2d moved there still compiles.
///
///   pitched_buffer<T, Kind>::allocate(width, height [, device_id | stream_ref [, resource_ref<Kind>]])   padded rows
///     b.view(), b.data(), width(), height(), pitch_bytes(), empty(), device(), stream(), resource(), set_stream(s)
///     use_on(s)   its free waits for the work queued on `s` so far, as buffer::use_on (copies record theirs)
///     move-only, deep-const (a const buffer views const T); no view or pointer of a temporary
///   device_pitched_buffer<T>, pinned_pitched_buffer<T>, host_pitched_buffer<T>, managed_pitched_buffer<T>
///   from pitched_span.hpp: pitched_span<T, Kind>, make_pitched, as_pitched; from copy.hpp: copy, fill, copy_2d
#pragma once

#include <cudamem/buffer.hpp>
#include <cudamem/copy.hpp>  // not used here: copy_2d was declared in this header before it joined the other copies
#include <cudamem/pitched_span.hpp>

#include <cstddef>
#include <type_traits>
#include <utility>

namespace cudamem {

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
  ///@}
  [[nodiscard]] ptr<T, Kind> data() & noexcept { return rows_.data(); }  ///< The first element (null when empty).
  [[nodiscard]] ptr<const T, Kind> data() const& noexcept { return rows_.data(); }  ///< As data(), of const T.
  ///@{
  /// Converts to its view as view() does; not a temporary buffer, whose view would dangle.
  CUDAMEM_DETAIL_OWNER_VIEWS((pitched_span<T, Kind>), (pitched_span<const T, Kind>));
  ///@}
  [[nodiscard]] std::size_t width() const noexcept { return width_; }  ///< Elements per row.
  [[nodiscard]] std::size_t height() const noexcept { return height_; }  ///< Rows.
  [[nodiscard]] std::size_t pitch_bytes() const noexcept { return pitch_; }  ///< Bytes from a row to the next.
  [[nodiscard]] bool empty() const noexcept { return width_ == 0 || height_ == 0; }  ///< No element.
  [[nodiscard]] device_id device() const noexcept { return rows_.device(); }  ///< As buffer::device().
  [[nodiscard]] stream_ref stream() const noexcept { return rows_.stream(); }  ///< The stream it is freed on.
  [[nodiscard]] resource_ref<Kind> resource() const noexcept { return rows_.resource(); }  ///< Where it came from.
  void set_stream(stream_ref s) noexcept { rows_.set_stream(s); }  ///< As buffer::set_stream.
  /// As buffer::use_on: its free waits for the work queued on `s` so far. Errors: as buffer::use_on.
  [[nodiscard]] status use_on(stream_ref s) const noexcept { return rows_.use_on(s); }

 private:
  using storage = buffer<T, Kind>;
  static constexpr const char* api = "pitched_buffer::allocate";
  friend struct detail::owner_access;
  const detail::stream_uses& tracked_uses() const noexcept { return detail::owner_access::uses(rows_); }

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

}  // namespace cudamem
