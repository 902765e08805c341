// SPDX-License-Identifier: MIT
// cudamem, internal: the caching pool's size classes, its lock and its stream order (tests/host/pool.cpp fakes it).
#pragma once

#include <cudamem/detail/capture.hpp>
#include <cudamem/detail/storage.hpp>
#include <cudamem/detail/sync.hpp>
#include <cudamem/device.hpp>
#include <cudamem/stream.hpp>

#include <cstdint>
#include <new>

namespace cudamem::detail {

/// A size class: four per power of two from 256 bytes, so a cached block is at most 25% larger than asked for.
struct size_class {
  std::size_t index;
  std::size_t bytes;
};
inline constexpr std::size_t size_classes = 217;  ///< indices 0 to 216: up to 2^62 bytes
inline constexpr std::size_t max_class_bytes = std::size_t{1} << 62;  ///< the largest request with a class
/// The class of a request of `bytes`, in (0, max_class_bytes].
inline constexpr size_class class_of_checked(std::size_t bytes) noexcept {
  if (bytes <= 256) return size_class{0, 256};
  const int log2_ceiling = 64 - __builtin_clzll(bytes - 1);  // 2^(log2_ceiling - 1) < bytes <= 2^log2_ceiling
  const int step_log2 = log2_ceiling - 3;  // a step is a quarter of 2^(log2_ceiling - 1): a shift, not a division
  const std::size_t base = std::size_t{1} << (log2_ceiling - 1), step = std::size_t{1} << step_log2;
  const std::size_t steps = (bytes - base + step - 1) >> step_log2;  // 1 to 4
  return size_class{static_cast<std::size_t>(log2_ceiling - 9) * 4 + steps, base + steps * step};
}
/// class_of_checked, or size_overflow above 2^62 bytes, which no device has.
inline result<size_class> class_of(std::size_t bytes, const char* api) noexcept {
  if (bytes > max_class_bytes)
    return error(errc::size_overflow, api, "%zu bytes is larger than any device's memory", bytes);
  return class_of_checked(bytes);
}
inline constexpr std::size_t size_class_bytes(std::size_t index) noexcept {  // the inverse of class_of
  return index == 0 ? 256 : (std::size_t{1} << ((index - 1) / 4 + 6)) * (4 + (index - 1) % 4 + 1);
}

/// Streams through CUDA's driver entry points (no runtime call on the pool's hot path), known by cudaStreamGetId; an
/// event per stream marks its frees, recorded only on the stream of a call in progress. Failed records go to the
/// release handler, from the pool with no lock held (queries: not done).
struct cuda_stream_order {
  using marker = cudaEvent_t;  ///< null until the stream's first mark

  cuda_stream_order() noexcept : own_(new(std::nothrow) own_streams) {}
  cuda_stream_order(cuda_stream_order&&) noexcept = default;

