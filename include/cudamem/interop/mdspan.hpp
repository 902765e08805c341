// SPDX-License-Identifier: MIT
/// \file
/// cudamem views as cuda::std::mdspan (to_mdspan) and cuda::std::span (to_cuda_span), and back (to_span,
/// to_pitched_span, from_cuda_span); optional, as <cuda/std/mdspan> compiles slowly. Going back, the caller names the
/// kind (and the device for device and managed memory). Indexing an mdspan is not checked against the kind: the
/// compile-time access rule ends at the conversion. See docs/interop.md.
///
///     to_mdspan(span) -> 1D mdspan;  to_mdspan(pitched_span) -> result<pitched_mdspan<T>>   (layout_stride)
///     to_span<Kind>(mdspan [, device_id]), to_pitched_span<Kind>(mdspan [, device_id])   checked: result<...>
///     to_cuda_span(span) -> cuda::std::span<T>;  from_cuda_span<Kind>(cuda::std::span [, device_id])
#pragma once

#include <cudamem/interop/detail/strided_rows.hpp>
#include <cudamem/pitched_span.hpp>

#include <cuda/std/mdspan>
#include <cuda/std/span>

#include <cstddef>
#include <type_traits>

namespace cudamem {

/// The mdspan of a pitched view: rows `stride(0)` elements apart, unit stride within a row.
template <class T>
using pitched_mdspan = cuda::std::mdspan<T, cuda::std::dextents<std::size_t, 2>, cuda::std::layout_stride>;
/// The elements of `view` as a 1D mdspan. Never fails; usable in kernels.
template <class T, memory_kind Kind>
[[nodiscard]] CUDAMEM_HD constexpr cuda::std::mdspan<T, cuda::std::dextents<std::size_t, 1>> to_mdspan(
    span<T, Kind> view) noexcept {
  return cuda::std::mdspan<T, cuda::std::dextents<std::size_t, 1>>(view.data().get(), view.size());
}
/// The rows of `view` as a 2D mdspan. Errors: invalid_argument when the pitch is not a whole number of elements.
template <class T, memory_kind Kind>
[[nodiscard]] result<pitched_mdspan<T>> to_mdspan(pitched_span<T, Kind> view) noexcept {
  auto row_stride = detail::row_stride_in_elements(view, "to_mdspan");
  if (!row_stride) return row_stride.error();
  using extents = cuda::std::dextents<std::size_t, 2>;
  // layout_stride wants positive strides; an empty view's pitch may be 0.
  const cuda::std::array<std::size_t, 2> strides{*row_stride > 0 ? *row_stride : 1, 1};
  return pitched_mdspan<T>(view.data().get(), {extents(view.height(), view.width()), strides});
}

namespace detail {
template <class MD, std::size_t Rank>
concept plain_strided_mdspan = MD::rank() == Rank && MD::is_always_strided() &&
                               std::is_same_v<typename MD::data_handle_type, typename MD::element_type*>;
/// The `id` a conversion back defaults to: device_id::host() for host and pinned memory; other kinds name theirs.
template <memory_kind Kind>
  requires std::is_same_v<Kind, host> || std::is_same_v<Kind, pinned>
CUDAMEM_HD constexpr device_id host_id() noexcept {
  return device_id::host();
}
}  // namespace detail

/// The elements of a 1D mdspan of kind Kind on `id` (as the caller asserts). Errors: invalid_argument (stride != 1).
template <memory_kind Kind, class MD>
  requires detail::plain_strided_mdspan<MD, 1>
[[nodiscard]] result<span<typename MD::element_type, Kind>> to_span(const MD& md,
                                                                    device_id id = detail::host_id<Kind>()) noexcept {
  auto row = detail::rows_from_strides<typename MD::element_type, Kind>(md.data_handle(), id, 1, md.extent(0),
                                                                        md.extent(0), md.stride(0), "to_span");
  return row.transform([](auto one) { return span<typename MD::element_type, Kind>(one.data(), one.width()); });
}
/// A 2D mdspan's rows, of kind Kind on `id` (as asserted). Errors: invalid_argument (stride(1) != 1), as make_pitched.
template <memory_kind Kind, class MD>
  requires detail::plain_strided_mdspan<MD, 2>
[[nodiscard]] result<pitched_span<typename MD::element_type, Kind>> to_pitched_span(
    const MD& md, device_id id = detail::host_id<Kind>()) noexcept {
  return detail::rows_from_strides<typename MD::element_type, Kind>(md.data_handle(), id, md.extent(0), md.extent(1),
                                                                    md.stride(0), md.stride(1), "to_pitched_span");
}
/// The elements of `view` as a cuda::std::span (the common span type of RMM and cudf). Usable in kernels.
template <class T, memory_kind Kind>
[[nodiscard]] CUDAMEM_HD constexpr cuda::std::span<T> to_cuda_span(span<T, Kind> view) noexcept {
  return cuda::std::span<T>(view.data().get(), view.size());
}
/// The elements of `view` as memory of kind Kind on `id` (not checked). Usable in kernels.
template <memory_kind Kind, class T, std::size_t Extent>
[[nodiscard]] CUDAMEM_HD constexpr span<T, Kind> from_cuda_span(cuda::std::span<T, Extent> view,
                                                                device_id id = detail::host_id<Kind>()) noexcept {
  return span<T, Kind>(ptr<T, Kind>(view.data(), id), view.size());
}

}  // namespace cudamem
