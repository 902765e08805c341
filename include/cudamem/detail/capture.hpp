// SPDX-License-Identifier: MIT
// cudamem: keeping the library's own calls out of the user's stream captures. Internal.
#pragma once

#include <cudamem/detail/driver.hpp>

namespace cudamem::detail {

/// Switches the calling thread to relaxed stream-capture mode while it lives, then back. A global or thread-local
/// capture makes CUDA refuse "unsafe" calls (cudaMalloc, a synchronize) from other code, invalidating the capture; the
/// library's synchronous operations and allocations belong to no capture, so they run relaxed, as PyTorch's do.
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
