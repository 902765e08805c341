// cudamem: the untyped transfer engine behind every copy and fill, 1D and 2D. An operand is an
// address, a width in elements, a height in rows, a pitch in bytes, a device and a kind; a 1D view
// is one row. The checks, the home device, the capture rules and the one CUDA call are written
// here once. Internal: the typed layer (copy.hpp) decides direction and legality at compile time.
#pragma once

#include <cudamem/detail/arith.hpp>
#include <cudamem/detail/capture.hpp>
#include <cudamem/kind.hpp>
#include <cudamem/stream.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace cudamem::detail {

/// One side of a transfer, untyped.
struct operand {
  const void* addr = nullptr;
  std::size_t width = 0;   // elements per row
  std::size_t height = 1;  // rows; 1 for a 1D view
  std::size_t pitch = 0;   // bytes from one row to the next; ignored when height is 1
  device_id device = device_id::host();  // device_id::host() for host and pinned memory
  kind_id kind = kind_id::host;
};

/// A checked operand in bytes: rows of row_bytes, pitch bytes apart, footprint bytes from the first
/// byte to one past the last.
struct region {
  void* addr = nullptr;
  std::size_t row_bytes = 0;
  std::size_t rows = 0;
  std::size_t pitch = 0;
  std::size_t footprint = 0;
  device_id device = device_id::host();
  kind_id kind = kind_id::host;

  [[nodiscard]] bool empty() const noexcept { return footprint == 0; }
  [[nodiscard]] bool contiguous() const noexcept { return rows == 1 || pitch == row_bytes; }
  [[nodiscard]] bool on_device() const noexcept { return kind == kind_id::device || kind == kind_id::managed; }
};

/// Checks one operand: its byte sizes fit std::size_t and the address space, it is not null with
/// elements, and its rows fit its pitch. `role` ("dst", "src") names it in the message.
inline result<region> check_operand(const operand& o, std::size_t elem_size, const char* role, const char* api) noexcept {
  auto row_bytes = bytes_of(o.width, elem_size, api);
  if (!row_bytes) return row_bytes.error();
  region r{const_cast<void*>(o.addr), *row_bytes, o.height, o.height > 1 ? o.pitch : *row_bytes, 0, o.device, o.kind};
  if (r.row_bytes == 0 || r.rows == 0) return region{r.addr, 0, 0, 0, 0, o.device, o.kind};
  if (r.addr == nullptr && r.rows == 1)
    return error(errc::invalid_argument, api, "%s is null with %zu elements", role, o.width);
  if (r.addr == nullptr)
    return error(errc::invalid_argument, api, "%s is null with %zu x %zu elements", role, o.width, o.height);
  if (r.rows > 1 && r.pitch < r.row_bytes)
    return error(errc::invalid_argument, api, "%s pitch (%zu bytes) is less than its row (%zu bytes)", role, r.pitch,
                 r.row_bytes);
  std::size_t end = 0;
  if (__builtin_mul_overflow(r.pitch, r.rows - 1, &r.footprint) ||
      __builtin_add_overflow(r.footprint, r.row_bytes, &r.footprint) ||
      __builtin_add_overflow(reinterpret_cast<std::uintptr_t>(r.addr), r.footprint, &end))
    return error(errc::size_overflow, api, "%s reaches past the end of the address space", role);
  return r;
}

/// A 2D transfer may not use a pitch beyond cudaDevAttrMaxPitch (the driver does not check it).
inline status check_pitch_limit(const region& r, device_id device, const char* role, const char* api) noexcept {
  if (r.contiguous()) return {};
  auto limit = max_pitch(device);
  if (!limit) return limit.error().with_api(api);
  if (r.pitch > *limit)
    return error(errc::invalid_argument, api, "%s pitch (%zu bytes) exceeds the device's maximum (%zu bytes)", role,
                 r.pitch, *limit);
  return {};
}

/// The device whose limits and legacy stream a transfer uses: the first operand that lives on a
/// device, else the current device.
inline result<device_id> device_of(const region& a, const region* b, const char* api) noexcept {
  if (a.on_device() && !a.device.is_host()) return a.device;
  if (b != nullptr && b->on_device() && !b->device.is_host()) return b->device;
  auto current = current_device();
  if (!current) return current.error().with_api(api);
  return *current;
}

/// A checked copy: both regions, and whether it crosses devices (the peer path).
struct copy_plan {
  region dst, src;
  cudaMemcpyKind direction = cudaMemcpyDefault;
  [[nodiscard]] bool peer() const noexcept {
    return dst.kind == kind_id::device && src.kind == kind_id::device && dst.device != src.device;
  }
};

