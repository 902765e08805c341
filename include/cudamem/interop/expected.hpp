// SPDX-License-Identifier: MIT
/// \file
/// `result<T>` to and from `cuda::std::expected<T, error>` (CCCL). Optional: <cuda/std/expected> is slow to compile.
///
///     cuda::std::expected<T, error> to_expected(result<T>&&)
///     result<T> from_expected(cuda::std::expected<T, error>&&)
#pragma once

#include <cudamem/error.hpp>

#include <cuda/std/expected>
#include <utility>

namespace cudamem {

/// The same outcome as a `cuda::std::expected<T, error>` (the value moved, or the error copied).
template <class T>
[[nodiscard]] cuda::std::expected<T, error> to_expected(result<T>&& outcome) {
  if (!outcome) return cuda::std::unexpected<error>(outcome.error());
  if constexpr (std::is_void_v<T>) return {};
  else return cuda::std::expected<T, error>(std::move(*outcome));
}

/// The same outcome as a `result<T>`: the inverse of to_expected.
template <class T>
[[nodiscard]] result<T> from_expected(cuda::std::expected<T, error>&& outcome) {
  if (!outcome) return outcome.error();
  if constexpr (std::is_void_v<T>) return {};
  else return result<T>(std::move(*outcome));
}

}  // namespace cudamem
