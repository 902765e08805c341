// cudamem: the untyped core of every 1D copy and fill: checks, then one CUDA call. Internal.
// Kept out of the templates so that each (T, kind, kind) instantiation is a thin forwarding shim.
#pragma once

#include <cudamem/stream.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace cudamem::detail {

/// One operand of a 1D transfer, untyped.
struct operand {
  const void* addr;
  std::size_t count;     // elements
  device_id device;      // device_id::host() for host and pinned memory
  bool device_memory;    // kind device: lives on `device`, not readable from the host
  bool host_pageable;    // kind host
};

/// count * elem_size, or size_overflow.
inline result<std::size_t> bytes_of(std::size_t count, std::size_t elem_size, const char* api) noexcept {
  std::size_t bytes = 0;
  if (__builtin_mul_overflow(count, elem_size, &bytes))
    return error(errc::size_overflow, api, "%zu elements of %zu bytes overflow std::size_t", count, elem_size);
  return bytes;
}

inline status check_stream(stream_ref s, const char* api) noexcept {
  if (!s.valid()) [[unlikely]]
    return error(errc::invalid_argument, api, "the stream was moved from");
  return {};
}

/// A synchronous operation runs on the legacy default stream; while a blocking stream captures a
/// graph that would invalidate the capture, so refuse it. The query does not disturb the capture.
inline status refuse_during_capture(const char* api) noexcept {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  const cudaError_t code = cudaStreamIsCapturing(cudaStreamLegacy, &capture);
  if (code == cudaErrorStreamCaptureImplicit || (code == cudaSuccess && capture != cudaStreamCaptureStatusNone)) {
    (void)cudaGetLastError();
    return error(errc::capture_active, api,
                 "a blocking stream is capturing a graph; a synchronous call on the legacy default stream "
                 "would invalidate it (use the stream-ordered form on the capturing stream)");
  }
  return check(code, api, "cudaStreamIsCapturing");
}

/// Makes the device that owns `a` or `b` current for a synchronous operation, so that it is ordered
/// on that device's legacy stream. Returns an inactive guard when nothing needs to change.
inline result<device_guard> home_device(const operand& a, const operand* b, const char* api) noexcept {
  device_id home = device_id::host();
  if (a.device_memory || !a.device.is_host()) home = a.device;
  else if (b != nullptr && (b->device_memory || !b->device.is_host())) home = b->device;
  auto guard = home.is_host() ? device_guard::keep_current() : device_guard::set(home);
  if (!guard) return guard.error().with_api(api);
  return guard;
}

/// Checks operands: null with a count, size overflow, extents, overlap. Returns the byte count.
inline result<std::size_t> check_copy(const operand& dst, const operand& src, std::size_t elem_size, const char* api) noexcept {
  if (dst.count != src.count)
    return error(errc::extents_mismatch, api, "extents differ (dst %zu, src %zu)", dst.count, src.count);
  auto bytes = bytes_of(dst.count, elem_size, api);
  if (!bytes) return bytes;
  if (*bytes == 0) return bytes;
  if (dst.addr == nullptr) return error(errc::invalid_argument, api, "dst is null with %zu elements", dst.count);
  if (src.addr == nullptr) return error(errc::invalid_argument, api, "src is null with %zu elements", src.count);
  const auto d = reinterpret_cast<std::uintptr_t>(dst.addr);
  const auto s = reinterpret_cast<std::uintptr_t>(src.addr);
  if (d < s + *bytes && s < d + *bytes && dst.device == src.device)
    return error(errc::overlap, api, "source and destination overlap (%zu bytes)", *bytes);
  return bytes;
}

