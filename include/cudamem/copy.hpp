// SPDX-License-Identifier: MIT
/// \file
/// Copies and fills: copy, CuPy's copy_from_device, copy_from_host, copy_to_host, fill_bytes and (nvcc) fill. Refused
/// at compile time: element types that differ, a const dst, pageable memory or a temporary owner when stream-ordered.
#pragma once

#include <cudamem/buffer.hpp>
#include <cudamem/detail/copy2d.hpp>  // nvcc: the 2D copy kernel, registered with the engine
#include <cudamem/detail/peer_registry.hpp>
#include <cudamem/detail/transfer.hpp>
#include <cudamem/span.hpp>

#include <algorithm>
#include <cstddef>
#include <type_traits>

namespace cudamem {

namespace detail {
template <class T, class K>
constexpr operand operand_of(span<T, K> view) noexcept {
  return {view.data().get(), view.size(), 1, 0, view.device(), kind_id_of<K>};
}
/// An owner passed as an rvalue: it goes away at the end of the full expression.
template <class V>
concept temporary_owner = !std::is_lvalue_reference_v<V> && requires { requires std::remove_cvref_t<V>::owns_memory; };
template <class V>
concept viewable_ref = viewable<std::remove_cvref_t<V>>;
template <class... Operands>
constexpr void check_stream_ordered() {
  static_assert((stream_orderable<typename std::remove_cvref_t<Operands>::kind> && ...),
                "cudamem: a stream-ordered copy or fill needs page-locked host memory, and an operand is pageable "
                "(kind host): allocate it as a pinned_buffer, or page-lock it with cudamem::host_register, or call "
                "the synchronous form without a stream");
  static_assert(!(temporary_owner<Operands> || ...),
                "cudamem: a stream-ordered operation on a temporary buffer or host registration, which frees its "
                "memory at the end of the statement while the operation is still queued; keep it in a variable "
                "until the stream is done with it");
}
template <class Dst, class Src>
constexpr void check_copy_types() {
  using T = typename Dst::element_type;
  static_assert(std::is_same_v<std::remove_cv_t<T>, std::remove_cv_t<typename Src::element_type>>,
                "cudamem::copy: the element types of dst and src differ; copy between views of the same type "
                "(to copy raw bytes, view both sides with cudamem::as_bytes / as_writable_bytes)");
  static_assert(!std::is_const_v<T>, "cudamem::copy: dst is a view of const elements");
  use_copy2d_kernel<Dst, Src>();  // nvcc: a device-to-device copy with rows registers the engine's 2D kernel
}
/// A checked copy between two operands, synchronous (`s` null) or ordered on `*s`.
[[gnu::always_inline]] inline status copy_operands(const operand& dst, const operand& src, std::size_t elem_size,
                                                   cudaMemcpyKind direction, const stream_ref* s,
                                                   const char* api) noexcept {
  plan p;
  CUDAMEM_TRY(plan_copy(p, dst, src, elem_size, direction, api));
  return s != nullptr ? run_async(p, *s, api) : run_sync(p, api);
}
template <class DstView, class SrcView>
status copy_views(DstView dst, SrcView src, const stream_ref* s, const char* api) noexcept {
  check_copy_types<DstView, SrcView>();
  return copy_operands(operand_of(dst), operand_of(src), sizeof(typename DstView::element_type),
                       copy_direction<typename DstView::kind, typename SrcView::kind>, s, api);
}
// Which copies a named form takes: `copy` any; CuPy's names restrict one side's kind.
enum class copy_rule { any, from_device, from_host, to_host };
inline constexpr const char* copy_rule_name[] = {"copy", "copy_from_device", "copy_from_host", "copy_to_host"};
template <copy_rule Rule, class Dst, class Src, class D = typename std::remove_cvref_t<Dst>::kind,
          class S = typename std::remove_cvref_t<Src>::kind>
concept copy_allowed =
    viewable_ref<Dst> && viewable_ref<Src> &&
    (Rule == copy_rule::any || (Rule == copy_rule::from_device && S::device_accessible && !std::is_same_v<S, pinned>) ||
     (Rule == copy_rule::from_host && S::host_accessible) || (Rule == copy_rule::to_host && D::host_accessible));
// Function objects, so that argument-dependent lookup never brings in std::copy or std::fill (std::byte spans would).
template <copy_rule Rule>
struct copy_fn {
  template <class Dst, class Src>
    requires copy_allowed<Rule, Dst, Src>
  [[nodiscard]] status operator()(Dst&& dst, Src&& src) const noexcept {
    return copy_views(dst.view(), src.view(), nullptr, copy_rule_name[static_cast<int>(Rule)]);
  }
  template <class Dst, class Src>
    requires copy_allowed<Rule, Dst, Src>
  [[nodiscard]] status operator()(Dst&& dst, Src&& src, stream_ref s) const noexcept {
    check_stream_ordered<Dst, Src>();
    return copy_views(dst.view(), src.view(), &s, copy_rule_name[static_cast<int>(Rule)]);
  }
};
struct fill_bytes_fn {
  template <viewable_ref Dst>
  [[nodiscard]] status operator()(Dst&& dst, unsigned char value) const noexcept {
    return run(dst.view(), value, nullptr);
  }
  template <viewable_ref Dst>
  [[nodiscard]] status operator()(Dst&& dst, unsigned char value, stream_ref s) const noexcept {
    check_stream_ordered<Dst>();
    return run(dst.view(), value, &s);
  }
  template <class View>
  static status run(View view, unsigned char value, const stream_ref* s) noexcept {
    using T = typename View::element_type;
    static_assert(!std::is_const_v<T>, "cudamem::fill_bytes: a view of const elements");
    plan p;
    CUDAMEM_TRY(plan_fill(p, operand_of(view), sizeof(T), value, "fill_bytes"));
    return s != nullptr ? run_async(p, *s, "fill_bytes") : run_sync(p, "fill_bytes");
  }
};
}  // namespace detail

/// copy(dst, src [, stream]): copies `src` into `dst` (one element type and extent). Without a stream: complete on
/// return, after earlier work on the legacy stream of each device it touches; with one: ordered on it, capturable.
/// Errors (copies.md): extents_mismatch, invalid_argument, overlap, size_overflow, out_of_range, capture_active, CUDA.
inline constexpr detail::copy_fn<detail::copy_rule::any> copy{};
inline constexpr detail::copy_fn<detail::copy_rule::from_device> copy_from_device{};  ///< copy; src device or managed.
inline constexpr detail::copy_fn<detail::copy_rule::from_host> copy_from_host{};  ///< copy; src host-accessible.
inline constexpr detail::copy_fn<detail::copy_rule::to_host> copy_to_host{};  ///< copy; dst host-accessible.
inline constexpr detail::fill_bytes_fn fill_bytes{};  ///< fill_bytes(dst, value [, stream]): memset, as copy is run.

#if defined(__CUDACC__)
namespace detail {
template <class T>  // `height` rows of `width` elements, `pitch` bytes apart (height 1: one row, no division)
__global__ void fill_kernel(char* first, std::size_t width, std::size_t height, std::size_t pitch, T value) {
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  for (std::size_t i = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < width * height; i += stride) {
    const std::size_t row = height == 1 ? 0 : i / width;
    reinterpret_cast<T*>(first + row * pitch)[i - row * width] = value;
  }
}
struct fill_fn {
  template <viewable_ref Dst, class V>
  [[nodiscard]] status operator()(Dst&& dst, const V& value, stream_ref s) const noexcept {
    const auto view = dst.view();
    using View = decltype(view);
    using T = typename View::value_type;
    static_assert(View::kind::device_accessible,
                  "cudamem::fill: a kernel cannot write pageable host memory; use fill_bytes, or a pinned_buffer");
    static_assert(!std::is_const_v<typename View::element_type>, "cudamem::fill: a view of const elements");
    static_assert(
        requires { T{std::declval<const V&>()}; },
        "cudamem::fill: the value converts to the element type only by narrowing; pass a value of the "
        "element type (3.0f for float, int(x) for int)");
    check_stream_ordered<Dst>();
    constexpr const char* api = "fill";
    if (!s.valid()) return handle_moved_from(api, "stream");
    plan p;
    CUDAMEM_TRY(plan_fill(p, operand_of(view), sizeof(T), 0, api));
    if (p.dst.empty()) return {};
    auto launch = s.device();
    if (!launch) return launch.error().with_api(api);
    const region& d = p.dst;
    if (d.kind == kind_id::device && d.device != *launch && !peer_access_held(*launch, d.device))
      return error(errc::invalid_argument, api,
                   "the memory is on device %d, and a kernel on device %d (the stream's) cannot reach it without a "
                   "peer_access guard",
                   d.device.get(), launch->get());
    auto guard = device_guard::set(*launch);  // a launch goes to the current device
    if (!guard) return guard.error().with_api(api);
    const bool flat = d.contiguous();
    const std::size_t width = (flat ? d.row_bytes * d.rows : d.row_bytes) / sizeof(T), height = flat ? 1 : d.rows;
    constexpr unsigned threads = 256;
    const auto blocks = static_cast<unsigned>(std::min<std::size_t>((width * height + threads - 1) / threads, 65536));
    fill_kernel<T><<<blocks, threads, 0, s.get()>>>(static_cast<char*>(d.addr), width, height, d.pitch, T{value});
    return check(cudaGetLastError(), api, "fill_kernel<<<>>>");
  }
};
}  // namespace detail

/// fill(dst, value, stream), nvcc only: a kernel on the stream's device sets each element of `dst` to `value` (no
/// narrowing); capturable. Errors: invalid_argument (another device's memory, no peer_access), CUDA errors.
inline constexpr detail::fill_fn fill{};
#endif

}  // namespace cudamem
