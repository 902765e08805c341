// SPDX-License-Identifier: MIT
// What the two libraries of the shared-state test export, and a process-wide state of the test's
// own, made with the same helper as the library's registries.
#pragma once

#include <cudamem/detail/peer_registry.hpp>
#include <cudamem/error.hpp>
#include <cudamem/registry.hpp>
#include <cudamem/resource.hpp>
#include <cudamem/stream.hpp>

#include <cstdint>

#define SHARED_STATE_EXPORT extern "C" __attribute__((visibility("default")))

namespace shared_state {
struct CUDAMEM_DETAIL_PROCESS_WIDE counter {
  int value = 0;
};
/// A switch that switches nothing: the test counts guards in the process-wide peer registry, without a device.
inline cudamem::status switch_nothing_on(cudamem::device_id, cudamem::device_id,
                                         cudamem::detail::peer_entry&) noexcept {
  return {};
}
inline void switch_nothing_off(cudamem::device_id, cudamem::device_id, const cudamem::detail::peer_entry&) noexcept {}
inline constexpr cudamem::detail::peer_switch no_switch{&switch_nothing_on, &switch_nothing_off};
/// The default resource of each kind as one library sees it (no CUDA call: a resource_ref is two pointers), and the
/// addresses of the resource objects behind them.
struct default_resources {
  cudamem::resource_ref<cudamem::host> host;
  cudamem::resource_ref<cudamem::pinned> pinned;
  cudamem::resource_ref<cudamem::managed> managed;
  cudamem::resource_ref<cudamem::device> device;
  cudamem::resource_ref<cudamem::device> device_stream_ordered;
  const void* objects[5];
};
inline default_resources default_resources_here() noexcept {
  using namespace cudamem;
  return {default_resource<host>(),
          default_resource<pinned>(),
          default_resource<managed>(),
          default_resource<device>(),
          default_resource<device>(true),
          {&detail::builtin_resource<host_resource>(), &detail::builtin_resource<pinned_resource>(),
           &detail::builtin_resource<managed_resource>(), &detail::builtin_resource<device_malloc_resource>(),
           &detail::builtin_resource<device_pool_resource>()}};
}
}  // namespace shared_state

// Library A (compiled by nvcc).
SHARED_STATE_EXPORT cudamem::release_handler library_a_set_release_handler(cudamem::release_handler handler);
SHARED_STATE_EXPORT void library_a_report_release_failure();
SHARED_STATE_EXPORT void library_a_set_counter(int value);
SHARED_STATE_EXPORT void library_a_take_peer_guard(int accessor, int owner);
// Registers a resource of its own for the made-up stream id `id` (at a made-up handle) in the allocator registry's
// table; returns its slot.
SHARED_STATE_EXPORT std::size_t library_a_register(std::uint64_t id);
SHARED_STATE_EXPORT void library_a_unregister(std::size_t slot, std::uint64_t id);
// The default resources as the library sees them (C++ linkage: the result is a class).
__attribute__((visibility("default"))) shared_state::default_resources library_a_default_resources();
// Library B (compiled by g++).
SHARED_STATE_EXPORT cudamem::release_handler library_b_set_release_handler(cudamem::release_handler handler);
SHARED_STATE_EXPORT void library_b_report_release_failure();
SHARED_STATE_EXPORT int library_b_counter();
SHARED_STATE_EXPORT bool library_b_peer_held(int accessor, int owner);
SHARED_STATE_EXPORT void library_b_drop_peer_guard(int accessor, int owner);
// Whether the allocator registry's table holds an entry for `id`.
SHARED_STATE_EXPORT bool library_b_has_allocator(std::uint64_t id);
__attribute__((visibility("default"))) shared_state::default_resources library_b_default_resources();
