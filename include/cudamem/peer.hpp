// SPDX-License-Identifier: MIT
/// \file
/// Peer access between the devices of one process: what CUDA reports about each pair (can_access_peer,
/// peer_link_between, peers_of), and guards counted per pair process-wide (peer_access::enable, enable_both) that let
/// one device's kernels and copies reach another's memory and default pool. Design: docs/decisions.md.
///
///     result<bool> can_access_peer(accessor, owner)
///     result<peer_link> peer_link_between(accessor, owner);  result<peer_links> peers_of(accessor)
///     result<peer_access> peer_access::enable(accessor, owner)   counted per pair; disabled when the last goes
///       accessor(), owner(), valid(); move-only
///     result<std::pair<peer_access, peer_access>> enable_both(a, b)
#pragma once

#include <cudamem/detail/peer_registry.hpp>
#include <cudamem/detail/unique_handle.hpp>
#include <cudamem/device.hpp>

#include <utility>

namespace cudamem {

/// What CUDA reports about `accessor` reaching `owner`'s memory (cudaDeviceGetP2PAttribute).
struct peer_link {
  device_id owner;                ///< The device whose memory is reached.
  bool access_supported = false;  ///< cudaDevP2PAttrAccessSupported: a peer_access guard can be taken.
  bool native_atomics = false;    ///< cudaDevP2PAttrNativeAtomicSupported: atomics over the link are native.
  bool array_access = false;      ///< cudaDevP2PAttrCudaArrayAccessSupported: CUDA arrays are reachable too.
  int performance_rank = 0;       ///< cudaDevP2PAttrPerformanceRank: relative speed of the link; lower is faster.
};
/// The links from one device to every other, in device order (at most 63: the registry covers 64 devices).
class peer_links {
 public:
  [[nodiscard]] const peer_link* begin() const noexcept { return links_; }          ///< The first link.
  [[nodiscard]] const peer_link* end() const noexcept { return links_ + count_; }   ///< One past the last.
  [[nodiscard]] std::size_t size() const noexcept { return count_; }                ///< How many links.
  [[nodiscard]] const peer_link& operator[](std::size_t i) const noexcept { return links_[i]; }  ///< Unchecked.

