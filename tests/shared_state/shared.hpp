// SPDX-License-Identifier: MIT
// What the two libraries of the shared-state test export, and a process-wide state of the test's
// own, made with the same helper as the library's registries.
#pragma once

#include <cudamem/error.hpp>
#include <cudamem/registry.hpp>

#include <cstdint>

#define SHARED_STATE_EXPORT extern "C" __attribute__((visibility("default")))

namespace shared_state {
struct CUDAMEM_DETAIL_PROCESS_WIDE counter {
  int value = 0;
};
}  // namespace shared_state

// Library A (compiled by nvcc).
SHARED_STATE_EXPORT cudamem::release_handler library_a_set_release_handler(cudamem::release_handler handler);
SHARED_STATE_EXPORT void library_a_report_release_failure();
SHARED_STATE_EXPORT void library_a_set_counter(int value);
// Registers a resource of its own for the made-up stream id `id` (at a made-up handle) in the allocator registry's
// table; returns its slot.
SHARED_STATE_EXPORT std::size_t library_a_register(std::uint64_t id);
SHARED_STATE_EXPORT void library_a_unregister(std::size_t slot, std::uint64_t id);
// Library B (compiled by g++).
SHARED_STATE_EXPORT cudamem::release_handler library_b_set_release_handler(cudamem::release_handler handler);
SHARED_STATE_EXPORT void library_b_report_release_failure();
SHARED_STATE_EXPORT int library_b_counter();
// Whether the allocator registry's table holds an entry for `id`.
SHARED_STATE_EXPORT bool library_b_has_allocator(std::uint64_t id);
