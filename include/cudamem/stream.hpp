// SPDX-License-Identifier: MIT
/// \file
/// Streams and events: owning, move-only `stream` and `event`, and non-owning, copyable `stream_ref` and `event_ref`.
///
///     stream_ref: legacy(), per_thread(), from_native_handle(h [, device_id]); get(), valid(), device(),
///                 synchronize() (blocks), ready(), wait(event_ref); trivially copyable; not from int or nullptr
///     event_ref:  from_native_handle(h); get(), valid(), record(stream_ref), synchronize(), ready()
///     stream::create([device_id,] stream_options), stream::adopt(h, device_id); ref(), release()   owning
///     event::create([device_id,] event_options); ref(); event::elapsed_ms(start, end)              owning
///     Owners are move-only and convert to their ref only as lvalues: a ref of a temporary would dangle.
#pragma once

#include <cudamem/detail/capture.hpp>
#include <cudamem/detail/driver.hpp>
#include <cudamem/detail/live_streams.hpp>
#include <cudamem/detail/unique_handle.hpp>
#include <cudamem/device.hpp>

#include <cstddef>
#include <cstdint>

namespace cudamem {

class stream_ref;
class event_ref;

namespace detail {
/// A moved-from stream's handle: one CUDA rejects (null is the legacy stream), checked by every library call.
inline cudaStream_t invalid_stream() noexcept { return reinterpret_cast<cudaStream_t>(~std::uintptr_t{0}); }
inline bool is_default_stream(cudaStream_t handle) noexcept {  // always the current device's
  return handle == nullptr || handle == cudaStreamLegacy || handle == cudaStreamPerThread;
}
inline error handle_moved_from(const char* api, const char* what) noexcept {
  return error(errc::invalid_argument, api, "the %s was moved from", what);
}
/// A query's code as done (true), not yet (false) or an error; not-ready keeps CUDA's last error (maybe the caller's).
inline result<bool> query_result(cudaError_t code, const char* api, const char* cuda_call) noexcept {
  if (code == cudaErrorNotReady) return false;
  if (auto s = check(code, api, cuda_call); !s) return s.error();
  return true;
}
/// capture_active (saying `why`) when work on `handle` joins a capture: its own, or a blocking stream's if legacy.
inline status refuse_capture(cudaStream_t handle, const char* api, const char* why) noexcept {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (!driver_capture_status(handle, capture)) {
    const cudaError_t earlier = cudaPeekAtLastError(), code = cudaStreamIsCapturing(handle, &capture);
    if (code == cudaErrorStreamCaptureImplicit) {
      if (earlier == cudaSuccess) (void)cudaGetLastError();  // the query's own error; a user's earlier one stays
      capture = cudaStreamCaptureStatusActive;
    } else {
      CUDAMEM_TRY(check(code, api, "cudaStreamIsCapturing"));
    }
  }
  if (capture != cudaStreamCaptureStatusNone) return error(errc::capture_active, api, "%s", why);
  return {};
}
struct stream_handle {  // what a stream owns; a moved-from stream holds invalid_stream()
  using type = cudaStream_t;
  static type empty() noexcept { return invalid_stream(); }
  static void release(type handle) noexcept { check_release(cudaStreamDestroy(handle), "cudaStreamDestroy"); }
};
struct event_handle {  // what an event owns; a moved-from event holds null
  using type = cudaEvent_t;
  static type empty() noexcept { return nullptr; }
  static void release(type handle) noexcept { check_release(cudaEventDestroy(handle), "cudaEventDestroy"); }
};
inline constexpr unsigned long long no_stream_id = ~0ull;  // a stream_ref not made by a stream object
/// cudaStreamGetId of `handle` into `id`, through the driver, unless it is capturing (then success, `id` untouched:
/// CUDA does not name a capturing stream). A failed query's error is cleared unless sticky; a user's earlier one stays.
inline cudaError_t id_unless_capturing(cudaStream_t handle, unsigned long long& id) noexcept {
  const cudaError_t earlier = cudaPeekAtLastError();
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  cudaError_t code = stream_capture_status(handle, &capture);
  if (code == cudaSuccess && capture == cudaStreamCaptureStatusNone) code = stream_unique_id(handle, &id);
  if (code != cudaSuccess && earlier == cudaSuccess && !error::is_sticky_status(code)) (void)cudaGetLastError();
  return code;
}
struct stream_identity;  // what the caching pool and the allocator registry read of a stream_ref
}  // namespace detail

/// A non-owning reference to a CUDA stream and, where known, its device (CUDA cannot name a capturing stream's); the
/// default streams, legacy() (it synchronizes with blocking streams) and the calling thread's per_thread(), are the
/// current device's. A stream object's ref() also carries its stream's cudaStreamGetId, so the caching pool and the
/// allocator registry know it without asking CUDA. Members fail with invalid_argument after a move, and CUDA's errors.
class stream_ref {
 public:
  stream_ref() noexcept = default;  ///< The legacy default stream of the current device, as legacy().
  stream_ref(int) = delete;  ///< Refused: an integer is not a stream; write stream_ref::legacy().
  stream_ref(std::nullptr_t) = delete;  ///< Refused: write stream_ref::legacy() or stream_ref::per_thread().
  /// Refers to a handle the caller keeps alive (null: the build's default stream); device() asks CUDA. Not checked.
  [[nodiscard]] static stream_ref from_native_handle(cudaStream_t handle) noexcept { return stream_ref(handle); }
  /// As above, of device `id` (ignored for a default stream); preferred: CUDA cannot name a capturing stream's.
  [[nodiscard]] static stream_ref from_native_handle(cudaStream_t handle, device_id id) noexcept {
    return stream_ref(handle, id.get());
  }
  [[nodiscard]] static stream_ref legacy() noexcept { return stream_ref(cudaStreamLegacy); }  ///< Legacy default.
  [[nodiscard]] static stream_ref per_thread() noexcept { return stream_ref(cudaStreamPerThread); }  ///< Per-thread.
  [[nodiscard]] cudaStream_t get() const noexcept { return handle_; }  ///< The raw handle (after a move: invalid).
  [[nodiscard]] bool valid() const noexcept { return handle_ != detail::invalid_stream(); }  ///< False after a move.
  /// The device given, the current one for a default stream, else CUDA's. Errors: capture_active (capturing, none
  /// given).
  [[nodiscard]] result<device_id> device() const noexcept {
    if (device_ != unknown_device && valid() && !detail::is_default_stream(handle_)) [[likely]]
      return device_id(device_);
    return device_slow();
  }
  /// Blocks until all queued work is done, leaving a capture elsewhere (any thread or mode) intact. Errors: also
  /// earlier work's; capture_active if its work joins a graph capture, which waiting would invalidate.
  [[nodiscard]] status synchronize() const noexcept {
    CUDAMEM_TRY(usable_outside_capture("stream::synchronize"));
    detail::relaxed_capture_scope relaxed;
    return detail::check(cudaStreamSynchronize(handle_), "stream::synchronize", "cudaStreamSynchronize");
  }
  /// Whether all queued work is done; does not block; not-ready keeps CUDA's last error. Errors: as synchronize().
  [[nodiscard]] result<bool> ready() const noexcept {
    CUDAMEM_TRY(usable_outside_capture("stream::ready"));
    detail::relaxed_capture_scope relaxed;
    return detail::query_result(cudaStreamQuery(handle_), "stream::ready", "cudaStreamQuery");
  }
  [[nodiscard]] status wait(event_ref e) const noexcept;  ///< Later work waits for `e`'s last record() (any device).
  /// Equal when the handles are, whether the device is known or not (the legacy stream and null are unequal).
  friend bool operator==(stream_ref a, stream_ref b) noexcept { return a.handle_ == b.handle_; }

