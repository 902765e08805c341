// SPDX-License-Identifier: MIT
// The transfer engine driven directly with untyped operands, as the typed layer drives it.
#pragma once

#include <cudamem/cudamem.hpp>

namespace engine {
using cudamem::detail::operand;
inline cudamem::status copy_sync(const operand& dst, const operand& src, std::size_t elem_size,
                                 cudaMemcpyKind direction, const char* api) {
  return cudamem::detail::run_sync(cudamem::detail::plan_copy(dst, src, elem_size, direction, api), api);
}
inline cudamem::status copy_async(const operand& dst, const operand& src, std::size_t elem_size,
                                  cudaMemcpyKind direction, cudamem::stream_ref s, const char* api) {
  return cudamem::detail::run_async(cudamem::detail::plan_copy(dst, src, elem_size, direction, api), s, api);
}
inline cudamem::status fill_sync(const operand& dst, std::size_t elem_size, unsigned char value, const char* api) {
  return cudamem::detail::run_sync(cudamem::detail::plan_fill(dst, elem_size, value, api), api);
}
}  // namespace engine
