// SPDX-License-Identifier: MIT
/// \file
/// Copies and fills: copy, CuPy's copy_from_device, copy_from_host, copy_to_host, fill_bytes and (nvcc) fill. Refused
/// at compile time: element types that differ, a const dst, pageable memory or a temporary owner when stream-ordered.
///
///     status copy(dst, src [, stream])     views or owners of one element type and extent, 1D or 2D, any kinds
///     copy_from_device, copy_from_host, copy_to_host   as copy, with one side's kind checked (CuPy's names)
///     status fill_bytes(dst, value [, stream])         memset of every element's bytes
///     status fill(dst, value, stream)      nvcc only: a kernel sets every element to value
///     status copy_2d(dst, dpitch, src, spitch, width_bytes, height [, stream])   on typed pointers, cudaMemcpy2D's
///     Without a stream: complete on return; with one: ordered on it, not synchronizing, capturable.
#pragma once

#include <cudamem/buffer.hpp>  // not used here (copies take owners as viewables); code that includes copy.hpp has it
#include <cudamem/detail/copy2d.hpp>  // nvcc: the 2D copy kernel, registered with the engine
#include <cudamem/detail/peer_registry.hpp>
#include <cudamem/detail/transfer.hpp>
#include <cudamem/pitched_span.hpp>
#include <cudamem/span.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace cudamem {

namespace detail {
template <class T, class K>
constexpr operand operand_of(span<T, K> view) noexcept {
  return {view.data().get(), view.size(), 1, 0, view.device(), kind_id_of<K>};
}
template <class T, class K>
constexpr operand operand_of(pitched_span<T, K> view) noexcept {
  return {view.data().get(), view.width(), view.height(), view.pitch_bytes(), view.device(), kind_id_of<K>};
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
    constexpr const char* api = copy_rule_name[static_cast<int>(Rule)];
    CUDAMEM_TRY(owner_use(dst, s, api, false));  // owners used on a stream not their own: the use is recorded
    CUDAMEM_TRY(owner_use(src, s, api, false));
    CUDAMEM_TRY(copy_views(dst.view(), src.view(), &s, api));
    CUDAMEM_TRY(owner_use(dst, s, api, true));
    return owner_use(src, s, api, true);
  }
  // Views whose kinds the named form does not take: a message that names the form to use instead.
  template <class Dst, class Src, class... Stream>
    requires(viewable_ref<Dst> && viewable_ref<Src> && !copy_allowed<Rule, Dst, Src> && sizeof...(Stream) <= 1)
  status operator()(Dst&&, Src&&, Stream&&...) const noexcept {
    static_assert(Rule != copy_rule::to_host || sizeof(Dst) == 0,
                  "cudamem::copy_to_host: dst must be host-accessible memory (host, pinned or managed); to copy "
                  "into device memory call cudamem::copy (or copy_from_device)");
    static_assert(Rule != copy_rule::from_host || sizeof(Dst) == 0,
                  "cudamem::copy_from_host: src must be host-accessible memory (host, pinned or managed); to copy "
                  "from device memory call cudamem::copy (or copy_from_device)");
    static_assert(Rule != copy_rule::from_device || sizeof(Dst) == 0,
                  "cudamem::copy_from_device: src must be device or managed memory; to copy from host or pinned "
                  "memory call cudamem::copy (or copy_from_host)");
    return {};
  }
};
// Named so that the diagnostic says what is wrong: an integer constant outside 0-255 given to fill_bytes.
inline void fill_bytes_value_must_be_0_to_255_or_cast_to_unsigned_char() noexcept {}
/// The byte fill_bytes writes: an unsigned char or std::byte, or an integer constant from 0 to 255 (checked at compile
/// time). An integer known only at run time does not convert: static_cast<unsigned char>(v) says the truncation is
/// meant (docs/copies.md).
struct fill_byte {
  template <std::integral I>
    requires(!std::is_same_v<I, bool>)
  consteval fill_byte(I constant) noexcept : value(static_cast<unsigned char>(constant)) {
    if constexpr (std::is_signed_v<I>)
      if (constant < 0) fill_bytes_value_must_be_0_to_255_or_cast_to_unsigned_char();
    if constexpr (sizeof(I) > 1)
      if (static_cast<std::make_unsigned_t<I>>(constant) > 255u)
        fill_bytes_value_must_be_0_to_255_or_cast_to_unsigned_char();
  }
  constexpr fill_byte(unsigned char byte) noexcept : value(byte) {}
  constexpr fill_byte(std::byte byte) noexcept : value(static_cast<unsigned char>(byte)) {}
  unsigned char value;
};
struct fill_bytes_fn {
  template <viewable_ref Dst>
  [[nodiscard]] status operator()(Dst&& dst, fill_byte value) const noexcept {
    return run(dst.view(), value.value, nullptr);
  }
  template <viewable_ref Dst>
  [[nodiscard]] status operator()(Dst&& dst, fill_byte value, stream_ref s) const noexcept {
    check_stream_ordered<Dst>();
    CUDAMEM_TRY(owner_use(dst, s, "fill_bytes", false));
    CUDAMEM_TRY(run(dst.view(), value.value, &s));
    return owner_use(dst, s, "fill_bytes", true);
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
    using View = decltype(dst.view());
    using T = typename View::value_type;
    static_assert(View::kind::device_accessible,
                  "cudamem::fill: a kernel cannot write pageable host memory; use fill_bytes, or a pinned_buffer");
    static_assert(!std::is_const_v<typename View::element_type>, "cudamem::fill: a view of const elements");
    static_assert(
        requires { T{std::declval<const V&>()}; },
        "cudamem::fill: the value converts to the element type only by narrowing; pass a value of the "
        "element type (3.0f for float, int(x) for int)");
    check_stream_ordered<Dst>();
    CUDAMEM_TRY(owner_use(dst, s, "fill", false));
    CUDAMEM_TRY(run_kernel(dst.view(), T{value}, s));
    return owner_use(dst, s, "fill", true);
  }

