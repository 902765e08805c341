// SPDX-License-Identifier: MIT
// cudamem: overflow-checked size arithmetic for views, buffers and the transfer engine. Internal.
#pragma once

#include <cudamem/error.hpp>

#include <cstddef>
#include <cstdint>

namespace cudamem::detail {

/// count * elem_size, or size_overflow naming `api`.
inline result<std::size_t> bytes_of(std::size_t count, std::size_t elem_size, const char* api) noexcept {
  std::size_t bytes = 0;
  if (__builtin_mul_overflow(count, elem_size, &bytes))
    return error(errc::size_overflow, api, "%zu elements of %zu bytes overflow std::size_t", count, elem_size);
  return bytes;
}

/// Whether a pointer can step over `count` elements of `elem_size` bytes (at most PTRDIFF_MAX bytes) without wrapping.
constexpr bool steppable(std::size_t count, std::size_t elem_size) noexcept {
  return count <= static_cast<std::size_t>(PTRDIFF_MAX) / elem_size;
}

}  // namespace cudamem::detail
