// SPDX-License-Identifier: MIT
// cudamem, internal: the figures an out-of-memory error carries (error::oom()), read from CUDA only once an allocation
// has failed. Every query runs with the failing device current and in relaxed capture mode (none of them joins or
// breaks a capture); a query CUDA refuses leaves its figures unknown and its error cleared unless sticky.
#pragma once

#include <cudamem/detail/capture.hpp>
#include <cudamem/device.hpp>
#include <cudamem/error.hpp>

#include <cstdint>

namespace cudamem::detail {

/// Whether `e` says an allocation found too little memory: CUDA's cudaErrorMemoryAllocation, or cudamem's
/// out_of_memory.
inline bool is_out_of_memory(const error& e) noexcept {
  return e == cudaErrorMemoryAllocation || e == errc::out_of_memory;
}

inline bool read_figure(cudaError_t code) noexcept {  // a query's success; its error cleared unless sticky
  if (code == cudaSuccess) return true;
  if (!error::is_sticky_status(code)) (void)cudaGetLastError();
  return false;
}

/// The figures of device `device` (-1: none, host memory) for a request of `bytes`: free and total memory, the
/// current memory pool's reserved and used bytes, the graphs' reserved and used bytes.
[[gnu::cold, gnu::noinline]] inline out_of_memory_info device_figures(std::size_t bytes, int device) noexcept {
  out_of_memory_info info;
  info.requested_bytes = bytes;
  info.device = device;
  if (device < 0) return info;
  relaxed_capture_scope relaxed;
  auto guard = device_guard::set(device_id(device));
  if (!guard) return info;
  std::size_t free_bytes = 0, total_bytes = 0;
  if (read_figure(cudaMemGetInfo(&free_bytes, &total_bytes))) {
    info.device_free_bytes = free_bytes, info.device_total_bytes = total_bytes;
    info.known |= out_of_memory_info::device_memory;
  }
  cudaMemPool_t pool = nullptr;
  std::uint64_t reserved = 0, used = 0;  // cuuint64_t, as the attributes are read
  if (read_figure(cudaDeviceGetMemPool(&pool, device)) &&
      read_figure(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved)) &&
      read_figure(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used))) {
    info.pool_reserved_bytes = reserved, info.pool_used_bytes = used;
    info.known |= out_of_memory_info::pool;
  }
  if (read_figure(cudaDeviceGetGraphMemAttribute(device, cudaGraphMemAttrReservedMemCurrent, &reserved)) &&
      read_figure(cudaDeviceGetGraphMemAttribute(device, cudaGraphMemAttrUsedMemCurrent, &used))) {
    info.graph_reserved_bytes = reserved, info.graph_used_bytes = used;
    info.known |= out_of_memory_info::graphs;
  }
  return info;
}

/// `failure` carrying the figures of `device` for `bytes`, where it says out of memory; else `failure` as it is.
[[gnu::cold, gnu::noinline]] inline error with_device_figures(const error& failure, std::size_t bytes,
                                                              int device) noexcept {
  if (!is_out_of_memory(failure)) return failure;
  return failure.with_out_of_memory(device_figures(bytes, device));
}

/// The current device's ordinal, -1 if CUDA cannot say.
inline int current_ordinal() noexcept {
  int device = -1;
  return read_figure(cudaGetDevice(&device)) ? device : -1;
}

}  // namespace cudamem::detail
