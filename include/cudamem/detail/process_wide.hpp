// SPDX-License-Identifier: MIT
// cudamem: process-wide state (the release handler, registries), one instance per process, also when several
// shared libraries include cudamem with -fvisibility=hidden. Internal. A function-local static in an inline
// function would be one per such library; this instance has default visibility, so the dynamic linker binds
// every library to one definition (GCC and Clang emit a unique global symbol). The state type must be declared
// CUDAMEM_DETAIL_PROCESS_WIDE too (a template instantiated with a hidden type is hidden), and tests/shared_state
// checks each such state across two hidden-visibility libraries:
//   struct CUDAMEM_DETAIL_PROCESS_WIDE my_registry { ... };   ...   detail::process_wide<my_registry>().x
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