  /// Relaxed capture mode while the result lives: one switch around a whole trim or release.
  static relaxed_capture_scope relaxed() noexcept { return {}; }
  /// Moved from: invalid_argument; capturing: capture_active.
  status usable(stream_ref s, const char* api) const noexcept {
    if (cudaStreamCaptureStatus capture{};
        s.valid() && driver_capture_status(s.get(), capture) && capture == cudaStreamCaptureStatusNone) [[likely]]
      return {};
    if (!s.valid()) return handle_moved_from(api, "stream");
    return refuse_capture(s.get(), api,
                          "a caching pool cannot serve a stream that is being captured (a graph replay would reuse "
                          "its blocks behind the pool's back); register device_pool_resource there");
  }
  // Of a stream not capturing, for a reference that carries no id (from_native_handle, or adopted while capturing).
  result<std::uint64_t> id(stream_ref s, const char* api) const noexcept {
    unsigned long long id = 0;
    return check(stream_unique_id(s.get(), &id), api, "cudaStreamGetId").transform([&] { return std::uint64_t{id}; });
  }
  result<int> device(stream_ref s, const char* api) const noexcept {
    return s.device().transform(&device_id::get).transform_error([api](const error& e) { return e.with_api(api); });
  }
  /// The device of block `p` (asked only by a pool that has served several devices).
  result<int> device_of(void* p) const noexcept {
    cudaPointerAttributes attributes{};
    CUDAMEM_TRY(check(cudaPointerGetAttributes(&attributes, p), "caching_pool", "cudaPointerGetAttributes"));
    return attributes.device;
  }
  /// The current device (-1 if CUDA cannot say).
  int current_device() const noexcept { return cudamem::current_device().transform(&device_id::get).value_or(-1); }
  /// Records `m` (created on first use, on `device`) on `s`, the stream of the caller's allocate or deallocate (live,
  /// not capturing): it completes once the work queued so far is done. It runs under the stream state's lock, so it
  /// never calls the release handler: a failed switch back to the caller's device is returned, as CUDA's errors are,
  /// and the pool reports it unlocked.
  status mark(marker& m, int device, stream_ref s) const noexcept {
    if (m == nullptr) CUDAMEM_TRY(create_marker(m, device));
    return check(record_event(m, s.get()), "caching_pool", "cudaEventRecord");
  }
  /// mark() on stream `id` (at `handle`) while a stream object owns it, so that it cannot end meanwhile, and only if it
  /// is not capturing (the record would join the capture): true once recorded, false where not (its blocks then wait
  /// for the device); CUDA's errors, which the caller reports with no lock held.
  result<bool> mark_live(marker& m, int device, cudaStream_t handle, std::uint64_t id) const noexcept {
    return while_stream_lives(id, [&]() -> result<bool> {
      cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
      if (!driver_capture_status(handle, capture) || capture != cudaStreamCaptureStatusNone) return false;
      return mark(m, device, stream_ref::from_native_handle(handle, device_id(device))).transform([] { return true; });
    });
  }
  /// Whether the last record of `m` is done; an error counts as not done (the block stays where it is).
  bool passed(marker m) const noexcept {
    return query_result(query_event(m), "caching_pool", "cudaEventQuery").value_or(false);
  }
  /// Waits for the last record of `m`; false if CUDA refused.
  bool wait(marker m) const noexcept { return succeeded(cudaEventSynchronize(m), "cudaEventSynchronize"); }
  /// Waits for all work on `device` (-1: the current one), within relaxed(); false if CUDA refused.
  bool wait_device(int device) const noexcept {
    auto guard = select(device);
    if (guard && !*guard) return false;
    return succeeded(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  void destroy(marker m) const noexcept {
    if (m != nullptr) check_release(cudaEventDestroy(m), "cudaEventDestroy");
  }
  /// `f()` with `device` (-1: the current one) current. If that fails, a result-returning `f` is not called and the
  /// error is returned; any other is called anyway (a free beats a leak) and the release handler hears why.
  template <class F>
  auto on_device(int device, F&& f) const noexcept -> decltype(f()) {
    auto guard = select(device);
    if (guard && !*guard) {
      if constexpr (is_result<decltype(f())>) return guard->error().with_api("caching_pool");
      else report_release_failure(guard->error());
    }
    return f();
  }
  /// `free` of a finished block on the pool's own non-blocking stream of `device` (made at first use, `device`
  /// current): nobody else knows it, so it is never captured, whatever the caller's threads capture (the per-thread
  /// default stream included). False, the release handler told why, where there is none: the block stays cached.
  template <class Free>
  bool give_back(int device, Free&& free) const noexcept {
    auto guard = select(device);
    if (guard && !*guard) {
      report_release_failure(guard->error().with_api("caching_pool"));
      return false;
    }
    auto own = own_stream(device < 0 ? current_device() : device);
    if (!own) {
      report_release_failure(own.error());
      return false;
    }
    free(*own);
    return true;
  }

 private:
  struct own_streams {  // the pool's streams, by device ordinal; destroyed with the pool
    mutex lock;
    vec<cudaStream_t> by_device;
    own_streams() = default;
    own_streams(const own_streams&) = delete;
    own_streams& operator=(const own_streams&) = delete;
    ~own_streams() {
      for (cudaStream_t s : by_device)
        if (s != nullptr) check_release(cudaStreamDestroy(s), "cudaStreamDestroy");
    }
  };
  // The pool's stream of `device`, which must be current. Made in relaxed capture mode: a capture elsewhere stays.
  result<stream_ref> own_stream(int device) const noexcept {
    constexpr const char* api = "caching_pool";
    if (!own_ || device < 0) return error(errc::out_of_memory, api, "no stream to give blocks back on");
    const lock_guard<mutex> lock(own_->lock);
    auto& by_device = own_->by_device;
    if (by_device.size() <= std::size_t(device)) by_device.resize(std::size_t(device) + 1, nullptr);
    cudaStream_t& s = by_device[std::size_t(device)];
    if (s == nullptr) {
      relaxed_capture_scope relaxed;
      CUDAMEM_TRY(check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), api, "cudaStreamCreateWithFlags"));
    }
    return stream_ref::from_native_handle(s, device_id(device));
  }
  owner<own_streams> own_;

  static maybe<result<device_guard>> select(int device) noexcept {  // none for -1
    if (device < 0) return {};
    return device_guard::set(device_id(device));
  }
  static status create_marker(marker& m, int device) noexcept {  // on `device`; the current device stays
    constexpr const char* api = "caching_pool";
    int previous = 0;
    CUDAMEM_TRY(check(cudaGetDevice(&previous), api, "cudaGetDevice"));
    if (previous != device) CUDAMEM_TRY(check(cudaSetDevice(device), api, "cudaSetDevice"));
    const status made = check(cudaEventCreateWithFlags(&m, cudaEventDisableTiming), api, "cudaEventCreateWithFlags");
    if (previous != device) CUDAMEM_TRY(check(cudaSetDevice(previous), api, "cudaSetDevice"));
    return made;
  }
  static bool succeeded(cudaError_t code, const char* cuda_call) noexcept {
    check_release(code, cuda_call);
    return code == cudaSuccess;
  }
};

}  // namespace cudamem::detail
