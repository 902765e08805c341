/// \file
/// copy and fill_bytes for 1D views, synchronous and stream-ordered; a typed fill in nvcc builds.
#pragma once

#include <cudamem/buffer.hpp>
#include <cudamem/span.hpp>

#include <cstddef>
#include <type_traits>

namespace cudamem {

namespace detail {
// copy and fill_bytes are function objects, not function templates, so that argument-dependent
// lookup never brings std::copy or std::fill into an unqualified call (a std::byte span would).
struct copy_fn {
  template <viewable Dst, viewable Src>
  [[nodiscard]] status operator()(const Dst& dst, const Src& src) const noexcept {
    return copy_spans(dst.view(), src.view(), "copy");
  }
  template <viewable Dst, viewable Src>
  [[nodiscard]] status operator()(const Dst& dst, const Src& src, stream_ref s) const noexcept {
    return copy_spans(dst.view(), src.view(), s, "copy");
  }
};
struct fill_bytes_fn {
  template <viewable Dst>
  [[nodiscard]] status operator()(const Dst& dst, unsigned char value) const noexcept {
    return dst.view().memset(value);
  }
  template <viewable Dst>
  [[nodiscard]] status operator()(const Dst& dst, unsigned char value, stream_ref s) const noexcept {
    return dst.view().memset(value, s);
  }
};
}  // namespace detail

/// copy(dst, src): copies `src` into `dst` (viewables of the same element type and size) and waits
/// for it. Synchronizes: complete on return, and ordered after earlier work on the legacy default
/// stream of the memory's device, also in builds with per-thread default streams. Device memory on
/// two devices goes through the peer path (correct with or without peer access). Two pageable host
/// views are copied with memcpy, without CUDA. Compile-time: the element types match and `dst` is
/// not const. Errors: extents_mismatch, invalid_argument (null with a count), overlap,
/// size_overflow, out_of_range (a view on a device that does not exist), capture_active (a blocking
/// stream is capturing), CUDA errors. Nothing is written when an error is returned before the CUDA
/// call. Empty views copy nothing and succeed.
///
/// copy(dst, src, stream): stream-ordered on `stream`; does not synchronize. Compile-time: as the
/// synchronous form, and neither side is pageable host memory (use pinned_buffer or host_register).
/// Errors: extents_mismatch, invalid_argument (null with a count, moved-from stream), overlap,
/// size_overflow, CUDA errors (including a view on a device that does not exist).
inline constexpr detail::copy_fn copy{};

/// fill_bytes(dst, value): sets every byte of `dst` to `value` (memset) and waits for it.
/// Synchronizes, as copy(dst, src); pageable host memory is set with memset, without CUDA.
/// Compile-time: `dst` is not const. Errors: invalid_argument (null with a count), size_overflow,
/// out_of_range (a view on a device that does not exist), capture_active, CUDA errors.
///
/// fill_bytes(dst, value, stream): stream-ordered on `stream`; does not synchronize. Compile-time:
/// as the synchronous form, and `dst` is not pageable host memory. Errors: invalid_argument (null
/// with a count, moved-from stream), size_overflow, CUDA errors.
inline constexpr detail::fill_bytes_fn fill_bytes{};

#if defined(__CUDACC__)
namespace detail {
template <class T>
__global__ void fill_kernel(T* first, std::size_t count, T value) {
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  for (std::size_t i = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < count; i += stride) first[i] = value;
}

struct fill_fn {
  template <viewable Dst>
  [[nodiscard]] status operator()(const Dst& dst, const typename Dst::value_type& value, stream_ref s) const noexcept {
    using T = typename Dst::value_type;
    using Kind = typename Dst::kind;
    static_assert(Kind::device_accessible,
                  "cudamem::fill: a kernel cannot write pageable host memory; use fill_bytes, or a pinned_buffer");
    const auto view = dst.view();
    static_assert(!std::is_const_v<typename decltype(view)::element_type>, "cudamem::fill: a view of const elements");
    if (auto ok = check_stream(s, "fill"); !ok) return ok;
    auto bytes = check_fill(operand_of(view), sizeof(T), "fill");
    if (!bytes) return bytes.error();
    if (*bytes == 0) return {};
    // A launch goes to the current device, which must be the stream's.
    int stream_device = 0;
    if (auto ok = check(cudaStreamGetDevice(s.get(), &stream_device), "fill", "cudaStreamGetDevice"); !ok) return ok;
    auto guard = device_guard::set(device_id(stream_device));
    if (!guard) return guard.error().with_api("fill");
    constexpr unsigned threads = 256;
    const std::size_t wanted = (view.size() + threads - 1) / threads;
    const unsigned blocks = static_cast<unsigned>(wanted < 65536 ? wanted : 65536);
    fill_kernel<T><<<blocks, threads, 0, s.get()>>>(view.data().get(), view.size(), value);
    return check(cudaGetLastError(), "fill", "fill_kernel<<<>>>");
  }
};
}  // namespace detail

/// Sets every element of `dst` to `value` with a kernel on `s` (nvcc builds only). Does not
/// synchronize. The kernel runs on the device `s` belongs to (made current for the launch, then
/// restored).
/// For byte patterns fill_bytes (memset) is faster. Compile-time: kernels may write `dst` (not
/// pageable host memory). Errors: invalid_argument (null with a count, moved-from stream),
/// size_overflow, CUDA launch errors. A function object, like copy, so that argument-dependent
/// lookup never picks std::fill instead.
inline constexpr detail::fill_fn fill{};
#endif

}  // namespace cudamem
