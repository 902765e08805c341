// SPDX-License-Identifier: MIT
// Must not compile: an event_ref to a temporary event, which is destroyed at the end of the
// statement, so the reference would dangle.
// Fix: keep the event in a variable for as long as streams wait for it.
#include <cudamem/stream.hpp>

int main() {
#ifdef CUDAMEM_EXPECT_COMPILE_ERROR
  cudamem::event_ref done = *cudamem::event::create();
  return done.synchronize() ? 0 : 1;
#else
  auto owner = cudamem::event::create();
  if (!owner) return 1;
  cudamem::event_ref done = *owner;
  return done.synchronize() ? 0 : 1;
#endif
}
