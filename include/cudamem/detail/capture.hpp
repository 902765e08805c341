// SPDX-License-Identifier: MIT
// cudamem: keeping the library's own calls out of the user's stream captures. Internal.
#pragma once

#include <cudamem/detail/driver.hpp>

namespace cudamem::detail {

/// Relaxed stream-capture mode for the calling thread while it lives: the library's synchronous calls belong to no
/// capture, and a global or thread-local one would refuse them as unsafe, invalidating itself (PyTorch does the same).
class relaxed_capture_scope {
 public:
  relaxed_capture_scope() noexcept { (void)exchange_capture_mode(&mode_); }
  ~relaxed_capture_scope() { (void)exchange_capture_mode(&mode_); }
  relaxed_capture_scope(const relaxed_capture_scope&) = delete;
  relaxed_capture_scope& operator=(const relaxed_capture_scope&) = delete;

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
};

}  // namespace cudamem::detail
