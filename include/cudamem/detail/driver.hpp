// SPDX-License-Identifier: MIT
// Internal: hot-path stream and event calls through the driver (loaded at run time), else the runtime: decisions.md.
#pragma once

#include <cudamem/detail/config.hpp>

#include <type_traits>

namespace cudamem::detail {

// The driver's signatures in the runtime's types, so that no header needs <cuda.h>: CUstream and CUevent are the same
// types as cudaStream_t and cudaEvent_t, and CUresult, CUstreamCaptureStatus and CUstreamCaptureMode are int-sized
// enums whose values here (success, not ready, capture status and mode) equal the runtime's; tests/host/streams.cpp
// holds the two sets to each other.
struct driver_calls {
  cudaError_t (*stream_is_capturing)(cudaStream_t, cudaStreamCaptureStatus*) = nullptr;
  cudaError_t (*stream_get_id)(cudaStream_t, unsigned long long*) = nullptr;
  cudaError_t (*exchange_capture_mode)(cudaStreamCaptureMode*) = nullptr;
  cudaError_t (*event_record)(cudaEvent_t, cudaStream_t) = nullptr;
  cudaError_t (*event_query)(cudaEvent_t) = nullptr;
  // The 2D kernel's allocation check: cuMemGetAddressRange, CUdeviceptr being unsigned long long.
  cudaError_t (*mem_get_address_range)(unsigned long long*, std::size_t*, unsigned long long) = nullptr;
  // Contiguous stream-ordered fills and copies: cuMemsetD8Async, cuMemcpyAsync (the driver infers the direction).
  cudaError_t (*memset_d8_async)(unsigned long long, unsigned char, std::size_t, cudaStream_t) = nullptr;
  cudaError_t (*memcpy_async)(unsigned long long, unsigned long long, std::size_t, cudaStream_t) = nullptr;
};

/// Sets `f` to the driver's entry point `name` (the CUDA 12.0 version of it), leaving it null where the driver lacks
/// it; `per_thread`: the per-thread-default-stream flavour. Leaves CUDA's last-error slot to the caller.
template <class F>
void load_driver_entry(const char* name, F& f, bool per_thread = false) noexcept {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  const unsigned long long flags = per_thread ? cudaEnablePerThreadDefaultStream : cudaEnableDefault;
  if (cudaGetDriverEntryPointByVersion(name, &p, 12000, flags, &found) == cudaSuccess &&
      found == cudaDriverEntryPointSuccess)
    f = reinterpret_cast<F>(p);
}
// One table per default-stream flavour; out of line, so that driver_table() inlines to the check of its guard.
template <bool PerThread>
[[gnu::noinline]] driver_calls load_driver_table() noexcept {
  driver_calls t;
  const cudaError_t earlier = cudaPeekAtLastError();
  auto load = [](const char* name, auto& f) { load_driver_entry(name, f, PerThread); };
  load("cuStreamIsCapturing", t.stream_is_capturing);
  load("cuStreamGetId", t.stream_get_id);
  load("cuThreadExchangeStreamCaptureMode", t.exchange_capture_mode);
  load("cuEventRecord", t.event_record);
  load("cuEventQuery", t.event_query);
  load("cuMemGetAddressRange", t.mem_get_address_range);
  load("cuMemsetD8Async", t.memset_d8_async);
  load("cuMemcpyAsync", t.memcpy_async);
  if (earlier == cudaSuccess) (void)cudaGetLastError();  // a failed lookup's own error, not the caller's
  return t;
}
template <bool PerThread>
[[gnu::always_inline]] inline const driver_calls& driver_table() noexcept {
  static const driver_calls table = load_driver_table<PerThread>();
  return table;
}
#if defined(CUDA_API_PER_THREAD_DEFAULT_STREAM)
inline const driver_calls& driver() noexcept { return driver_table<true>(); }
#else
inline const driver_calls& driver() noexcept { return driver_table<false>(); }
#endif

/// Whether the driver answered cuStreamIsCapturing for `s` (into `status`); false: ask the runtime, for its error.
inline bool driver_capture_status(cudaStream_t s, cudaStreamCaptureStatus& status) noexcept {
  const auto f = driver().stream_is_capturing;
  return f != nullptr && f(s, &status) == cudaSuccess;
}
/// The runtime calls below, through the driver where it answers.
inline cudaError_t stream_capture_status(cudaStream_t s, cudaStreamCaptureStatus* status) noexcept {
  return driver_capture_status(s, *status) ? cudaSuccess : cudaStreamIsCapturing(s, status);
}
inline cudaError_t stream_unique_id(cudaStream_t s, unsigned long long* id) noexcept {
  const auto f = driver().stream_get_id;
  return f != nullptr && f(s, id) == cudaSuccess ? cudaSuccess : cudaStreamGetId(s, id);
}
inline cudaError_t exchange_capture_mode(cudaStreamCaptureMode* mode) noexcept {
  const auto f = driver().exchange_capture_mode;
  return f != nullptr && f(mode) == cudaSuccess ? cudaSuccess : cudaThreadExchangeStreamCaptureMode(mode);
}
inline cudaError_t record_event(cudaEvent_t e, cudaStream_t s) noexcept {
  const auto f = driver().event_record;
  return f != nullptr && f(e, s) == cudaSuccess ? cudaSuccess : cudaEventRecord(e, s);
}
/// cudaMemsetAsync and cudaMemcpyAsync of contiguous bytes. The driver's forms skip the runtime's layer (about 70 ns
/// of a 4-byte fill's 900 on an H200 host); where the driver refuses (no current context, memory mapped only where
/// another device is current, bad arguments), the runtime call runs, so the outcome and its error are the runtime's.
inline cudaError_t memset_async(void* dst, unsigned char value, std::size_t bytes, cudaStream_t s) noexcept {
  const auto f = driver().memset_d8_async;
  if (f != nullptr && f(reinterpret_cast<unsigned long long>(dst), value, bytes, s) == cudaSuccess) [[likely]]
    return cudaSuccess;
  return cudaMemsetAsync(dst, value, bytes, s);
}
inline cudaError_t memcpy_async(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind,
                                cudaStream_t s) noexcept {
  const auto f = driver().memcpy_async;
  if (f != nullptr && f(reinterpret_cast<unsigned long long>(dst), reinterpret_cast<unsigned long long>(src), bytes,
                        s) == cudaSuccess) [[likely]]
    return cudaSuccess;
  return cudaMemcpyAsync(dst, src, bytes, kind, s);
}
inline cudaError_t query_event(cudaEvent_t e) noexcept {  // not-ready: cudaErrorNotReady, never stored by the runtime
  const auto f = driver().event_query;
  if (f != nullptr) {
    const cudaError_t r = f(e);  // CUDA_SUCCESS and CUDA_ERROR_NOT_READY are cudaSuccess and cudaErrorNotReady
    if (r == cudaSuccess || r == cudaErrorNotReady) return r;
  }
  return cudaEventQuery(e);
}

}  // namespace cudamem::detail