/// One CUDA call for a checked copy of `bytes` > 0 bytes on `stream`.
inline status enqueue_copy(const operand& dst, const operand& src, std::size_t bytes, cudaMemcpyKind direction,
                           cudaStream_t stream, const char* api) noexcept {
  void* const to = const_cast<void*>(dst.addr);
  if (dst.device_memory && src.device_memory && dst.device != src.device)
    return check(cudaMemcpyPeerAsync(to, dst.device.get(), src.addr, src.device.get(), bytes, stream), api,
                 "cudaMemcpyPeerAsync");
  return check(cudaMemcpyAsync(to, src.addr, bytes, direction, stream), api, "cudaMemcpyAsync");
}

/// A 1D copy. Stream-ordered on `s`; does not synchronize.
inline status copy_async(const operand& dst, const operand& src, std::size_t elem_size, cudaMemcpyKind direction,
                         stream_ref s, const char* api) noexcept {
  if (auto ok = check_stream(s, api); !ok) return ok;
  auto bytes = check_copy(dst, src, elem_size, api);
  if (!bytes) return bytes.error();
  if (*bytes == 0) return {};
  return enqueue_copy(dst, src, *bytes, direction, s.get(), api);
}

/// A 1D copy that completes before it returns, ordered after earlier work on the legacy default
/// stream of the memory's device. Synchronizes.
inline status copy_sync(const operand& dst, const operand& src, std::size_t elem_size, cudaMemcpyKind direction,
                        const char* api) noexcept {
  auto bytes = check_copy(dst, src, elem_size, api);
  if (!bytes) return bytes.error();
  if (*bytes == 0) return {};
  if (dst.host_pageable && src.host_pageable) {
    // Nothing stream-ordered can touch pageable memory, so there is nothing to wait for.
    std::memcpy(const_cast<void*>(dst.addr), src.addr, *bytes);
    return {};
  }
  auto guard = home_device(dst, &src, api);
  if (!guard) return guard.error();
  if (auto ok = refuse_during_capture(api); !ok) return ok;
  if (auto ok = enqueue_copy(dst, src, *bytes, direction, cudaStreamLegacy, api); !ok) return ok;
  return check(cudaStreamSynchronize(cudaStreamLegacy), api, "cudaStreamSynchronize");
}

/// Checks a fill of `count` elements; returns its bytes.
inline result<std::size_t> check_fill(const operand& dst, std::size_t elem_size, const char* api) noexcept {
  auto bytes = bytes_of(dst.count, elem_size, api);
  if (!bytes || *bytes == 0) return bytes;
  if (dst.addr == nullptr) return error(errc::invalid_argument, api, "dst is null with %zu elements", dst.count);
  return bytes;
}

/// Sets every byte to `value` (memset), stream-ordered on `s`. Does not synchronize.
inline status fill_async(const operand& dst, std::size_t elem_size, unsigned char value, stream_ref s,
                         const char* api) noexcept {
  if (auto ok = check_stream(s, api); !ok) return ok;
  auto bytes = check_fill(dst, elem_size, api);
  if (!bytes) return bytes.error();
  if (*bytes == 0) return {};
  return check(cudaMemsetAsync(const_cast<void*>(dst.addr), value, *bytes, s.get()), api, "cudaMemsetAsync");
}

/// Sets every byte to `value` and waits for it. Synchronizes.
inline status fill_sync(const operand& dst, std::size_t elem_size, unsigned char value, const char* api) noexcept {
  auto bytes = check_fill(dst, elem_size, api);
  if (!bytes) return bytes.error();
  if (*bytes == 0) return {};
  if (dst.host_pageable) {
    std::memset(const_cast<void*>(dst.addr), value, *bytes);
    return {};
  }
  auto guard = home_device(dst, nullptr, api);
  if (!guard) return guard.error();
  if (auto ok = refuse_during_capture(api); !ok) return ok;
  if (auto ok = check(cudaMemsetAsync(const_cast<void*>(dst.addr), value, *bytes, cudaStreamLegacy), api, "cudaMemsetAsync"); !ok)
    return ok;
  return check(cudaStreamSynchronize(cudaStreamLegacy), api, "cudaStreamSynchronize");
}

}  // namespace cudamem::detail
