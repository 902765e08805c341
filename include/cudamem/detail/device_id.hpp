// SPDX-License-Identifier: MIT
// cudamem: `device_id`, on its own, for the view headers (ptr, span), which need the type and none of device.hpp's
// functions: device.hpp instantiates result<int>, result<device_id> and device_guard, which every kernel-only
// translation unit would otherwise compile three times (cudafe++, cicc, the host compiler). Include
// <cudamem/device.hpp>.
#pragma once

#include <cudamem/detail/config.hpp>

namespace cudamem {

/// A CUDA device ordinal, or host() (cudaCpuDeviceId) for host memory. A plain value: not checked until used.
class device_id {
 public:
  constexpr device_id() noexcept = default;  ///< Device 0.
  CUDAMEM_HD constexpr explicit device_id(int ordinal) noexcept : ordinal_(ordinal) {}  ///< Device `ordinal`.
  CUDAMEM_HD static constexpr device_id host() noexcept { return device_id(cudaCpuDeviceId); }  ///< Host memory's.
  CUDAMEM_HD constexpr int get() const noexcept { return ordinal_; }  ///< The ordinal, as CUDA takes it.
  CUDAMEM_HD constexpr bool is_host() const noexcept { return ordinal_ == cudaCpuDeviceId; }  ///< Is it host()?
  friend constexpr bool operator==(device_id, device_id) noexcept = default;  ///< Equal when the ordinals are.

 private:
  int ordinal_ = 0;
};

}  // namespace cudamem
