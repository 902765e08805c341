// SPDX-License-Identifier: MIT
// cudamem: pitched views as strides in elements (as mdspan and DLPack count them), and back. Internal to interop/.
#pragma once

#include <cudamem/pitched_span.hpp>

#include <cstddef>

namespace cudamem::detail {

/// The pitch of `rows` in elements. Errors: invalid_argument when not whole (a 12-byte T in rows padded to 512 bytes).
template <class T, memory_kind Kind>
result<std::size_t> row_stride_in_elements(pitched_span<T, Kind> rows, const char* api) noexcept {
  if (rows.pitch_bytes() % sizeof(T) != 0)
    return error(errc::invalid_argument, api,
                 "pitch (%zu bytes) is not a multiple of the element's size (%zu): no stride in elements expresses it",
                 rows.pitch_bytes(), sizeof(T));
  return rows.pitch_bytes() / sizeof(T);
}
/// The strided rows as a view checked as make_pitched (one row or none: its length as pitch). Errors: invalid_argument
/// (columns not adjacent, or as make_pitched); size_overflow.
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
