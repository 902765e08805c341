// SPDX-License-Identifier: MIT
// cudamem: the process-wide count of peer_access guards per (accessor, owner); switching is passed in (CUDA in
// peer.hpp, a fake in the host tests), so the counting is tested without a device. Internal; docs/decisions.md.
#pragma once

#include <cudamem/detail/process_wide.hpp>
#include <cudamem/detail/sync.hpp>
#include <cudamem/device.hpp>

namespace cudamem::detail {

/// One pair: the guards held, and what the first guard switched on itself (what was on before stays on).
struct peer_entry {
  unsigned guards = 0;
  bool switched_access = false;         // peer access (cudaDeviceEnablePeerAccess)
  cudaMemPool_t opened_pool = nullptr;  // the owner's default pool, opened to the accessor (cudaMemPoolSetAccess)
  unsigned char pool_flags_before = 0;  // the accessor's access to it before, restored by the last guard
};
/// How a pair is switched, under the lock: `on` (all or nothing) records in the entry what it did; `off` undoes that.
struct peer_switch {
  status (*on)(device_id accessor, device_id owner, peer_entry& entry) noexcept;
  void (*off)(device_id accessor, device_id owner, const peer_entry& entry) noexcept;
};
/// Every pair's guards, under one lock that also covers the switching; acquire and release take ordinals in the table.
struct CUDAMEM_DETAIL_PROCESS_WIDE peer_table {
  static constexpr int max_devices = 64;
  /// One more guard of the pair; the first switches access on (`how.on`). On error nothing is counted.
  status acquire(device_id accessor, device_id owner, const peer_switch& how) noexcept {
    const lock_guard<mutex> hold(lock_);
    peer_entry& entry = entries_[accessor.get()][owner.get()];
    if (entry.guards == 0) {
      peer_entry fresh;
      CUDAMEM_TRY(how.on(accessor, owner, fresh));
      entry = fresh;
    }
    ++entry.guards;
    return {};
  }
  /// One guard fewer; the last switches off (`how.off`) what the first switched on. Precondition: one is held.
  void release(device_id accessor, device_id owner, const peer_switch& how) noexcept {
    const lock_guard<mutex> hold(lock_);
    peer_entry& entry = entries_[accessor.get()][owner.get()];
    if (entry.guards == 0 || --entry.guards > 0) return;
    how.off(accessor, owner, entry);
    entry = peer_entry();
  }
  /// The guards held for the pair now (0 for ordinals outside the table).
  unsigned guards(device_id accessor, device_id owner) noexcept {
    if (!in_table(accessor) || !in_table(owner)) return 0;
    const lock_guard<mutex> hold(lock_);
    return entries_[accessor.get()][owner.get()].guards;
  }
  /// The accessors holding a guard for `owner` now, one bit per ordinal (bit a: a guard for (a, owner) is held).
  unsigned long long accessors_of(device_id owner) noexcept {
    if (!in_table(owner)) return 0;
    const lock_guard<mutex> hold(lock_);
    unsigned long long bits = 0;
    for (int a = 0; a < max_devices; ++a)
      if (entries_[a][owner.get()].guards > 0) bits |= 1ull << a;
    return bits;
  }
  static bool in_table(device_id id) noexcept { return id.get() >= 0 && id.get() < max_devices; }

 private:
  mutex lock_;
  peer_entry entries_[max_devices][max_devices] = {};
};
/// Whether a peer_access guard lets `accessor` reach `owner`'s memory now (the process-wide registry).
inline bool peer_access_held(device_id accessor, device_id owner) noexcept {
  return process_wide<peer_table>().guards(accessor, owner) > 0;
}

}  // namespace cudamem::detail
