// SPDX-License-Identifier: MIT
// One side of the shared-state test, compiled by nvcc with hidden visibility.
#include "shared.hpp"

cudamem::release_handler library_a_set_release_handler(cudamem::release_handler handler) {
  return cudamem::set_release_handler(handler);
}
void library_a_report_release_failure() {
  cudamem::report_release_failure(cudamem::error(cudaErrorInvalidValue, nullptr, "cudaFree"));
}
namespace {
struct library_a_resource {
  using kind = cudamem::device;
  cudamem::result<void*> allocate(cudamem::stream_ref, std::size_t, std::size_t) noexcept { return nullptr; }
  void deallocate(cudamem::stream_ref, void*, std::size_t, std::size_t) noexcept {}
} resource;
}  // namespace
std::size_t library_a_register(std::uint64_t id) {
  auto slot = cudamem::detail::allocators().insert(id, 0x5eed00, resource);
  return slot ? *slot : ~std::size_t{0};
}
void library_a_unregister(std::size_t slot, std::uint64_t id) { cudamem::detail::allocators().erase(slot, id); }
void library_a_set_counter(int value) { cudamem::detail::process_wide<shared_state::counter>().value = value; }
void library_a_take_peer_guard(int accessor, int owner) {
  using cudamem::device_id;
  (void)cudamem::detail::process_wide<cudamem::detail::peer_table>().acquire(device_id(accessor), device_id(owner),
                                                                             shared_state::no_switch);
}
shared_state::default_resources library_a_default_resources() { return shared_state::default_resources_here(); }