 private:
  static constexpr int unknown_device = cudaInvalidDeviceId;
  result<device_id> device_slow() const noexcept {
    constexpr const char* api = "stream::device";
    if (!valid()) return detail::handle_moved_from(api, "stream");
    if (detail::is_default_stream(handle_)) {
      auto current = current_device();
      return current ? current : current.error().with_api(api);
    }
    CUDAMEM_TRY(detail::refuse_capture(handle_, api,
                                       "CUDA cannot name the device of a capturing stream without invalidating the "
                                       "capture; use stream_ref::from_native_handle(handle, device)"));
    int ordinal = 0;
    CUDAMEM_TRY(detail::check(cudaStreamGetDevice(handle_, &ordinal), api, "cudaStreamGetDevice"));
    return device_id(ordinal);
  }
  explicit stream_ref(cudaStream_t handle, int device = unknown_device,
                      unsigned long long id = detail::no_stream_id) noexcept
      : handle_(handle), device_(device), id_(id) {}
  [[nodiscard]] status usable_outside_capture(const char* api) const noexcept {
    if (!valid()) return detail::handle_moved_from(api, "stream");
    return detail::refuse_capture(
        handle_, api,
        "the stream's work belongs to a graph capture in progress; waiting for it would invalidate the capture");
  }
  friend class stream;
  friend struct detail::stream_identity;
  cudaStream_t handle_ = cudaStreamLegacy;
  int device_ = unknown_device;  // the ordinal, when known
  // cudaStreamGetId of a stream object's stream (never repeated in a process, unlike handles), else no_stream_id
  unsigned long long id_ = detail::no_stream_id;
};

/// A non-owning reference to a CUDA event; an event converts to it, never the reverse. Errors as stream_ref's.
class event_ref {
 public:
  /// Refers to a handle the caller keeps alive. Not checked.
  [[nodiscard]] static event_ref from_native_handle(cudaEvent_t handle) noexcept { return event_ref(handle); }
  [[nodiscard]] cudaEvent_t get() const noexcept { return handle_; }  ///< The raw handle; null after a move.
  [[nodiscard]] bool valid() const noexcept { return handle_ != nullptr; }  ///< False after a move.
  /// Captures the work queued on `s` (of the event's device) so far, replacing an earlier record; does not block.
  [[nodiscard]] status record(stream_ref s) const noexcept {
    if (!valid()) return detail::handle_moved_from("event::record", "event");
    if (!s.valid()) return detail::handle_moved_from("event::record", "stream");
    return detail::check(cudaEventRecord(handle_, s.get()), "event::record", "cudaEventRecord");
  }
  /// Blocks until the recorded work is done (at once if none); a capture elsewhere is left intact.
  [[nodiscard]] status synchronize() const noexcept {
    if (!valid()) return detail::handle_moved_from("event::synchronize", "event");
    detail::relaxed_capture_scope relaxed;
    return detail::check(cudaEventSynchronize(handle_), "event::synchronize", "cudaEventSynchronize");
  }
  /// Whether the recorded work has finished (true if none); does not block. Not-ready as in stream_ref::ready.
  [[nodiscard]] result<bool> ready() const noexcept {
    if (!valid()) return detail::handle_moved_from("event::ready", "event");
    detail::relaxed_capture_scope relaxed;
    return detail::query_result(cudaEventQuery(handle_), "event::ready", "cudaEventQuery");
  }
  friend bool operator==(event_ref a, event_ref b) noexcept { return a.handle_ == b.handle_; }  ///< Same handle.

