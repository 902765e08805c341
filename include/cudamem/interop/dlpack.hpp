// SPDX-License-Identifier: MIT
/// \file
/// cudamem views and owners as DLPack tensors (DLManagedTensor, DLPack 0.6 or later): to_dlpack; and tensors as views,
/// checked: span_from_dlpack, pitched_from_dlpack. Needs dlpack/dlpack.h (Debian, Ubuntu: libdlpack-dev). How kinds
/// and element types map, and the checks of an import (its invalid_argument errors): docs/interop.md.
///
///     dlpack_tensor: adopt(DLManagedTensor*), get(), release(); move-only, calls the deleter once
///     result<dlpack_tensor> to_dlpack(span | pitched_span)        the tensor views the memory
///     result<dlpack_tensor> to_dlpack(buffer&& | pitched_buffer&&)   the tensor owns the memory
///     span_from_dlpack<T, Kind>(tensor), pitched_from_dlpack<T, Kind>(tensor)   checked: result<view>
#pragma once

#include <cudamem/detail/unique_handle.hpp>
#include <cudamem/interop/detail/strided_rows.hpp>
#include <cudamem/pitched.hpp>

#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <new>
#include <type_traits>
#include <utility>

namespace cudamem {

/// Owns a DLManagedTensor and calls its deleter (if any) once, when it goes. Move-only.
class dlpack_tensor {
 public:
  dlpack_tensor() noexcept = default;  ///< Owns nothing.
  /// Takes ownership of `tensor` (may be null), as a DLPack consumer does of a "dltensor" capsule's.
  [[nodiscard]] static dlpack_tensor adopt(DLManagedTensor* tensor) noexcept { return dlpack_tensor(tensor); }
  [[nodiscard]] DLManagedTensor* get() const noexcept { return handle_.get(); }  ///< The tensor; null when none.
  /// Gives the tensor up without calling its deleter (e.g. into a PyCapsule); this owns nothing afterwards.
  [[nodiscard]] DLManagedTensor* release() noexcept { return handle_.release(); }
  explicit operator bool() const noexcept { return handle_.valid(); }  ///< True when a tensor is owned.

