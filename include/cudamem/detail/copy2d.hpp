// SPDX-License-Identifier: MIT
// cudamem: the 2D device-to-device copy kernel that nvcc builds give the engine (docs/decisions.md). Internal.
// Nothing here is compiled until a translation unit instantiates a 2D copy between device memory: then
// copy2d_registered<> (named by use_copy2d_kernel) instantiates the kernels and registers them at start-up. A
// translation unit that includes copy.hpp but makes no such copy builds no kernel and runs no initializer.
#pragma once

#include <cudamem/detail/transfer.hpp>
#include <cudamem/span.hpp>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#if defined(__CUDACC__)
namespace cudamem::detail {

/// Launches `kernel` and returns this launch's own status. `<<<>>>` returns none, and cudaGetLastError() after it would
/// also take (and clear) an earlier launch error of the caller's, left pending for the caller's own check_launch.
template <class... Params, class... Args>
cudaError_t launch_kernel(void (*kernel)(Params...), dim3 grid, unsigned threads, cudaStream_t stream,
                          Args&&... args) noexcept {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = dim3(threads);
  config.stream = stream;
  return cudaLaunchKernelEx(&config, kernel, static_cast<Args&&>(args)...);
}

inline constexpr unsigned copy2d_threads = 256, copy2d_unroll = 4;
struct copy2d_args {
  char* dst;
  const char* src;
  std::size_t dpitch, spitch;
  unsigned vecs, rows, tail;  // per row: `vecs` elements of V, then `tail` bytes (< sizeof(V))
};
// The last `tail` bytes of every row, one byte per thread over the whole grid.
template <class V>
__device__ void copy2d_tails(const copy2d_args& a) {
  const std::size_t first = std::size_t{blockIdx.y * gridDim.x + blockIdx.x} * blockDim.x + threadIdx.x;
  const std::size_t step = std::size_t{gridDim.x} * gridDim.y * blockDim.x, total = std::size_t{a.rows} * a.tail;
  for (std::size_t k = first; k < total; k += step) {
    const std::size_t r = k / a.tail, at = a.vecs * sizeof(V) + (k - r * a.tail);
    a.dst[r * a.dpitch + at] = a.src[r * a.spitch + at];
  }
}
// Wide rows: blockIdx.y walks the rows, blockIdx.x a stretch of each; a thread loads all its elements, then stores.
template <class V>
__global__ void __launch_bounds__(copy2d_threads) copy2d_wide(copy2d_args a) {
  const unsigned step = gridDim.x * copy2d_threads * copy2d_unroll;
  for (unsigned r = blockIdx.y; r < a.rows; r += gridDim.y) {
    const V* in = reinterpret_cast<const V*>(a.src + r * a.spitch);
    V* out = reinterpret_cast<V*>(a.dst + r * a.dpitch);
    for (unsigned i = blockIdx.x * copy2d_threads * copy2d_unroll + threadIdx.x; i < a.vecs; i += step) {
      V v[copy2d_unroll];
#pragma unroll
      for (unsigned u = 0; u < copy2d_unroll; ++u)
        if (i + u * copy2d_threads < a.vecs) v[u] = in[i + u * copy2d_threads];
#pragma unroll
      for (unsigned u = 0; u < copy2d_unroll; ++u)
        if (i + u * copy2d_threads < a.vecs) out[i + u * copy2d_threads] = v[u];
    }
  }
  if (a.tail != 0) copy2d_tails<V>(a);
}
// Narrow rows: all rows' elements as one sequence (under 2^31), so that every lane has work however short a row.
template <class V>
__global__ void __launch_bounds__(copy2d_threads) copy2d_narrow(copy2d_args a) {
  const unsigned step = gridDim.x * copy2d_threads * copy2d_unroll, total = a.vecs * a.rows;
  for (unsigned i = blockIdx.x * copy2d_threads * copy2d_unroll + threadIdx.x; i < total; i += step) {
    V v[copy2d_unroll];
#pragma unroll
    for (unsigned u = 0; u < copy2d_unroll; ++u) {
      const unsigned k = i + u * copy2d_threads, r = k / a.vecs;
      if (k < total) v[u] = reinterpret_cast<const V*>(a.src + r * a.spitch)[k - r * a.vecs];
    }
#pragma unroll
    for (unsigned u = 0; u < copy2d_unroll; ++u) {
      const unsigned k = i + u * copy2d_threads, r = k / a.vecs;
      if (k < total) reinterpret_cast<V*>(a.dst + r * a.dpitch)[k - r * a.vecs] = v[u];
    }
  }
  if (a.tail != 0) copy2d_tails<V>(a);
}
template <class V>
cudaError_t launch_copy2d(const region& d, const region& s, unsigned sms, cudaStream_t stream) {
  const std::size_t vecs = d.row_bytes / sizeof(V);
  const copy2d_args a{static_cast<char*>(d.addr),
                      static_cast<const char*>(s.addr),
                      d.pitch,
                      s.pitch,
                      static_cast<unsigned>(vecs),
                      static_cast<unsigned>(d.rows),
                      static_cast<unsigned>(d.row_bytes - vecs * sizeof(V))};
  const unsigned per_block = copy2d_threads * copy2d_unroll, target = sms * 8;  // 8 resident blocks per SM
  if (vecs >= per_block / 2 || vecs * d.rows >= (std::size_t{1} << 31)) {
    const unsigned x = static_cast<unsigned>((vecs + per_block - 1) / per_block);
    const std::size_t y = d.rows < target / x + 1 ? d.rows : target / x + 1;
    return launch_kernel(&copy2d_wide<V>, dim3(x, static_cast<unsigned>(y < 65535 ? y : 65535)), copy2d_threads, stream,
                         a);
  }
  const std::size_t blocks = (vecs * d.rows + per_block - 1) / per_block;
  return launch_kernel(&copy2d_narrow<V>, dim3(static_cast<unsigned>(blocks < target ? blocks : target)),
                       copy2d_threads, stream, a);
}
/// Where an operand's footprint lies against the allocation that holds its first byte, as the driver knows it.
struct allocation_fit {
  enum { inside, past_end, unknown } where;
  std::uintptr_t base, size;
};
inline allocation_fit fit_in_allocation(const region& r) noexcept {
  const auto lookup = driver().mem_get_address_range;
  unsigned long long base = 0;
  std::size_t size = 0;
  const auto first = reinterpret_cast<std::uintptr_t>(r.addr);
  if (lookup == nullptr || lookup(&base, &size, static_cast<unsigned long long>(first)) != cudaSuccess ||
      first < base || first - base >= size)
    return {allocation_fit::unknown, 0, 0};
  return {r.footprint <= size - (first - base) ? allocation_fit::inside : allocation_fit::past_end, base, size};
}
// `r` runs past the end of its allocation, where the kernel would reach the memory beyond. cudaMemcpy2DAsync judges
// (memory mapped side by side can be one copy to it); where it refuses, as it does past a cudaMalloc allocation, the
// refusal names the operand, its footprint and the allocation.
[[gnu::cold, gnu::noinline]] inline result<bool> copy2d_past_end(const plan& p, const region& r,
                                                                 const allocation_fit& fit, stream_ref on,
                                                                 const char* api) noexcept {
  const region &d = p.dst, &s = p.src;
  const cudaError_t raw =
      cudaMemcpy2DAsync(d.addr, d.pitch, s.addr, s.pitch, d.row_bytes, d.rows, p.direction, on.get());
  if (raw == cudaSuccess) return true;
  if (raw != cudaErrorInvalidValue) return check(raw, api, "cudaMemcpy2DAsync").error();
  (void)cudaGetLastError();  // the refusal is reported here, not left in the runtime's last-error slot
  const auto first = reinterpret_cast<std::uintptr_t>(r.addr);
  return error(errc::out_of_range, api,
               "%s (%zu rows of %zu bytes, %zu apart) spans [%#zx, %#zx), past the end of its allocation [%#zx, %#zx)",
               &r == &d ? "dst" : "src", r.rows, r.row_bytes, r.pitch, static_cast<std::size_t>(first),
               static_cast<std::size_t>(first + r.footprint), static_cast<std::size_t>(fit.base),
               static_cast<std::size_t>(fit.base + fit.size));
}
/// Launches a same-device 2D copy on `on` with the widest access (16, 8, 4 bytes) that divides addresses and pitches.
/// False, launching nothing, where cudaMemcpy2DAsync does as well (docs/decisions.md) or for 2^32 rows or more, and
/// where the driver does not know an operand's allocation. A footprint past the end of its allocation is refused as
/// cudaMemcpy2DAsync refuses it: the kernel never reaches memory that the copy's operands do not own.
/// A template (of nothing) so that its kernels are instantiated only with copy2d_registered<>.
template <class = void>
result<bool> copy2d_launch(const plan& p, stream_ref on, const char* api) noexcept {
  const region &d = p.dst, &s = p.src;
  const std::uintptr_t bits =
      reinterpret_cast<std::uintptr_t>(d.addr) | reinterpret_cast<std::uintptr_t>(s.addr) | d.pitch | s.pitch | 16;
  const std::size_t align = bits & (~bits + 1);  // the lowest set bit
  if (align < 4 || d.row_bytes < 16 || d.rows >= (std::size_t{1} << 32)) return false;
  auto device = on.device();
  if (!device || *device != d.device) return false;
  auto sms = cached_attribute<cudaDevAttrMultiProcessorCount>(*device, api);
  if (!sms) return sms.error();
  auto guard = device_guard::set(*device);  // a launch goes to the current device
  if (!guard) return guard.error().with_api(api);
  for (const region* r : {&d, &s}) {
    const allocation_fit fit = fit_in_allocation(*r);
    if (fit.where == allocation_fit::unknown) return false;
    if (fit.where == allocation_fit::past_end) return copy2d_past_end(p, *r, fit, on, api);
  }
  const auto count = static_cast<unsigned>(*sms);
  const cudaError_t launched = align == 16  ? launch_copy2d<uint4>(d, s, count, on.get())
                               : align == 8 ? launch_copy2d<uint2>(d, s, count, on.get())
                                            : launch_copy2d<unsigned>(d, s, count, on.get());
  CUDAMEM_TRY(check(launched, api, "cudaLaunchKernelEx (copy2d)"));
  return true;
}
template <class = void>
inline const bool copy2d_registered = (copy2d_kernel = &copy2d_launch<>, true);

}  // namespace cudamem::detail
#endif

namespace cudamem::detail {
template <class V>
inline constexpr bool is_span = false;
template <class T, class K>
inline constexpr bool is_span<span<T, K>> = true;
/// Called by every 2D copy with its operands' view or pointer types: nvcc builds register the kernel where both sides
/// are device memory and the copy can have rows (1D spans are always one flat run: cudaMemcpyAsync).
template <class Dst, class Src>
constexpr void use_copy2d_kernel() noexcept {
#if defined(__CUDACC__)
  if constexpr (std::is_same_v<typename Dst::kind, device> && std::is_same_v<typename Src::kind, device> &&
                !(is_span<Dst> && is_span<Src>))
    (void)copy2d_registered<std::conditional_t<true, void, Dst>>;  // dependent: only a copy that gets here names it
#endif
}
}  // namespace cudamem::detail