 private:
  friend class event;
  explicit event_ref(cudaEvent_t handle) noexcept : handle_(handle) {}
  cudaEvent_t handle_;
};
inline status stream_ref::wait(event_ref e) const noexcept {
  if (!valid()) return detail::handle_moved_from("stream::wait", "stream");
  if (!e.valid()) return detail::handle_moved_from("stream::wait", "event");
  return detail::check(cudaStreamWaitEvent(handle_, e.get(), 0), "stream::wait", "cudaStreamWaitEvent");
}

/// Options for stream::create; the defaults make a non-blocking stream of default priority.
struct stream_options {
  bool non_blocking = true;  ///< The synchronous copies and fills (on the legacy stream) do not wait for its work.
  int priority = 0;  ///< Lower numbers are higher priority; CUDA clamps it to the device's range.
};
/// An owning CUDA stream on a device; move-only. Destroying it does not wait; failures go to the release handler.
class stream {
 public:
  /// Creates a stream on `id` (cudaStreamCreateWithPriority); the current device stays. Errors: out_of_range; CUDA's.
  [[nodiscard]] static result<stream> create(device_id id, stream_options options = {}) noexcept {
    auto guard = device_guard::set(id);
    if (!guard) return guard.error().with_api("stream::create");
    cudaStream_t handle = nullptr;
    const unsigned flags = options.non_blocking ? cudaStreamNonBlocking : cudaStreamDefault;
    const cudaError_t code = cudaStreamCreateWithPriority(&handle, flags, options.priority);
    CUDAMEM_TRY(detail::check(code, "stream::create", "cudaStreamCreateWithPriority"));
    stream made(handle, id, detail::no_stream_id);  // destroys the stream if the id cannot be had
    CUDAMEM_TRY(detail::check(detail::stream_unique_id(handle, &made.id_), "stream::create", "cudaStreamGetId"));
    detail::stream_lives(made.id_, true);
    return made;
  }
  /// As create(device_id, stream_options), on the current device.
  [[nodiscard]] static result<stream> create(stream_options options = {}) noexcept {
    auto id = current_device();
    return id ? create(*id, options) : id.error().with_api("stream::create");
  }
  /// Takes ownership of a handle created on `id`; not checked. Errors: invalid_argument for a default stream (never
  /// owned). It records the stream's id if CUDA names it (not while it is capturing, nor for a handle CUDA rejects):
  /// without one, the caching pool and the allocator registry ask CUDA as for a from_native_handle reference.
  [[nodiscard]] static result<stream> adopt(cudaStream_t handle, device_id id) noexcept {
    if (detail::is_default_stream(handle))
      return error(errc::invalid_argument, "stream::adopt", "a default stream cannot be owned");
    unsigned long long stream_id = detail::no_stream_id;
    if (detail::id_unless_capturing(handle, stream_id) != cudaSuccess) stream_id = detail::no_stream_id;
    return stream(handle, id, stream_id);
  }
  /// A reference that knows this stream's device; it must not outlive the stream. Invalid after a move.
  [[nodiscard]] stream_ref ref() const& noexcept { return stream_ref(handle_.get(), device_.get(), id_); }
  stream_ref ref() const&& = delete;  ///< Refused: it would dangle once the statement ends.
  operator stream_ref() const& noexcept { return ref(); }  ///< As ref().
  operator stream_ref() const&& = delete;  ///< Refused, as ref() of a temporary.
  [[nodiscard]] cudaStream_t get() const noexcept { return handle_.get(); }  ///< The raw handle, as stream_ref's.
  [[nodiscard]] device_id device() const noexcept { return device_; }  ///< Created on, or given to adopt.
  [[nodiscard]] bool valid() const noexcept { return handle_.valid(); }  ///< False after a move or release().
  /// Gives up ownership: the caller destroys the returned handle. The stream is moved-from after.
  [[nodiscard]] cudaStream_t release() noexcept {
    detail::stream_lives(std::exchange(id_, detail::no_stream_id), false);
    return handle_.release();
  }
  /// Takes over `other`'s stream, leaving `other` moved-from.
  stream(stream&& other) noexcept
      : handle_(std::move(other.handle_)),
        device_(other.device_),
        id_(std::exchange(other.id_, detail::no_stream_id)) {}
  /// Destroys this stream (as the destructor), then takes over `other`'s.
  stream& operator=(stream&& other) noexcept {
    if (this != &other) {
      detail::stream_lives(std::exchange(id_, detail::no_stream_id), false);  // before its handle is destroyed
      handle_ = std::move(other.handle_);
      device_ = other.device_;
      id_ = std::exchange(other.id_, detail::no_stream_id);
    }
    return *this;
  }
  /// Destroys the stream (cudaStreamDestroy; it does not wait), once nothing of the library's can be touching it.
  ~stream() { detail::stream_lives(id_, false); }
  [[nodiscard]] status synchronize() const noexcept { return ref().synchronize(); }  ///< As stream_ref's: blocks.
  [[nodiscard]] result<bool> ready() const noexcept { return ref().ready(); }  ///< As stream_ref's.
  [[nodiscard]] status wait(event_ref e) const noexcept { return ref().wait(e); }  ///< As stream_ref's.