 private:
  struct dlpack_handle {
    using type = DLManagedTensor*;
    static type empty() noexcept { return nullptr; }
    static void release(type tensor) noexcept {
      if (tensor->deleter != nullptr) tensor->deleter(tensor);
    }
  };
  explicit dlpack_tensor(DLManagedTensor* tensor) noexcept : handle_(tensor) {}
  detail::unique_handle<dlpack_handle> handle_;
};

namespace detail {
template <class T>
consteval DLDataType dlpack_dtype() noexcept {
  using U = std::remove_cv_t<T>;
  static_assert(
      (std::is_integral_v<U> && !std::is_same_v<U, bool>) || std::is_same_v<U, float> || std::is_same_v<U, double>,
      "cudamem: DLPack export and import take integers (not bool), float and double elements");
  const auto code = std::is_floating_point_v<U> ? kDLFloat : std::is_signed_v<U> ? kDLInt : kDLUInt;
  return DLDataType{static_cast<std::uint8_t>(code), static_cast<std::uint8_t>(sizeof(U) * 8), 1};
}
template <memory_kind K>
inline constexpr DLDeviceType dlpack_device_type = std::is_same_v<K, device>    ? kDLCUDA
                                                   : std::is_same_v<K, pinned>  ? kDLCUDAHost
                                                   : std::is_same_v<K, managed> ? kDLCUDAManaged
                                                                                : kDLCPU;
struct no_owner {};
// `first` as a tensor of `ndim` (1 or 2) dimensions; `owner` is moved in only on success.
template <class T, memory_kind Kind, class Owner>
result<dlpack_tensor> export_tensor(ptr<T, Kind> first, int ndim, const std::size_t (&shape)[2],
                                    const std::size_t (&strides)[2], Owner&& owner) noexcept {
  for (int d = 0; d < ndim; ++d)
    if (shape[d] > INT64_MAX || strides[d] > INT64_MAX)
      return error(errc::size_overflow, "to_dlpack", "extent %zu or stride %zu does not fit DLPack's int64_t", shape[d],
                   strides[d]);
  struct holder {  // the tensor, its shape and strides, and what it keeps alive: one allocation, deleted by the deleter
    DLManagedTensor tensor;
    std::int64_t shape[2], strides[2];
    std::remove_cvref_t<Owner> owner;
  };
  const auto i64 = [](std::size_t n) { return static_cast<std::int64_t>(n); };
  auto* kept = new (std::nothrow)
      holder{{}, {i64(shape[0]), i64(shape[1])}, {i64(strides[0]), i64(strides[1])}, std::forward<Owner>(owner)};
  if (kept == nullptr) return error(errc::out_of_memory, "to_dlpack", "out of host memory for the tensor");
  // Device and managed memory name their device (a managed allocation's, as cudaMallocManaged made it current);
  // DLPack's host types take 0.
  constexpr bool on_a_device = std::is_same_v<Kind, device> || std::is_same_v<Kind, managed>;
  const int device_ordinal = on_a_device ? first.device().get() : 0;
  kept->tensor.dl_tensor = {
      const_cast<std::remove_cv_t<T>*>(first.get()),  // DLPack has no const data
      {dlpack_device_type<Kind>, device_ordinal},    ndim, dlpack_dtype<T>(), kept->shape, kept->strides, 0};
  kept->tensor.manager_ctx = kept;
  kept->tensor.deleter = [](DLManagedTensor* self) { delete static_cast<holder*>(self->manager_ctx); };
  return dlpack_tensor::adopt(&kept->tensor);
}
// A consumer calls the deleter whenever it is done, perhaps after the buffer's stream was destroyed: the free moves to
// the legacy default stream of the memory's device, which lives as long as the device's context, ordered after the
// work queued on the old stream so far (an event; no host wait). Pageable memory is in no stream-ordered work.
template <class Owner>
status free_on_legacy_stream(Owner& owner) noexcept {
  constexpr const char* api = "to_dlpack";
  const stream_ref old = owner.stream();
  if constexpr (!std::is_same_v<typename Owner::kind, host>) {
    if (owner.data().get() != nullptr && !is_default_stream(old.get())) {
      if (!old.valid()) return handle_moved_from(api, "stream");
      CUDAMEM_TRY(refuse_capture(old.get(), api,
                                 "the buffer's stream is being captured: the free cannot be ordered after work that "
                                 "runs only when the graph is launched"));
      auto stream_device = old.device();
      if (!stream_device) return stream_device.error().with_api(api);
      const device_id memory_device = owner.device().is_host() ? *stream_device : owner.device();
      auto current = device_guard::set(memory_device);
      if (!current) return current.error().with_api(api);
      CUDAMEM_TRY(refuse_capture(cudaStreamLegacy, api,
                                 "the legacy default stream would join a blocking stream's capture in progress"));
      auto done = event::create(*stream_device, event_options{.timing = false});
      if (!done) return done.error().with_api(api);
      CUDAMEM_TRY(done->record(old));
      CUDAMEM_TRY(stream_ref::legacy().wait(*done));
    }
  }
  owner.set_stream(stream_ref::legacy());
  return {};
}
// `owner` as a tensor that frees it (on the legacy stream); on error `owner` keeps its stream.
template <class Owner, class Export>
result<dlpack_tensor> hand_over(Owner& owner, Export&& export_owner) noexcept {
  const stream_ref old = owner.stream();
  CUDAMEM_TRY(free_on_legacy_stream(owner));
  auto tensor = std::forward<Export>(export_owner)();
  if (!tensor) owner.set_stream(old);
  return tensor;
}
template <class T, memory_kind Kind, class Owner>
result<dlpack_tensor> export_rows(pitched_span<T, Kind> rows, Owner&& owner) noexcept {
  auto row_stride = row_stride_in_elements(rows, "to_dlpack");
  if (!row_stride) return row_stride.error();
  return export_tensor(rows.data(), 2, {rows.height(), rows.width()}, {*row_stride, 1}, std::forward<Owner>(owner));
}
// A tensor's rows (`ndim` 1: one row), every rule checked; null strides (before DLPack 1.2) mean compact rows.
template <class T, memory_kind Kind>
result<pitched_span<T, Kind>> import_rows(const DLManagedTensor* tensor, int ndim, const char* api) noexcept {
  if (tensor == nullptr) return error(errc::invalid_argument, api, "the tensor is null");
  const DLTensor& t = tensor->dl_tensor;
  const DLDeviceType type = t.device.device_type;
  if (type != dlpack_device_type<Kind> && !(std::is_same_v<Kind, host> && type == kDLCUDAHost))
    return error(errc::invalid_argument, api, "device type %d is not that of %s memory (%d)", static_cast<int>(type),
                 Kind::name, static_cast<int>(dlpack_device_type<Kind>));
  constexpr DLDataType want = dlpack_dtype<T>();
  if (t.dtype.code != want.code || t.dtype.bits != want.bits || t.dtype.lanes != want.lanes)
    return error(errc::invalid_argument, api, "dtype (code %u, %u bits, %u lanes) is not T's (code %u, %u bits)",
                 unsigned{t.dtype.code}, unsigned{t.dtype.bits}, unsigned{t.dtype.lanes}, unsigned{want.code},
                 unsigned{want.bits});
  if (t.ndim != ndim || t.shape == nullptr)
    return error(errc::invalid_argument, api, "ndim is %d%s, not %d", t.ndim, t.shape ? "" : " (no shape)", ndim);
  for (int d = 0; d < ndim; ++d)
    if (t.shape[d] < 0 || (t.strides != nullptr && t.strides[d] < 0))
      return error(errc::invalid_argument, api, "dimension %d has a negative extent or stride", d);
  if ((reinterpret_cast<std::uintptr_t>(t.data) + t.byte_offset) % alignof(T) != 0)
    return error(errc::invalid_argument, api, "data + byte_offset (%llu) is not aligned for T (%zu bytes)",
                 static_cast<unsigned long long>(t.byte_offset), alignof(T));
  const bool on_device = std::is_same_v<Kind, device> || std::is_same_v<Kind, managed>;
  if (on_device && t.device.device_id < 0)
    return error(errc::invalid_argument, api, "device_id %d names no device", t.device.device_id);
  const auto columns = static_cast<std::size_t>(t.shape[ndim - 1]);
  const std::size_t rows = ndim == 2 ? static_cast<std::size_t>(t.shape[0]) : 1;
  const std::size_t row_stride = ndim == 2 && t.strides != nullptr ? static_cast<std::size_t>(t.strides[0]) : columns;
  const std::size_t column_stride = t.strides != nullptr ? static_cast<std::size_t>(t.strides[ndim - 1]) : 1;
  return rows_from_strides<T, Kind>(reinterpret_cast<T*>(static_cast<char*>(t.data) + t.byte_offset),
                                    on_device ? device_id(t.device.device_id) : device_id::host(), rows, columns,
                                    row_stride, column_stride, api);
}
}  // namespace detail

/// `view` as a tensor of shape {size}, stride {1}, of the caller's memory. Errors: size_overflow, out_of_memory (host).
template <class T, memory_kind Kind>
[[nodiscard]] result<dlpack_tensor> to_dlpack(span<T, Kind> view) noexcept {
  return detail::export_tensor(view.data(), 1, {view.size(), 0}, {1, 0}, detail::no_owner{});
}
/// `view` as a tensor {height, width}, strides {pitch in elements, 1}. Errors: invalid_argument (pitch); as for spans.
template <class T, memory_kind Kind>
[[nodiscard]] result<dlpack_tensor> to_dlpack(pitched_span<T, Kind> view) noexcept {
  return detail::export_rows(view, detail::no_owner{});
}
/// `owner` as to_dlpack(span); the tensor's deleter frees it through its resource, with its device current, on that
/// device's legacy default stream (its own stream may be gone by then), ordered after the work queued on its stream
/// before the export; does not block. On error `owner` is left as it was. Errors: as to_dlpack(span); capture_active
/// (its stream, or the legacy stream, is being captured); CUDA's (the event that orders the free).
template <class T, memory_kind Kind>
[[nodiscard]] result<dlpack_tensor> to_dlpack(buffer<T, Kind>&& owner) noexcept {
  return detail::hand_over(
      owner, [&] { return detail::export_tensor(owner.data(), 1, {owner.size(), 0}, {1, 0}, std::move(owner)); });
}
/// `owner` as to_dlpack(pitched_span); the tensor owns it, as to_dlpack(buffer&&).
template <class T, memory_kind Kind>
[[nodiscard]] result<dlpack_tensor> to_dlpack(pitched_buffer<T, Kind>&& owner) noexcept {
  return detail::hand_over(owner, [&] { return detail::export_rows(owner.view(), std::move(owner)); });
}
/// A 1D `tensor` of kind Kind (host also takes kDLCUDAHost) as a span valid while it lives. Errors: invalid_argument.
template <class T, memory_kind Kind>
[[nodiscard]] result<span<T, Kind>> span_from_dlpack(const DLManagedTensor* tensor) noexcept {
  auto row = detail::import_rows<T, Kind>(tensor, 1, "span_from_dlpack");
  return row.transform([](auto one) { return span<T, Kind>(one.data(), one.width()); });
}
/// The rows of a 2D `tensor` as a view valid while it lives. Errors: invalid_argument, as make_pitched.
template <class T, memory_kind Kind>
[[nodiscard]] result<pitched_span<T, Kind>> pitched_from_dlpack(const DLManagedTensor* tensor) noexcept {
  return detail::import_rows<T, Kind>(tensor, 2, "pitched_from_dlpack");
}

}  // namespace cudamem
