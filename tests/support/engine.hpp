// SPDX-License-Identifier: MIT
// The transfer engine driven directly with untyped operands, as the typed layer drives it.
#pragma once

#include <cudamem/cudamem.hpp>

namespace engine {
using cudamem::detail::operand;
using cudamem::detail::plan;
/// The plan of a copy, or the error that refused it.
inline cudamem::result<plan> plan_copy(const operand& dst, const operand& src, std::size_t elem_size,
                                       cudaMemcpyKind direction, const char* api) {
  plan p;
  CUDAMEM_TRY(cudamem::detail::plan_copy(p, dst, src, elem_size, direction, api));
  return p;
}
inline cudamem::result<plan> plan_fill(const operand& dst, std::size_t elem_size, unsigned char value,
                                       const char* api) {
  plan p;
  CUDAMEM_TRY(cudamem::detail::plan_fill(p, dst, elem_size, value, api));
  return p;
}
inline cudamem::status copy_sync(const operand& dst, const operand& src, std::size_t elem_size,
                                 cudaMemcpyKind direction, const char* api) {
  return plan_copy(dst, src, elem_size, direction, api).and_then([&](const plan& p) {
    return cudamem::detail::run_sync(p, api);
  });
}
inline cudamem::status copy_async(const operand& dst, const operand& src, std::size_t elem_size,
                                  cudaMemcpyKind direction, cudamem::stream_ref s, const char* api) {
  return plan_copy(dst, src, elem_size, direction, api).and_then([&](const plan& p) {
    return cudamem::detail::run_async(p, s, api);
  });
}
inline cudamem::status fill_sync(const operand& dst, std::size_t elem_size, unsigned char value, const char* api) {
  return plan_fill(dst, elem_size, value, api).and_then([&](const plan& p) {
    return cudamem::detail::run_sync(p, api);
  });
}
}  // namespace engine
