// SPDX-License-Identifier: MIT
// Must not compile: a view of a temporary registration. The registration ends (the memory is
// unregistered) at the end of the statement, so the pinned view would claim page-locked memory that
// is not.
// Fix: keep the registration in a variable for as long as the view is used.
#include <cudamem/host_register.hpp>

#include <vector>

int main() {
  std::vector<float> values(16, 1.0f);
#ifdef CUDAMEM_EXPECT_COMPILE_ERROR
  cudamem::pinned_span<float> pinned = *cudamem::host_register(cudamem::span(values));
#else
  auto registration = cudamem::host_register(cudamem::span(values));
  if (!registration) return 1;
  cudamem::pinned_span<float> pinned = *registration;
#endif
  return pinned.size() == 16 ? 0 : 1;
}
