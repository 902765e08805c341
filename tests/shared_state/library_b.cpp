// SPDX-License-Identifier: MIT
// The other side of the shared-state test, compiled by g++ with hidden visibility.
#include "shared.hpp"

cudamem::release_handler library_b_set_release_handler(cudamem::release_handler handler) {
  return cudamem::set_release_handler(handler);
}
void library_b_report_release_failure() {
  cudamem::report_release_failure(cudamem::error(cudaErrorInvalidDevicePointer, nullptr, "cudaFreeAsync"));
}
bool library_b_has_allocator(std::uint64_t id) {
  cudamem::detail::allocator_table::entry found{cudamem::default_resource<cudamem::device>(true), 0};
  return cudamem::detail::allocators().find_id(id, found);
}
int library_b_counter() { return cudamem::detail::process_wide<shared_state::counter>().value; }
bool library_b_peer_held(int accessor, int owner) {
  return cudamem::detail::peer_access_held(cudamem::device_id(accessor), cudamem::device_id(owner));
}
void library_b_drop_peer_guard(int accessor, int owner) {
  using cudamem::device_id;
  cudamem::detail::process_wide<cudamem::detail::peer_table>().release(device_id(accessor), device_id(owner),
                                                                       shared_state::no_switch);
}
shared_state::default_resources library_b_default_resources() { return shared_state::default_resources_here(); }
