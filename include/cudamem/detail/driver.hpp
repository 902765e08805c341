// SPDX-License-Identifier: MIT
// Internal: hot-path stream and event calls through the driver (loaded at run time), else the runtime: decisions.md.
#pragma once

#include <cudamem/detail/config.hpp>

#include <cuda.h>

#include <type_traits>

namespace cudamem::detail {

static_assert(int{CU_STREAM_CAPTURE_STATUS_ACTIVE} == int{cudaStreamCaptureStatusActive} &&
              int{CU_STREAM_CAPTURE_MODE_RELAXED} == int{cudaStreamCaptureModeRelaxed});

struct driver_calls {
  CUresult (*stream_is_capturing)(CUstream, CUstreamCaptureStatus*) = nullptr;
  CUresult (*stream_get_id)(CUstream, unsigned long long*) = nullptr;
  CUresult (*exchange_capture_mode)(CUstreamCaptureMode*) = nullptr;
  CUresult (*event_record)(CUevent, CUstream) = nullptr;
  CUresult (*event_query)(CUevent) = nullptr;
  CUresult (*mem_get_address_range)(CUdeviceptr*, std::size_t*, CUdeviceptr) = nullptr;  // the 2D kernel's check
};

// One table per default-stream flavour; out of line, so that driver_table() inlines to the check of its guard.
template <bool PerThread>
[[gnu::noinline]] driver_calls load_driver_table() noexcept {
  driver_calls t;
  const cudaError_t earlier = cudaPeekAtLastError();
  auto load = [](const char* name, auto& f) {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    const unsigned long long flags = PerThread ? cudaEnablePerThreadDefaultStream : cudaEnableDefault;
    if (cudaGetDriverEntryPointByVersion(name, &p, 12000, flags, &found) == cudaSuccess &&
        found == cudaDriverEntryPointSuccess)
      f = reinterpret_cast<std::remove_reference_t<decltype(f)>>(p);
  };
  load("cuStreamIsCapturing", t.stream_is_capturing);
  load("cuStreamGetId", t.stream_get_id);
  load("cuThreadExchangeStreamCaptureMode", t.exchange_capture_mode);
  load("cuEventRecord", t.event_record);
  load("cuEventQuery", t.event_query);
  load("cuMemGetAddressRange", t.mem_get_address_range);
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
inline bool driver_capture_status(cudaStream_t s, CUstreamCaptureStatus& status) noexcept {
  const auto f = driver().stream_is_capturing;
  return f != nullptr && f(s, &status) == CUDA_SUCCESS;
}
/// The runtime calls below, through the driver where it answers.
inline cudaError_t stream_capture_status(cudaStream_t s, cudaStreamCaptureStatus* status) noexcept {
  CUstreamCaptureStatus st{};
  if (!driver_capture_status(s, st)) return cudaStreamIsCapturing(s, status);
  *status = static_cast<cudaStreamCaptureStatus>(st);
  return cudaSuccess;
}
inline cudaError_t stream_unique_id(cudaStream_t s, unsigned long long* id) noexcept {
  const auto f = driver().stream_get_id;
  return f != nullptr && f(s, id) == CUDA_SUCCESS ? cudaSuccess : cudaStreamGetId(s, id);
}
inline cudaError_t exchange_capture_mode(cudaStreamCaptureMode* mode) noexcept {
  const auto f = driver().exchange_capture_mode;
  if (f != nullptr && f(reinterpret_cast<CUstreamCaptureMode*>(mode)) == CUDA_SUCCESS) return cudaSuccess;
  return cudaThreadExchangeStreamCaptureMode(mode);
}
inline cudaError_t record_event(cudaEvent_t e, cudaStream_t s) noexcept {
  const auto f = driver().event_record;
  return f != nullptr && f(e, s) == CUDA_SUCCESS ? cudaSuccess : cudaEventRecord(e, s);
}
inline cudaError_t query_event(cudaEvent_t e) noexcept {  // not-ready: cudaErrorNotReady, never stored by the runtime
  const auto f = driver().event_query;
  if (f != nullptr) {
    const CUresult r = f(e);
    if (r == CUDA_SUCCESS) return cudaSuccess;
    if (r == CUDA_ERROR_NOT_READY) return cudaErrorNotReady;
  }
  return cudaEventQuery(e);
}

}  // namespace cudamem::detail