/// Checks a copy of `src` into `dst`: extents (a 1D operand matches a 2D one of as many elements,
/// read as contiguous rows), sizes, null, pitches, the pitch limit, and overlap over the whole
/// footprint of both (a conservative test for interleaved 2D regions).
inline result<copy_plan> plan_copy(operand dst, operand src, std::size_t elem_size, cudaMemcpyKind direction,
                                   const char* api) noexcept {
  const auto reshape = [elem_size](operand& flat, const operand& shaped) {
    if (flat.height == 1 && shaped.height > 1 && flat.width / shaped.height == shaped.width &&
        flat.width % shaped.height == 0 && steppable(shaped.width, elem_size)) {
      flat = {flat.addr, shaped.width, shaped.height, shaped.width * elem_size, flat.device, flat.kind};
    }
  };
  reshape(dst, src);
  reshape(src, dst);
  if (dst.width != src.width || dst.height != src.height) {
    if (dst.height == 1 && src.height == 1)
      return error(errc::extents_mismatch, api, "extents differ (dst %zu, src %zu)", dst.width, src.width);
    return error(errc::extents_mismatch, api, "extents differ (dst %zu x %zu, src %zu x %zu)", dst.width, dst.height,
                 src.width, src.height);
  }
  auto d = check_operand(dst, elem_size, "dst", api);
  if (!d) return d.error();
  auto s = check_operand(src, elem_size, "src", api);
  if (!s) return s.error();
  copy_plan plan{*d, *s, direction};
  if (plan.dst.empty()) return plan;
  const auto to = reinterpret_cast<std::uintptr_t>(plan.dst.addr);
  const auto from = reinterpret_cast<std::uintptr_t>(plan.src.addr);
  // Unified addressing: host and every device share one address space, so addresses alone decide.
  if (to < from + plan.src.footprint && from < to + plan.dst.footprint)
    return error(errc::overlap, api, "source and destination overlap");
  const bool pageable = plan.dst.kind == kind_id::host && plan.src.kind == kind_id::host;  // copied by the host
  if (!pageable && (!plan.dst.contiguous() || !plan.src.contiguous())) {
    auto limit_device = device_of(plan.dst, &plan.src, api);
    if (!limit_device) return limit_device.error();
    if (auto ok = check_pitch_limit(plan.dst, *limit_device, "dst", api); !ok) return ok.error();
    if (auto ok = check_pitch_limit(plan.src, *limit_device, "src", api); !ok) return ok.error();
  }
  return plan;
}

/// A checked fill: every byte of `dst` set to `value`.
struct fill_plan {
  region dst;
  unsigned char value = 0;
};

inline result<fill_plan> plan_fill(const operand& dst, std::size_t elem_size, unsigned char value,
                                   const char* api) noexcept {
  auto d = check_operand(dst, elem_size, "dst", api);
  if (!d) return d.error();
  if (!d->empty() && !d->contiguous() && d->kind != kind_id::host) {
    auto limit_device = device_of(*d, nullptr, api);
    if (!limit_device) return limit_device.error();
    if (auto ok = check_pitch_limit(*d, *limit_device, "dst", api); !ok) return ok.error();
  }
  return fill_plan{*d, value};
}

/// The one CUDA call of a checked, non-empty copy, ordered on `stream`. Does not synchronize.
inline status enqueue(const copy_plan& p, cudaStream_t stream, const char* api) noexcept {
  const region& d = p.dst;
  const region& s = p.src;
  if (d.contiguous() && s.contiguous()) {
    const std::size_t bytes = d.row_bytes * d.rows;
    if (p.peer())
      return check(cudaMemcpyPeerAsync(d.addr, d.device.get(), s.addr, s.device.get(), bytes, stream), api,
                   "cudaMemcpyPeerAsync");
    return check(cudaMemcpyAsync(d.addr, s.addr, bytes, p.direction, stream), api, "cudaMemcpyAsync");
  }
  if (p.peer()) {
    cudaMemcpy3DPeerParms parms{};
    parms.dstPtr = {d.addr, d.pitch, d.row_bytes, d.rows};
    parms.dstDevice = d.device.get();
    parms.srcPtr = {const_cast<void*>(s.addr), s.pitch, s.row_bytes, s.rows};
    parms.srcDevice = s.device.get();
    parms.extent = {d.row_bytes, d.rows, 1};
    return check(cudaMemcpy3DPeerAsync(&parms, stream), api, "cudaMemcpy3DPeerAsync");
  }
  return check(cudaMemcpy2DAsync(d.addr, d.pitch, s.addr, s.pitch, d.row_bytes, d.rows, p.direction, stream), api,
               "cudaMemcpy2DAsync");
}

/// The one CUDA call of a checked, non-empty fill, ordered on `stream`. Does not synchronize.
inline status enqueue(const fill_plan& p, cudaStream_t stream, const char* api) noexcept {
  const region& d = p.dst;
  if (d.contiguous())
    return check(cudaMemsetAsync(d.addr, p.value, d.row_bytes * d.rows, stream), api, "cudaMemsetAsync");
  return check(cudaMemset2DAsync(d.addr, d.pitch, p.value, d.row_bytes, d.rows, stream), api, "cudaMemset2DAsync");
}

/// Pageable memory on both sides: nothing stream-ordered can touch it, so the host does the work.
inline void host_transfer(const copy_plan& p) noexcept {
  for (std::size_t row = 0; row < p.dst.rows; ++row)
    std::memcpy(static_cast<char*>(p.dst.addr) + row * p.dst.pitch, static_cast<const char*>(p.src.addr) + row * p.src.pitch,
                p.dst.row_bytes);
}
inline void host_transfer(const fill_plan& p) noexcept {
  for (std::size_t row = 0; row < p.dst.rows; ++row)
    std::memset(static_cast<char*>(p.dst.addr) + row * p.dst.pitch, p.value, p.dst.row_bytes);
}

