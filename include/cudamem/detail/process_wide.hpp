// SPDX-License-Identifier: MIT
// cudamem: process-wide state (release handler, registries), one per process even across shared libraries built with
// -fvisibility=hidden: process_wide and state types (CUDAMEM_DETAIL_PROCESS_WIDE) have default visibility. Internal.
#pragma once

#include <new>
#include <type_traits>

#define CUDAMEM_DETAIL_PROCESS_WIDE __attribute__((visibility("default")))  // GCC and Clang, as everywhere in cudamem

namespace cudamem::detail {
/// The one `State` of the process: made on first use (thread-safe), never destroyed, of one layout in every library.
template <class State>
CUDAMEM_DETAIL_PROCESS_WIDE State& process_wide() noexcept {
  static_assert(std::is_nothrow_default_constructible_v<State>, "process-wide state must be nothrow-constructible");
  alignas(State) static unsigned char storage[sizeof(State)];
  static State* const instance = ::new (static_cast<void*>(storage)) State();
  return *instance;
}
}  // namespace cudamem::detail
