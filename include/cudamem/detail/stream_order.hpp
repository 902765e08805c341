// SPDX-License-Identifier: MIT
// cudamem: what a caching pool needs to know about streams, behind one small interface so that the caching logic
// can be tested without a GPU (tests/host/pool.cpp drives it with made-up streams). Internal.
#pragma once

#include <cudamem/device.hpp>
#include <cudamem/registry.hpp>
#include <cudamem/stream.hpp>

#include <bit>
#include <cstdint>
#include <optional>

namespace cudamem::detail {

/// A stream as a pool keys it: cudaStreamGetId (never reused in a process) and its device.
struct stream_key {
  std::uint64_t id;
  int device;
};

/// A size class: four per power of two from 256 bytes, so a cached block is at most 25% larger than asked for.
struct size_class {
  std::size_t index;
  std::size_t bytes;
};
/// The class of a request of `bytes` (> 0). Errors: size_overflow above 2^62 bytes, which no device has.
inline result<size_class> class_of(std::size_t bytes, const char* api) noexcept {
  if (bytes <= 256) return size_class{0, 256};
  if (bytes > (std::size_t{1} << 62))
    return error(errc::size_overflow, api, "%zu bytes is larger than any device's memory", bytes);
  const int log2_ceiling = std::bit_width(bytes - 1);  // 2^(log2_ceiling - 1) < bytes <= 2^log2_ceiling
  const std::size_t base = std::size_t{1} << (log2_ceiling - 1), step = base / 4;
  const std::size_t steps = (bytes - base + step - 1) / step;  // 1 to 4
  return size_class{static_cast<std::size_t>(log2_ceiling - 9) * 4 + steps, base + steps * step};
}

/// Stream ordering through CUDA: one event per stream, recorded at every free into the pool; a block freed on one
/// stream goes to another once cudaEventQuery says that record is done.
struct cuda_stream_order {
  using marker = cudaEvent_t;  ///< null until the stream's first free

  /// The stream's key. Errors: invalid_argument (moved from); capture_active (a pool must not hand blocks to or take
  /// them from a graph capture: a replay would use them behind the pool's back); CUDA errors.
  result<stream_key> identify(stream_ref s, const char* api) const noexcept {
    if (!s.valid()) return handle_moved_from(api, "stream");
    CUDAMEM_TRY(refuse_capture(s.get(), api,
                               "a caching pool cannot serve a stream that is being captured (a graph replay would "
                               "reuse its blocks behind the pool's back); register device_pool_resource there"));
    auto where = s.device();
    if (!where) return where.error().with_api(api);
    auto id = stream_id(s, api);
    if (!id) return id.error();
    return stream_key{*id, where->get()};
  }
  /// Records `m` (created on first use, on `device`) on `s`: it completes once the work queued so far is done.
  status mark(marker& m, int device, stream_ref s) const noexcept {
    constexpr const char* api = "caching_pool::deallocate";
    if (m == nullptr) {
      auto guard = device_guard::set(device_id(device));
      if (!guard) return guard.error().with_api(api);
      CUDAMEM_TRY(check(cudaEventCreateWithFlags(&m, cudaEventDisableTiming), api, "cudaEventCreateWithFlags"));
    }
    return check(cudaEventRecord(m, s.get()), api, "cudaEventRecord");
  }
  /// Whether the last record of `m` is done; an error counts as not done (the block stays where it is).
  bool passed(marker m) const noexcept {
    auto done = query_result(cudaEventQuery(m), "caching_pool", "cudaEventQuery");
    return done && *done;
  }
  /// Blocks until the last record of `m` is done.
  void wait(marker m) const noexcept { check_release(cudaEventSynchronize(m), "cudaEventSynchronize"); }
  void destroy(marker m) const noexcept {
    if (m != nullptr) check_release(cudaEventDestroy(m), "cudaEventDestroy");
  }
  /// Where idle blocks go back to the upstream: any stream will do once their work is done. The calling thread's
  /// default stream, since it joins no one's capture; `device` is made current around it.
  template <class Free>
  void give_back(int device, Free&& free) const noexcept {
    relaxed_capture_scope relaxed;
    auto guard = device_guard::set(device_id(device));  // a failure leaves the current device: still free
    free(stream_ref::per_thread());
  }
};

}  // namespace cudamem::detail