/// A synchronous operation runs on the legacy default stream. While a blocking stream of the
/// current device captures a graph, that stream would join the capture and invalidate it: refuse
/// before anything is written. The query itself never disturbs a capture.
inline status refuse_during_capture(const char* api) noexcept {
  auto capturing = joins_capture(cudaStreamLegacy, api);
  if (!capturing) return capturing.error();
  if (*capturing)
    return error(errc::capture_active, api,
                 "a blocking stream is capturing a graph, and the legacy default stream would join it; use the "
                 "stream-ordered form on the capturing stream");
  return {};
}

/// Runs a checked, non-empty plan to completion on the legacy default stream of `home`, ordered
/// after earlier work there. When the plan also touches `other` (another device), earlier work on
/// that device's legacy stream is waited for first. Captures elsewhere are left undisturbed (the
/// thread runs in relaxed capture mode meanwhile); a capture that the legacy stream would join is
/// refused before anything is written. Synchronizes.
template <class Plan>
status run_sync(const Plan& plan, device_id home, device_id other, const char* api) noexcept {
  auto guard = device_guard::set(home);
  if (!guard) return guard.error().with_api(api);
  relaxed_capture_scope relaxed;
  if (auto ok = refuse_during_capture(api); !ok) return ok;
  if (!other.is_host() && other != home) {
    auto other_guard = device_guard::set(other);
    if (!other_guard) return other_guard.error().with_api(api);
    if (auto ok = refuse_during_capture(api); !ok) return ok;
    if (auto ok = check(cudaStreamSynchronize(cudaStreamLegacy), api, "cudaStreamSynchronize"); !ok) return ok;
  }
  if (auto ok = enqueue(plan, cudaStreamLegacy, api); !ok) return ok;
  return check(cudaStreamSynchronize(cudaStreamLegacy), api, "cudaStreamSynchronize");
}

/// A copy that completes before it returns. Synchronizes.
inline status copy_sync(const operand& dst, const operand& src, std::size_t elem_size, cudaMemcpyKind direction,
                        const char* api) noexcept {
  auto plan = plan_copy(dst, src, elem_size, direction, api);
  if (!plan) return plan.error();
  if (plan->dst.empty()) return {};
  if (dst.kind == kind_id::host && src.kind == kind_id::host) {
    host_transfer(*plan);
    return {};
  }
  auto home = device_of(plan->dst, &plan->src, api);
  if (!home) return home.error();
  const device_id other = plan->src.on_device() ? plan->src.device : device_id::host();
  return run_sync(*plan, *home, other, api);
}

/// A copy ordered on `s`. Does not synchronize.
inline status copy_async(const operand& dst, const operand& src, std::size_t elem_size, cudaMemcpyKind direction,
                         stream_ref s, const char* api) noexcept {
  if (!s.valid()) [[unlikely]]
    return error(errc::invalid_argument, api, "the stream was moved from");
  auto plan = plan_copy(dst, src, elem_size, direction, api);
  if (!plan) return plan.error();
  if (plan->dst.empty()) return {};
  return enqueue(*plan, s.get(), api);
}

/// Sets every byte of `dst` to `value` and waits for it. Synchronizes.
inline status fill_sync(const operand& dst, std::size_t elem_size, unsigned char value, const char* api) noexcept {
  auto plan = plan_fill(dst, elem_size, value, api);
  if (!plan) return plan.error();
  if (plan->dst.empty()) return {};
  if (dst.kind == kind_id::host) {
    host_transfer(*plan);
    return {};
  }
  auto home = device_of(plan->dst, nullptr, api);
  if (!home) return home.error();
  return run_sync(*plan, *home, device_id::host(), api);
}

/// Sets every byte of `dst` to `value`, ordered on `s`. Does not synchronize.
inline status fill_async(const operand& dst, std::size_t elem_size, unsigned char value, stream_ref s,
                         const char* api) noexcept {
  if (!s.valid()) [[unlikely]]
    return error(errc::invalid_argument, api, "the stream was moved from");
  auto plan = plan_fill(dst, elem_size, value, api);
  if (!plan) return plan.error();
  if (plan->dst.empty()) return {};
  return enqueue(*plan, s.get(), api);
}

/// A kernel the library launches on `launch` may touch `r` only where that device can reach it:
/// device memory of another device would fault (cudaErrorIllegalAddress, which loses the context),
/// so it is refused before anything is launched. Pinned and managed memory are reachable from every
/// device.
inline status check_kernel_access(device_id launch, const region& r, const char* api) noexcept {
  if (r.kind == kind_id::device && r.device != launch)
    return error(errc::invalid_argument, api,
                 "the memory is on device %d, and a kernel on device %d (the stream's) cannot reach it", r.device.get(),
                 launch.get());
  return {};
}

}  // namespace cudamem::detail
