// SPDX-License-Identifier: MIT
// In a debug build (no NDEBUG) an out-of-range index is caught by CUDAMEM_ASSERT, which names the
// condition and aborts. CTest passes this test when the message appears.
#undef NDEBUG
#include <cudamem/span.hpp>

#include <csignal>
#include <cstdlib>
#include <vector>

int main() {
  // Exit normally after the abort, so that CTest judges by the message alone.
  std::signal(SIGABRT, [](int) { std::_Exit(3); });
  std::vector<int> values(4, 1);
  const cudamem::host_span<int> view(values);
  volatile std::size_t past_the_end = values.size();
  return view[past_the_end];
}