 private:
  stream(cudaStream_t handle, device_id id, unsigned long long stream_id) noexcept
      : handle_(handle), device_(id), id_(stream_id) {
    detail::stream_lives(stream_id, true);
  }
  detail::unique_handle<detail::stream_handle> handle_;
  device_id device_;
  unsigned long long id_;  // cudaStreamGetId's, or no_stream_id (adopted while capturing)
};

/// Options for event::create.
struct event_options {
  bool timing = true;  ///< Record timestamps, for elapsed_ms; false (cudaEventDisableTiming) is cheaper.
  bool blocking_sync = false;  ///< Block the thread in synchronize() (cudaEventBlockingSync) instead of spinning.
};
/// An owning CUDA event on a device, as stream is (cudaEventDestroy); it records its own device's streams, any wait.
class event {
 public:
  /// Creates an event on `id` (cudaEventCreateWithFlags); the current device stays. Errors: out_of_range; CUDA's.
  [[nodiscard]] static result<event> create(device_id id, event_options options = {}) noexcept {
    auto guard = device_guard::set(id);
    if (!guard) return guard.error().with_api("event::create");
    const unsigned flags = (options.timing ? cudaEventDefault : cudaEventDisableTiming) |
                           (options.blocking_sync ? cudaEventBlockingSync : 0u);
    cudaEvent_t handle = nullptr;
    CUDAMEM_TRY(detail::check(cudaEventCreateWithFlags(&handle, flags), "event::create", "cudaEventCreateWithFlags"));
    return event(handle, id);
  }
  /// As create(device_id, event_options), on the current device.
  [[nodiscard]] static result<event> create(event_options options = {}) noexcept {
    auto id = current_device();
    return id ? create(*id, options) : id.error().with_api("event::create");
  }
  [[nodiscard]] event_ref ref() const& noexcept { return event_ref(handle_.get()); }  ///< Must not outlive the event.
  event_ref ref() const&& = delete;  ///< Refused: it would dangle once the statement ends.
  operator event_ref() const& noexcept { return ref(); }  ///< As ref().
  operator event_ref() const&& = delete;  ///< Refused, as ref() of a temporary.
  [[nodiscard]] cudaEvent_t get() const noexcept { return handle_.get(); }  ///< The raw handle; null after a move.
  [[nodiscard]] device_id device() const noexcept { return device_; }  ///< The device it was created on.
  [[nodiscard]] bool valid() const noexcept { return handle_.valid(); }  ///< False after a move.
  [[nodiscard]] status record(stream_ref s) const noexcept { return ref().record(s); }  ///< As event_ref's.
  [[nodiscard]] status synchronize() const noexcept { return ref().synchronize(); }  ///< As event_ref's: blocks.
  [[nodiscard]] result<bool> ready() const noexcept { return ref().ready(); }  ///< As event_ref's.
  /// Milliseconds from `start` to `end` (recorded, with timing); does not block. Errors: cudaErrorNotReady; CUDA's.
  [[nodiscard]] static result<float> elapsed_ms(event_ref start, event_ref end) noexcept {
    constexpr const char* api = "event::elapsed_ms";
    if (!start.valid() || !end.valid()) return detail::handle_moved_from(api, "event");
    float ms = 0.0f;
    CUDAMEM_TRY(detail::check(cudaEventElapsedTime(&ms, start.get(), end.get()), api, "cudaEventElapsedTime"));
    return ms;
  }

 private:
  event(cudaEvent_t handle, device_id id) noexcept : handle_(handle), device_(id) {}
  detail::unique_handle<detail::event_handle> handle_;
  device_id device_;
};

}  // namespace cudamem