 private:
  template <class View, class T>
  static status run_kernel(View view, T value, stream_ref s) noexcept {
    constexpr const char* api = "fill";
    if (!s.valid()) return handle_moved_from(api, "stream");
    plan p;
    CUDAMEM_TRY(plan_fill(p, operand_of(view), sizeof(T), 0, api));
    if (p.dst.empty()) return {};
    const region& d = p.dst;
    if (reinterpret_cast<std::uintptr_t>(d.addr) % alignof(T) != 0)  // the kernel's stores would fault (sticky)
      return error(errc::invalid_argument, api,
                   "the address %p is not a multiple of the element's alignment (%zu bytes)", d.addr, alignof(T));
    if (d.rows > 1 && d.pitch % alignof(T) != 0)
      return error(errc::invalid_argument, api,
                   "the pitch (%zu bytes) is not a multiple of the element's alignment (%zu bytes)", d.pitch,
                   alignof(T));
    auto launch = s.device();
    if (!launch) return launch.error().with_api(api);
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
    const std::size_t wanted = (width * height + threads - 1) / threads;
    const auto blocks = static_cast<unsigned>(wanted < 65536 ? wanted : 65536);
    return check(launch_kernel(&fill_kernel<T>, dim3(blocks), threads, s.get(), static_cast<char*>(d.addr), width,
                               height, d.pitch, value),
                 api, "cudaLaunchKernelEx (fill_kernel)");
  }
};
}  // namespace detail

/// fill(dst, value, stream), nvcc only: a kernel on the stream's device sets each element of `dst` to `value` (no
/// narrowing); capturable. Errors: invalid_argument (another device's memory, no peer_access; an address or pitch not
/// a multiple of alignof(T), refused before the launch), CUDA errors (this launch's own, never an earlier one's).
inline constexpr detail::fill_fn fill{};
#else
namespace detail {
struct fill_needs_nvcc_fn {  // a plain host compiler: fill names itself and says what to do instead
  template <class... Args>
  status operator()(Args&&...) const noexcept {
    static_assert(sizeof...(Args) == 0,
                  "cudamem::fill launches a kernel, so it exists only in files nvcc compiles: move the call into a "
                  ".cu file, or set bytes with cudamem::fill_bytes, which any compiler can build");
    return {};
  }
};
}  // namespace detail
/// fill in a file that no CUDA compiler builds: refused at compile time, with the fix (a .cu file, or fill_bytes).
inline constexpr detail::fill_needs_nvcc_fn fill{};
#endif

namespace detail {
template <class T, class DK, class U, class SK>
status copy_rows(ptr<T, DK> dst, std::size_t dpitch, ptr<U, SK> src, std::size_t spitch, std::size_t width_bytes,
                 std::size_t height, const stream_ref* s) noexcept {
  check_copy_types<ptr<T, DK>, ptr<U, SK>>();
  return copy_operands({dst.get(), width_bytes, height, dpitch, dst.device(), kind_id_of<DK>},
                       {src.get(), width_bytes, height, spitch, src.device(), kind_id_of<SK>}, 1,
                       copy_direction<DK, SK>, s, "copy_2d");
}
}  // namespace detail

/// Copies `height` rows of `width_bytes` bytes from `src` (rows `spitch` bytes apart) to `dst` (`dpitch` apart) with
/// copy's checks and synchronization (cudaMemcpy2D). Compile-time: same element type, dst not const. Errors: as copy.
template <class T, memory_kind DK, class U, memory_kind SK>
[[nodiscard]] status copy_2d(ptr<T, DK> dst, std::size_t dpitch, ptr<U, SK> src, std::size_t spitch,
                             std::size_t width_bytes, std::size_t height) noexcept {
  return detail::copy_rows(dst, dpitch, src, spitch, width_bytes, height, nullptr);
}
/// As copy_2d, ordered on `s` (cudaMemcpy2DAsync); does not synchronize; can be captured. No pageable host memory.
template <class T, memory_kind DK, class U, memory_kind SK>
[[nodiscard]] status copy_2d(ptr<T, DK> dst, std::size_t dpitch, ptr<U, SK> src, std::size_t spitch,
                             std::size_t width_bytes, std::size_t height, stream_ref s) noexcept {
  detail::check_stream_ordered<ptr<T, DK>, ptr<U, SK>>();
  return detail::copy_rows(dst, dpitch, src, spitch, width_bytes, height, &s);
}

}  // namespace cudamem