 private:
  friend result<peer_links> peers_of(device_id) noexcept;
  peer_link links_[detail::peer_table::max_devices - 1] = {};
  std::size_t count_ = 0;
};

namespace detail {
/// Both devices exist, differ and lie in the registry. Errors: as can_access_peer.
inline status check_peer_pair(device_id accessor, device_id owner, const char* api) noexcept {
  for (device_id id : {accessor, owner}) CUDAMEM_TRY(check_device(id, api));
  if (accessor == owner) return error(errc::invalid_argument, api, "device %d cannot be its own peer", owner.get());
  if (!peer_table::in_table(accessor) || !peer_table::in_table(owner))
    return error(errc::not_supported, api, "peer access is tracked for devices 0 to %d", peer_table::max_devices - 1);
  return {};
}
inline result<bool> read_can_access(device_id accessor, device_id owner, const char* api) noexcept {
  int can = 0;
  CUDAMEM_TRY(check(cudaDeviceCanAccessPeer(&can, accessor.get(), owner.get()), api, "cudaDeviceCanAccessPeer"));
  return can != 0;
}
inline cudaError_t set_pool_access(cudaMemPool_t pool, device_id accessor, unsigned char flags) noexcept {
  const cudaMemAccessDesc desc{{cudaMemLocationTypeDevice, accessor.get()}, static_cast<cudaMemAccessFlags>(flags)};
  return cudaMemPoolSetAccess(pool, &desc, 1);
}
/// The registry's switch-on, all or nothing: peer access (borrowed if on), then the owner's default pool read-write.
inline status switch_peer_on(device_id accessor, device_id owner, peer_entry& entry) noexcept {
  constexpr const char* api = "peer_access::enable";
  auto can = read_can_access(accessor, owner, api);
  if (!can) return can.error();
  if (!*can)
    return error(errc::not_supported, api, "device %d cannot reach device %d's memory (no peer path)", accessor.get(),
                 owner.get());
  auto pools = cached_attribute<cudaDevAttrMemoryPoolsSupported>(owner, api);
  if (!pools) return pools.error();
  cudaMemPool_t pool = nullptr;
  if (*pools != 0)
    CUDAMEM_TRY(check(cudaDeviceGetDefaultMemPool(&pool, owner.get()), api, "cudaDeviceGetDefaultMemPool"));
  auto current = device_guard::set(accessor);  // cudaDeviceEnablePeerAccess opens the current device's view
  if (!current) return current.error().with_api(api);
  const cudaError_t enabled = cudaDeviceEnablePeerAccess(owner.get(), 0);
  if (enabled == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();
  else CUDAMEM_TRY(check(enabled, api, "cudaDeviceEnablePeerAccess"));
  entry.switched_access = enabled == cudaSuccess;
  cudaMemAccessFlags before = cudaMemAccessFlagsProtNone;
  cudaMemLocation location{cudaMemLocationTypeDevice, accessor.get()};
  status opened;
  if (pool != nullptr) opened = check(cudaMemPoolGetAccess(&before, pool, &location), api, "cudaMemPoolGetAccess");
  entry.opened_pool = opened && before != cudaMemAccessFlagsProtReadWrite ? pool : nullptr;
  if (entry.opened_pool != nullptr)
    opened = check(set_pool_access(pool, accessor, cudaMemAccessFlagsProtReadWrite), api, "cudaMemPoolSetAccess");
  if (!opened && entry.switched_access) (void)cudaDeviceDisablePeerAccess(owner.get());
  entry.pool_flags_before = static_cast<unsigned char>(before);
  return opened;
}
/// The registry's switch-off: undoes what switch_peer_on recorded; failures (not access already off) are reported.
inline void switch_peer_off(device_id accessor, device_id owner, const peer_entry& entry) noexcept {
  if (entry.opened_pool != nullptr)
    check_release(set_pool_access(entry.opened_pool, accessor, entry.pool_flags_before), "cudaMemPoolSetAccess");
  if (!entry.switched_access) return;
  auto current = device_guard::set(accessor);
  if (!current) {
    if (current.error() != cudaErrorCudartUnloading) report_release_failure(current.error());  // as check_release
    return;
  }
  const cudaError_t disabled = cudaDeviceDisablePeerAccess(owner.get());
  if (disabled == cudaErrorPeerAccessNotEnabled) (void)cudaGetLastError();
  else check_release(disabled, "cudaDeviceDisablePeerAccess");
}
inline constexpr peer_switch cuda_peer_switch{&switch_peer_on, &switch_peer_off};
struct peer_guard_handle {  // what a peer_access owns: one count of a pair in the registry
  struct type {
    device_id accessor = device_id(cudaInvalidDeviceId), owner = device_id(cudaInvalidDeviceId);
    friend bool operator==(type, type) noexcept = default;
  };
  static type empty() noexcept { return {}; }
  static void release(type p) noexcept { process_wide<peer_table>().release(p.accessor, p.owner, cuda_peer_switch); }
};
}  // namespace detail

/// Whether kernels on `accessor` can reach `owner`'s memory once a guard is held (cudaDeviceCanAccessPeer). Errors:
/// out_of_range (no such device); invalid_argument (accessor == owner); not_supported (ordinal >= 64); CUDA errors.
[[nodiscard]] inline result<bool> can_access_peer(device_id accessor, device_id owner) noexcept {
  CUDAMEM_TRY(detail::check_peer_pair(accessor, owner, "can_access_peer"));
  return detail::read_can_access(accessor, owner, "can_access_peer");
}
/// The four cudaDeviceGetP2PAttribute attributes of `accessor` reaching `owner`. Errors: as can_access_peer.
[[nodiscard]] inline result<peer_link> peer_link_between(device_id accessor, device_id owner) noexcept {
  constexpr const char* api = "peer_link_between";
  CUDAMEM_TRY(detail::check_peer_pair(accessor, owner, api));
  const cudaDeviceP2PAttr attributes[] = {cudaDevP2PAttrAccessSupported, cudaDevP2PAttrNativeAtomicSupported,
                                          cudaDevP2PAttrCudaArrayAccessSupported, cudaDevP2PAttrPerformanceRank};
  int values[4] = {};
  for (int i = 0; i < 4; ++i)
    CUDAMEM_TRY(detail::check(cudaDeviceGetP2PAttribute(&values[i], attributes[i], accessor.get(), owner.get()), api,
                              "cudaDeviceGetP2PAttribute"));
  return peer_link{owner, values[0] != 0, values[1] != 0, values[2] != 0, values[3]};
}
/// The link from `accessor` to every other device (of the first 64), in device order. Errors: as can_access_peer.
[[nodiscard]] inline result<peer_links> peers_of(device_id accessor) noexcept {
  auto count = device_count();
  if (!count) return count.error().with_api("peers_of");
  CUDAMEM_TRY(detail::check_device(accessor, "peers_of"));
  peer_links links;
  for (int other = 0; other < *count && other < detail::peer_table::max_devices; ++other) {
    if (other == accessor.get()) continue;
    auto link = peer_link_between(accessor, device_id(other));
    if (!link) return link.error().with_api("peers_of");
    links.links_[links.count_++] = *link;
  }
  return links;
}

/// A move-only guard: while held, kernels and copies on `accessor` reach `owner`'s memory and default pool (one way:
/// see enable_both). Counted per pair process-wide: the first switches access on (about 11 ms on an H200 pair), the
/// last switches off what the first did; work using it must be complete by then. Moved from: ids cudaInvalidDeviceId.
class peer_access {
 public:
  /// Lets `accessor` reach `owner`'s memory (access already on is borrowed). Synchronous; the current device stays.
  /// Errors, nothing changed: as can_access_peer; not_supported (no peer path); CUDA (cudaErrorTooManyPeers).
  [[nodiscard]] static result<peer_access> enable(device_id accessor, device_id owner) noexcept {
    CUDAMEM_TRY(detail::check_peer_pair(accessor, owner, "peer_access::enable"));
    CUDAMEM_TRY(detail::process_wide<detail::peer_table>().acquire(accessor, owner, detail::cuda_peer_switch));
    return peer_access(accessor, owner);
  }
  [[nodiscard]] device_id accessor() const noexcept { return pair_.get().accessor; }  ///< The device that reaches.
  [[nodiscard]] device_id owner() const noexcept { return pair_.get().owner; }  ///< The device whose memory is reached.
  [[nodiscard]] bool valid() const noexcept { return pair_.valid(); }  ///< False after a move.

 private:
  peer_access(device_id accessor, device_id owner) noexcept : pair_({accessor, owner}) {}
  detail::unique_handle<detail::peer_guard_handle> pair_;
};
/// Both directions: first lets `a` reach `b`, second `b` reach `a`; all or nothing. Errors: as peer_access::enable.
[[nodiscard]] inline result<std::pair<peer_access, peer_access>> enable_both(device_id a, device_id b) noexcept {
  auto forward = peer_access::enable(a, b);
  if (!forward) return forward.error().with_api("enable_both");
  auto backward = peer_access::enable(b, a);
  if (!backward) return backward.error().with_api("enable_both");
  return std::pair<peer_access, peer_access>(std::move(*forward), std::move(*backward));
}

}  // namespace cudamem
