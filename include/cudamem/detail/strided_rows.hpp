// SPDX-License-Identifier: MIT
// cudamem: pitched views as strides counted in elements, and back, for the interop headers (mdspan and DLPack count
// strides in elements, cudamem counts the pitch in bytes). Internal: include a public header instead.
#pragma once

#include <cudamem/pitched.hpp>

#include <cstddef>

namespace cudamem::detail {

/// The pitch of `rows` in elements. Errors: invalid_argument when it is not a whole number of elements (possible
/// for an element whose size is not a power of two, such as a 12-byte struct in rows padded to 512 bytes).
template <class T, memory_kind Kind>
result<std::size_t> row_stride_in_elements(pitched_span<T, Kind> rows, const char* api) noexcept {
  if (rows.pitch_bytes() % sizeof(T) != 0)
    return error(errc::invalid_argument, api,
                 "pitch (%zu bytes) is not a multiple of the element's size (%zu): no stride in elements expresses it",
                 rows.pitch_bytes(), sizeof(T));
  return rows.pitch_bytes() / sizeof(T);
}

/// `rows` rows of `columns` elements from `first`, `row_stride` elements apart with `column_stride` between
/// neighbours, as a pitched view, checked as make_pitched checks. A single row (or none) takes its own length as
/// its pitch, whatever its row stride says. Errors: invalid_argument when the columns are not adjacent
/// (column_stride != 1 with more than one column), or as make_pitched; size_overflow.
template <class T, memory_kind Kind>
result<pitched_span<T, Kind>> rows_from_strides(T* first, device_id id, std::size_t rows, std::size_t columns,
                                                std::size_t row_stride, std::size_t column_stride,
                                                const char* api) noexcept {
  if (columns > 1 && column_stride != 1)
    return error(errc::invalid_argument, api, "the columns are %zu elements apart, not adjacent (stride 1)",
                 column_stride);
  auto pitch = bytes_of(rows > 1 ? row_stride : columns, sizeof(T), api);
  if (!pitch) return pitch.error();
  auto view = make_pitched(ptr<T, Kind>(first, id), columns, rows, *pitch);
  if (!view) return view.error().with_api(api);
  return *view;
}

}  // namespace cudamem::detail
