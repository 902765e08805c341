// SPDX-License-Identifier: MIT
// Drives the shared-state test: a handler installed through one library must receive the failures
// reported through the other, and through this program; a state written by one must be read by the
// other, and a peer guard counted through one must be seen through the other. Exits 0 when it
// holds, else says what was not shared.
#include "shared.hpp"

#include <cstdio>
#include <initializer_list>

namespace {
int handled = 0;
cudaError_t last_status = cudaSuccess;
void counting_handler(const cudamem::error& failure) noexcept {
  ++handled;
  last_status = failure.cuda_status();
}

bool expect(bool holds, const char* what) {
  if (!holds) std::fprintf(stderr, "shared_state: %s\n", what);
  return holds;
}
}  // namespace

int main() {
  bool ok = true;
  library_a_set_release_handler(&counting_handler);
  library_b_report_release_failure();
  ok &= expect(handled == 1 && last_status == cudaErrorInvalidDevicePointer,
               "a release handler installed in library A did not receive library B's failure");
  cudamem::report_release_failure(cudamem::error(cudaErrorInvalidValue, nullptr, "cudaFree"));
  ok &= expect(handled == 2, "a release handler installed in library A did not receive the program's failure");

  // Restoring the default through B is seen by A: A's report no longer reaches the handler.
  const cudamem::release_handler previous = library_b_set_release_handler(nullptr);
  ok &= expect(previous == &counting_handler, "library B did not see the handler library A installed");
  library_b_set_release_handler(&counting_handler);
  library_a_report_release_failure();
  ok &= expect(handled == 3 && last_status == cudaErrorInvalidValue,
               "a release handler installed in library B did not receive library A's failure");
  cudamem::set_release_handler(nullptr);

  library_a_set_counter(42);
  ok &= expect(library_b_counter() == 42, "library A and library B hold different process_wide<> instances");
  ok &= expect(cudamem::detail::process_wide<shared_state::counter>().value == 42,
               "the program and the libraries hold different process_wide<> instances");

  // The peer registry: a guard counted through A is seen by B and by the program, and dropped through B.
  library_a_take_peer_guard(1, 0);
  ok &= expect(library_b_peer_held(1, 0), "library B does not see the peer guard library A took");
  ok &= expect(cudamem::detail::peer_access_held(cudamem::device_id(1), cudamem::device_id(0)),
               "the program does not see the peer guard library A took");
  ok &= expect(!library_b_peer_held(0, 1), "a guard of one direction shows in the other");
  library_b_drop_peer_guard(1, 0);
  ok &= expect(!cudamem::detail::peer_access_held(cudamem::device_id(1), cudamem::device_id(0)),
               "a peer guard dropped through library B is still held");

  // The allocator registry (made-up stream id): registered through A, seen by B and by the program.
  constexpr std::uint64_t stream_id = 0x5eed;
  const std::size_t slot = library_a_register(stream_id);
  ok &= expect(slot != ~std::size_t{0}, "library A could not register an allocator");
  ok &= expect(library_b_has_allocator(stream_id), "library B does not see the allocator library A registered");
  ok &= expect(!cudamem::detail::allocators().empty(), "the program does not see the allocator library A registered");
  library_a_unregister(slot, stream_id);
  ok &= expect(!library_b_has_allocator(stream_id), "library B still sees an allocator library A unregistered");

  // The default resources: one object per kind in the process, whichever library (or the program) asks.
  const shared_state::default_resources from_a = library_a_default_resources(), from_b = library_b_default_resources(),
                                        here = shared_state::default_resources_here();
  for (const shared_state::default_resources* other : {&from_b, &here}) {
    ok &= expect(from_a.host == other->host, "default_resource<host>() differs between libraries");
    ok &= expect(from_a.pinned == other->pinned, "default_resource<pinned>() differs between libraries");
    ok &= expect(from_a.managed == other->managed, "default_resource<managed>() differs between libraries");
    ok &= expect(from_a.device == other->device, "default_resource<device>() differs between libraries");
    ok &= expect(from_a.device_stream_ordered == other->device_stream_ordered,
                 "default_resource<device>(true) differs between libraries");
    for (int k = 0; k < 5; ++k)
      ok &= expect(from_a.objects[k] == other->objects[k], "a built-in resource object lives at two addresses");
  }
  ok &= expect(!(from_a.device == from_a.device_stream_ordered), "the two default device resources are one object");
  if (ok)
    std::printf(
        "shared_state: one release handler, one process_wide<> state, one peer registry, one allocator registry "
        "and one set of default resources across both libraries\n");
  return ok ? 0 : 1;
}
