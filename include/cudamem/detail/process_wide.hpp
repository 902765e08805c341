// SPDX-License-Identifier: MIT
// cudamem: process-wide state (the release handler, registries), one per process even when several shared libraries
// include cudamem with -fvisibility=hidden, where a function-local static would be one per library. process_wide has
// default visibility, so the dynamic linker binds every library to one definition; the state type needs
// CUDAMEM_DETAIL_PROCESS_WIDE too, as a template instantiated with a hidden type is hidden. Internal.
#pragma once

#include <new>
#include <type_traits>

#if defined(__GNUC__) || defined(__clang__)
#define CUDAMEM_DETAIL_PROCESS_WIDE __attribute__((visibility("default")))
#else
#define CUDAMEM_DETAIL_PROCESS_WIDE
#endif

namespace cudamem::detail {
/// The one `State` of the process, value-initialized on first use (thread-safe) and never destroyed (static
/// objects of any library may use it during exit); its layout must agree between the libraries that share it.
template <class State>
CUDAMEM_DETAIL_PROCESS_WIDE State& process_wide() noexcept {
  static_assert(std::is_nothrow_default_constructible_v<State>, "process-wide state must be nothrow-constructible");
  alignas(State) static unsigned char storage[sizeof(State)];
  static State* const instance = ::new (static_cast<void*>(storage)) State();
  return *instance;
}
}  // namespace cudamem::detail
