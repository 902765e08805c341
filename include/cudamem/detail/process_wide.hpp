// cudamem: process-wide state (the release handler, registries): one instance per process, also when
// several shared libraries include cudamem and are built with -fvisibility=hidden. Internal.
//
// A function-local static in an inline function is one object per shared library when the library
// hides its symbols: each library gets its own copy, and a handler set through one is not seen by
// another. The instance below has default visibility instead, so that the dynamic linker binds every
// library to one definition (GCC and Clang emit it as a unique global symbol).
//
//   struct CUDAMEM_DETAIL_PROCESS_WIDE my_registry { ... };    // default visibility: required
//   detail::process_wide<my_registry>().something ...
//
// The state type itself must be declared CUDAMEM_DETAIL_PROCESS_WIDE: a template instantiated with a
// hidden type is hidden, whatever the template says. tests/shared_state checks each such state across
// two hidden-visibility libraries; a new one adds itself there.
#pragma once

#include <new>
#include <type_traits>

#if defined(__GNUC__) || defined(__clang__)
#define CUDAMEM_DETAIL_PROCESS_WIDE __attribute__((visibility("default")))
#else
#define CUDAMEM_DETAIL_PROCESS_WIDE
#endif

namespace cudamem::detail {

/// The one `State` of the process, value-initialized on first use (thread-safe) and never destroyed:
/// objects with static storage duration in any library may still use it while the process exits.
/// `State` must be declared CUDAMEM_DETAIL_PROCESS_WIDE and its layout must agree between the
/// libraries that share it (the same cudamem version).
template <class State>
CUDAMEM_DETAIL_PROCESS_WIDE State& process_wide() noexcept {
  static_assert(std::is_nothrow_default_constructible_v<State>, "process-wide state must be nothrow-constructible");
  alignas(State) static unsigned char storage[sizeof(State)];
  static State* const instance = ::new (static_cast<void*>(storage)) State();
  return *instance;
}

}  // namespace cudamem::detail
