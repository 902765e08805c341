// SPDX-License-Identifier: MIT
/// \file
/// `memory_location`: where memory lives or is moved to (a device, the host, a host NUMA node), as CUDA's
/// cudaMemLocation; what managed prefetch and advice, and host-located pools, take.
///
///     memory_location::device(id), host(), host_numa(node), host_numa_current()
///       type(), id(), native() -> cudaMemLocation, ==
#pragma once

#include <cudamem/device.hpp>

namespace cudamem {

/// A place memory can live: a device, the host, or a host NUMA node. Trivially copyable.
class memory_location {
 public:
  /// Device `id`'s memory.
  [[nodiscard]] static constexpr memory_location device(device_id id) noexcept {
    return {cudaMemLocationTypeDevice, id.get()};
  }
  /// Host memory, on no particular NUMA node.
  [[nodiscard]] static constexpr memory_location host() noexcept { return {cudaMemLocationTypeHost, 0}; }
  /// Host memory on NUMA node `node` (>= 0: checked where it is used).
  [[nodiscard]] static constexpr memory_location host_numa(int node) noexcept {
    return {cudaMemLocationTypeHostNuma, node};
  }
  /// Host memory on the NUMA node closest to the calling thread's CPU.
  [[nodiscard]] static constexpr memory_location host_numa_current() noexcept {
    return {cudaMemLocationTypeHostNumaCurrent, 0};
  }
  [[nodiscard]] constexpr cudaMemLocationType type() const noexcept { return type_; }  ///< Device, host, NUMA node.
  [[nodiscard]] constexpr int id() const noexcept { return id_; }  ///< The device ordinal or node (else 0).
  [[nodiscard]] constexpr bool is_device() const noexcept { return type_ == cudaMemLocationTypeDevice; }  ///< A GPU.
  /// CUDA's form of it.
  [[nodiscard]] constexpr cudaMemLocation native() const noexcept {
    cudaMemLocation location{};
    location.type = type_;
    location.id = id_;
    return location;
  }
  friend constexpr bool operator==(memory_location, memory_location) noexcept = default;  ///< Same type and id.

 private:
  constexpr memory_location(cudaMemLocationType type, int id) noexcept : type_(type), id_(id) {}
  cudaMemLocationType type_;
  int id_;
};

namespace detail {
/// Succeeds for an existing device or a NUMA node >= 0; else out_of_range or invalid_argument naming `api`.
inline status check_location(memory_location where, const char* api) noexcept {
  if (where.is_device()) return check_device(device_id(where.id()), api);
  if (where.type() == cudaMemLocationTypeHostNuma && where.id() < 0)
    return error(errc::invalid_argument, api, "host NUMA node %d is negative", where.id());
  return {};
}
}  // namespace detail

}  // namespace cudamem
