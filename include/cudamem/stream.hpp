/// \file
/// Streams and events, each on a device: owning `stream` and `event`, non-owning `stream_ref` and
/// `event_ref`.
///
///     class stream_ref {                  // non-owning, trivially copyable; compared by handle
///       stream_ref();                     // = legacy()
///       static stream_ref legacy();       // default streams: on the current device
///       static stream_ref per_thread();
///       static stream_ref from_native_handle(cudaStream_t);             // device asked when needed
///       static stream_ref from_native_handle(cudaStream_t, device_id);  // device known
///       cudaStream_t get(); bool valid(); result<device_id> device();
///       status synchronize(); result<bool> ready(); status wait(event_ref);
///     };
///     class stream {                      // owning, move-only; an lvalue converts to stream_ref
///       static result<stream> create([device_id,] stream_options = {});  // non-blocking
///       static result<stream> adopt(cudaStream_t, device_id);  cudaStream_t release();
///       stream_ref ref() const&;  device_id device();  // and stream_ref's operations
///     };
///     class event_ref { cudaEvent_t get(); bool valid(); status record(stream_ref);
///                       status synchronize(); result<bool> ready(); };
///     class event {                       // owning, move-only; an lvalue converts to event_ref
///       static result<event> create([device_id,] event_options = {});
///       event_ref ref() const&;  device_id device();  // and event_ref's operations
///       static result<float> elapsed_ms(event_ref start, event_ref end);
///     };
#pragma once

#include <cudamem/detail/unique_handle.hpp>
#include <cudamem/device.hpp>

#include <cstddef>
#include <cstdint>

namespace cudamem {

class event_ref;

namespace detail {
/// What a moved-from stream hands out: never a handle CUDA would accept silently (null would be
/// the legacy default stream), and checked by every library call that takes a stream.
inline cudaStream_t invalid_stream() noexcept { return reinterpret_cast<cudaStream_t>(~std::uintptr_t{0}); }

/// The outcome of cudaStreamQuery / cudaEventQuery: done, not yet (not an error), or an error.
/// Not-ready is never written to CUDA's last-error slot, so the slot is left alone: clearing it
/// would erase an error of the caller's own (a failed kernel launch before the query).
inline result<bool> query_result(cudaError_t code, const char* api, const char* cuda_call) noexcept {
  if (code == cudaErrorNotReady) return false;
  if (auto s = check(code, api, cuda_call); !s) return s.error();
  return true;
}

/// Whether work on `handle` would join a graph capture in progress: the stream is capturing, or it
/// is the legacy default stream while a blocking stream of the current device captures
/// (cudaErrorStreamCaptureImplicit). cudaStreamIsCapturing is legal during any capture, in any mode,
/// and disturbs none.
inline result<bool> joins_capture(cudaStream_t handle, const char* api) noexcept {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  const cudaError_t earlier = cudaPeekAtLastError();
  const cudaError_t code = cudaStreamIsCapturing(handle, &capture);
  if (code == cudaErrorStreamCaptureImplicit) {
    if (earlier == cudaSuccess) (void)cudaGetLastError();  // the query's own error; a user's earlier one stays
    return true;
  }
  if (auto s = check(code, api, "cudaStreamIsCapturing"); !s) return s.error();
  return capture != cudaStreamCaptureStatusNone;
}

/// The device of a stream that is not a default stream, asked from CUDA. cudaStreamGetDevice on a
/// capturing stream fails in every capture mode and invalidates the capture, so a capturing stream
/// is refused before it is asked.
inline result<device_id> ask_stream_device(cudaStream_t handle, const char* api) noexcept {
  auto capturing = joins_capture(handle, api);
  if (!capturing) return capturing.error();
  if (*capturing)
    return error(errc::capture_active, api,
                 "CUDA cannot name the device of a capturing stream without invalidating the capture; "
                 "use stream_ref::from_native_handle(handle, device)");
  int ordinal = 0;
  if (auto s = check(cudaStreamGetDevice(handle, &ordinal), api, "cudaStreamGetDevice"); !s) return s.error();
  return device_id(ordinal);
}
}  // namespace detail

/// A non-owning reference to a CUDA stream, and the device it belongs to where that is known.
/// Trivially copyable. A stream converts to it, never the other way.
///
/// Why it carries the device: stream-ordered allocation and the typed fill must run on the stream's
/// device, and CUDA can tell a stream's device only while the stream is not capturing a graph
/// (cudaStreamGetDevice fails during a capture, and invalidates it). A stream's ref() and
/// from_native_handle(handle, device) know the device; the default streams are those of the current
/// device; from_native_handle(handle) asks CUDA when the device is needed.
class stream_ref {
 public:
  /// The legacy default stream of the current device (cudaStreamLegacy), as legacy().
  stream_ref() noexcept = default;
  /// Refused: an integer is not a stream (write stream_ref::legacy() for the default stream).
  stream_ref(int) = delete;
  /// Refused: write stream_ref::legacy() or stream_ref::per_thread() for a default stream.
  stream_ref(std::nullptr_t) = delete;

  /// Refers to a raw handle the caller keeps alive; its device is asked from CUDA when needed
  /// (device() explains when it cannot be). Null means the default stream of the build: legacy, or
  /// per-thread under `--default-stream per-thread`. Not checked.
  [[nodiscard]] static stream_ref from_native_handle(cudaStream_t handle) noexcept {
    return stream_ref(handle, unknown_device);
  }
  /// Refers to a raw handle of device `id` that the caller keeps alive. Prefer this form: the library
  /// never needs to ask CUDA for the device, which it cannot while the stream captures a graph. For
  /// a default-stream handle (null, cudaStreamLegacy, cudaStreamPerThread) `id` is ignored: a default
  /// stream is always the current device's. Not checked.
  [[nodiscard]] static stream_ref from_native_handle(cudaStream_t handle, device_id id) noexcept {
    return stream_ref(handle, id.get());
  }
  /// The legacy default stream of the current device: synchronizes with every blocking stream of
  /// that device. Also the legacy stream in builds with per-thread default streams.
  [[nodiscard]] static stream_ref legacy() noexcept { return stream_ref(cudaStreamLegacy, unknown_device); }
  /// The calling thread's per-thread default stream of the current device.
  [[nodiscard]] static stream_ref per_thread() noexcept { return stream_ref(cudaStreamPerThread, unknown_device); }

  /// The raw handle, for kernel launches and other libraries. For a moved-from stream's reference
  /// it is a sentinel CUDA rejects, never null.
  [[nodiscard]] cudaStream_t get() const noexcept { return handle_; }
  /// False for the reference a moved-from stream hands out.
  [[nodiscard]] bool valid() const noexcept { return handle_ != detail::invalid_stream(); }

  /// The device the stream belongs to. Does not synchronize. For a stream's ref() and
  /// from_native_handle(handle, device): that device, without a CUDA call. For a default stream: the
  /// current device (cudaGetDevice). For from_native_handle(handle): cudaStreamGetDevice, unless the
  /// stream is capturing a graph (cudaStreamIsCapturing), when asking would invalidate the capture.
  /// Errors: invalid_argument for a moved-from stream; capture_active for a capturing stream whose
  /// device is not known; CUDA errors.
  [[nodiscard]] result<device_id> device() const noexcept {
    constexpr const char* api = "stream::device";
    if (!valid()) return moved_from(api);
    if (is_default_stream()) {
      auto current = current_device();
      if (!current) return current.error().with_api(api);
      return current;
    }
    if (device_ != unknown_device) return device_id(device_);
    return detail::ask_stream_device(handle_, api);
  }

  /// Blocks the calling thread until all work queued on the stream has finished. Synchronizes.
  /// A stream that is capturing a graph is refused, not waited for: CUDA would invalidate the
  /// capture. Errors: invalid_argument for a moved-from stream; capture_active for a capturing
  /// stream (or the legacy stream while a blocking stream captures); CUDA errors, including
  /// failures of earlier asynchronous work.
  [[nodiscard]] status synchronize() const noexcept {
    constexpr const char* api = "stream::synchronize";
    if (auto ok = usable_outside_capture(api); !ok) return ok;
    return detail::check(cudaStreamSynchronize(handle_), api, "cudaStreamSynchronize");
  }
  /// Whether all queued work has finished (cudaStreamQuery). Does not block. Not-ready is the value
  /// false, never an error, and leaves CUDA's last-error slot as it was (an earlier failed launch of
  /// the caller's stays there for cudaGetLastError). Errors: as synchronize().
  [[nodiscard]] result<bool> ready() const noexcept {
    constexpr const char* api = "stream::ready";
    if (auto ok = usable_outside_capture(api); !ok) return ok.error();
    return detail::query_result(cudaStreamQuery(handle_), api, "cudaStreamQuery");
  }
  /// Makes work queued on this stream from now on wait for the work `e` captured (its last
  /// record()); `e` may belong to another device. Does not block the host. Errors: invalid_argument
  /// for a moved-from stream or event; CUDA errors.
  [[nodiscard]] status wait(event_ref e) const noexcept;

  /// Equal when the handles are (whether the device is known does not matter). The legacy stream and
  /// a null handle compare unequal, though in builds without per-thread default streams they are the
  /// same stream.
  friend bool operator==(stream_ref a, stream_ref b) noexcept { return a.handle_ == b.handle_; }

 private:
  static constexpr int unknown_device = cudaInvalidDeviceId;

  stream_ref(cudaStream_t handle, int device) noexcept : handle_(handle), device_(device) {}
  [[nodiscard]] bool is_default_stream() const noexcept {
    return handle_ == nullptr || handle_ == cudaStreamLegacy || handle_ == cudaStreamPerThread;
  }
  static error moved_from(const char* api) noexcept {
    return error(errc::invalid_argument, api, "the stream was moved from");
  }
  /// Refuses a moved-from stream, and one whose work belongs to a graph capture in progress.
  [[nodiscard]] status usable_outside_capture(const char* api) const noexcept {
    if (!valid()) return moved_from(api);
    auto capturing = detail::joins_capture(handle_, api);
    if (!capturing) return capturing.error();
    if (*capturing)
      return error(errc::capture_active, api,
                   "the stream's work belongs to a graph capture in progress; waiting for it would invalidate the "
                   "capture");
    return {};
  }

  cudaStream_t handle_ = cudaStreamLegacy;
  int device_ = unknown_device;  // the ordinal, when known
};

/// A non-owning reference to a CUDA event. Trivially copyable. An event converts to it, never the
/// other way.
class event_ref {
 public:
  /// Refers to a raw handle the caller keeps alive. Not checked.
  [[nodiscard]] static event_ref from_native_handle(cudaEvent_t handle) noexcept { return event_ref(handle); }

  /// The raw handle; null for a moved-from event's reference.
  [[nodiscard]] cudaEvent_t get() const noexcept { return handle_; }
  /// False for the reference a moved-from event hands out.
  [[nodiscard]] bool valid() const noexcept { return handle_ != nullptr; }

  /// Captures the work queued on `s` so far (cudaEventRecord); a later record replaces it. Does not
  /// block. Errors: invalid_argument for a moved-from event or stream; CUDA errors (for example a
  /// stream of another device than the event's).
  [[nodiscard]] status record(stream_ref s) const noexcept {
    if (!valid()) return moved_from("event::record");
    if (!s.valid()) return error(errc::invalid_argument, "event::record", "the stream was moved from");
    return detail::check(cudaEventRecord(handle_, s.get()), "event::record", "cudaEventRecord");
  }
  /// Blocks the calling thread until the captured work has finished; at once if nothing was
  /// recorded. Synchronizes. Errors: invalid_argument for a moved-from event; CUDA errors, including
  /// failures of the captured work.
  [[nodiscard]] status synchronize() const noexcept {
    if (!valid()) return moved_from("event::synchronize");
    return detail::check(cudaEventSynchronize(handle_), "event::synchronize", "cudaEventSynchronize");
  }
  /// Whether the captured work has finished (true if nothing was recorded). Does not block.
  /// Not-ready is the value false, never an error, and leaves CUDA's last-error slot as it was.
  /// Errors: as synchronize().
  [[nodiscard]] result<bool> ready() const noexcept {
    if (!valid()) return moved_from("event::ready");
    return detail::query_result(cudaEventQuery(handle_), "event::ready", "cudaEventQuery");
  }

  /// Equal when the handles are.
  friend bool operator==(event_ref a, event_ref b) noexcept { return a.handle_ == b.handle_; }

 private:
  friend class event;
  explicit event_ref(cudaEvent_t handle) noexcept : handle_(handle) {}
  static error moved_from(const char* api) noexcept {
    return error(errc::invalid_argument, api, "the event was moved from");
  }

  cudaEvent_t handle_;
};

inline status stream_ref::wait(event_ref e) const noexcept {
  if (!valid()) return moved_from("stream::wait");
  if (!e.valid()) return error(errc::invalid_argument, "stream::wait", "the event was moved from");
  return detail::check(cudaStreamWaitEvent(handle_, e.get(), 0), "stream::wait", "cudaStreamWaitEvent");
}

/// Options for stream::create. The defaults make a non-blocking stream of default priority.
struct stream_options {
  /// cudaStreamNonBlocking: the stream does not synchronize with the legacy default stream, so the
  /// synchronous copies and fills (which run on the legacy stream) do not wait for its work. Set it
  /// to false for a blocking stream, which they do wait for.
  bool non_blocking = true;
  /// Priority; lower numbers are higher priority. 0 is the default; CUDA clamps it to the device's
  /// range.
  int priority = 0;
};

namespace detail {
/// What a stream owns; a moved-from stream holds invalid_stream().
struct stream_handle {
  using type = cudaStream_t;
  static cudaStream_t empty() noexcept { return invalid_stream(); }
  static void release(cudaStream_t handle) noexcept { check_release(cudaStreamDestroy(handle), "cudaStreamDestroy"); }
};
/// What an event owns; a moved-from event holds null.
struct event_handle {
  using type = cudaEvent_t;
  static cudaEvent_t empty() noexcept { return nullptr; }
  static void release(cudaEvent_t handle) noexcept { check_release(cudaEventDestroy(handle), "cudaEventDestroy"); }
};
}  // namespace detail

/// An owning CUDA stream on a device: move-only, destroyed (cudaStreamDestroy) when it goes, which
/// does not wait: work already queued still runs, and CUDA releases the stream when it is done. A
/// failed destroy goes to the release handler. A moved-from stream refers to nothing: every
/// operation on it returns errc::invalid_argument.
class stream {
 public:
  /// Creates a stream on `id` (cudaStreamCreateWithPriority), non-blocking unless `options` says
  /// otherwise; the current device is left as it was. Errors: out_of_range for an id that names no
  /// device; CUDA errors (no device).
  [[nodiscard]] static result<stream> create(device_id id, stream_options options = {}) noexcept {
    auto guard = device_guard::set(id);
    if (!guard) return guard.error().with_api("stream::create");
    return create_on_current(id, options);
  }
  /// Creates a stream on the current device, non-blocking unless `options` says otherwise. Errors:
  /// CUDA errors (no device).
  [[nodiscard]] static result<stream> create(stream_options options = {}) noexcept {
    auto id = current_device();
    if (!id) return id.error().with_api("stream::create");
    return create_on_current(*id, options);
  }
  /// Takes ownership of a raw handle created on `id`; it will be destroyed with this object.
  /// Errors: invalid_argument for null, cudaStreamLegacy or cudaStreamPerThread (never owned).
  [[nodiscard]] static result<stream> adopt(cudaStream_t handle, device_id id) noexcept {
    if (handle == nullptr || handle == cudaStreamLegacy || handle == cudaStreamPerThread)
      return error(errc::invalid_argument, "stream::adopt", "a default stream cannot be owned");
    return stream(handle, id);
  }

  /// A non-owning reference that knows this stream's device; it must not outlive this stream.
  /// Invalid for a moved-from stream.
  [[nodiscard]] stream_ref ref() const& noexcept { return stream_ref::from_native_handle(handle_.get(), device_); }
  /// Refused: a reference to a temporary stream would dangle once the statement ends.
  stream_ref ref() const&& = delete;
  /// As ref(): a stream passes wherever a stream_ref is taken.
  operator stream_ref() const& noexcept { return ref(); }
  /// Refused: a reference to a temporary stream would dangle once the statement ends.
  operator stream_ref() const&& = delete;

  /// The raw handle (a sentinel CUDA rejects after a move, never null).
  [[nodiscard]] cudaStream_t get() const noexcept { return handle_.get(); }
  /// The device the stream was created on (for an adopted stream: the id given to adopt).
  [[nodiscard]] device_id device() const noexcept { return device_; }
  /// False after a move or release().
  [[nodiscard]] bool valid() const noexcept { return handle_.valid(); }
  /// Gives up ownership: the caller destroys the returned handle. The stream is moved-from after.
  [[nodiscard]] cudaStream_t release() noexcept { return handle_.release(); }

  /// Blocks until all work queued on the stream has finished. Synchronizes. Errors: as
  /// stream_ref::synchronize.
  [[nodiscard]] status synchronize() const noexcept { return ref().synchronize(); }
  /// Whether all queued work has finished. Does not block; leaves CUDA's last-error slot alone.
  /// Errors: as stream_ref::ready.
  [[nodiscard]] result<bool> ready() const noexcept { return ref().ready(); }
  /// Makes later work on this stream wait for the work `e` captured. Does not block the host.
  /// Errors: as stream_ref::wait.
  [[nodiscard]] status wait(event_ref e) const noexcept { return ref().wait(e); }

 private:
  stream(cudaStream_t handle, device_id id) noexcept : handle_(handle), device_(id) {}
  static result<stream> create_on_current(device_id id, stream_options options) noexcept {
    cudaStream_t handle = nullptr;
    const unsigned flags = options.non_blocking ? cudaStreamNonBlocking : cudaStreamDefault;
    if (auto s = detail::check(cudaStreamCreateWithPriority(&handle, flags, options.priority), "stream::create",
                               "cudaStreamCreateWithPriority");
        !s)
      return s.error();
    return stream(handle, id);
  }

  detail::unique_handle<detail::stream_handle> handle_;
  device_id device_;
};

/// Options for event::create.
struct event_options {
  /// Record timestamps (needed by elapsed_ms); off (cudaEventDisableTiming) makes record and wait
  /// cheaper.
  bool timing = true;
  /// Block the waiting host thread (cudaEventBlockingSync) instead of spinning in synchronize().
  bool blocking_sync = false;
};

/// An owning CUDA event on a device: move-only, destroyed (cudaEventDestroy) when it goes, without
/// waiting for it; a failed destroy goes to the release handler. It can record work of streams on
/// its own device only; streams of any device can wait for it. A moved-from event refers to
/// nothing: every operation on it returns errc::invalid_argument.
class event {
 public:
  /// Creates an event on `id` (cudaEventCreateWithFlags, with `id` made current for the call); the
  /// current device is left as it was. Errors: out_of_range for an id that names no device; CUDA
  /// errors (no device).
  [[nodiscard]] static result<event> create(device_id id, event_options options = {}) noexcept {
    auto guard = device_guard::set(id);
    if (!guard) return guard.error().with_api("event::create");
    return create_on_current(id, options);
  }
  /// Creates an event on the current device. Errors: CUDA errors (no device).
  [[nodiscard]] static result<event> create(event_options options = {}) noexcept {
    auto id = current_device();
    if (!id) return id.error().with_api("event::create");
    return create_on_current(*id, options);
  }

  /// A non-owning reference; it must not outlive this event. Invalid for a moved-from event.
  [[nodiscard]] event_ref ref() const& noexcept { return event_ref(handle_.get()); }
  /// Refused: a reference to a temporary event would dangle once the statement ends.
  event_ref ref() const&& = delete;
  /// As ref(): an event passes wherever an event_ref is taken.
  operator event_ref() const& noexcept { return ref(); }
  /// Refused: a reference to a temporary event would dangle once the statement ends.
  operator event_ref() const&& = delete;

  /// The raw handle; null after a move.
  [[nodiscard]] cudaEvent_t get() const noexcept { return handle_.get(); }
  /// The device the event was created on.
  [[nodiscard]] device_id device() const noexcept { return device_; }
  /// False after a move.
  [[nodiscard]] bool valid() const noexcept { return handle_.valid(); }

  /// Captures the work queued on `s` (a stream of this event's device) so far; see
  /// event_ref::record.
  [[nodiscard]] status record(stream_ref s) const noexcept { return ref().record(s); }
  /// Blocks until the captured work has finished. Synchronizes. See event_ref::synchronize.
  [[nodiscard]] status synchronize() const noexcept { return ref().synchronize(); }
  /// Whether the captured work has finished. Does not block; leaves CUDA's last-error slot alone.
  /// See event_ref::ready.
  [[nodiscard]] result<bool> ready() const noexcept { return ref().ready(); }

  /// Milliseconds between two recorded events (both created with timing). Does not block.
  /// Errors: invalid_argument for a moved-from event; cudaErrorNotReady if either has not completed;
  /// cudaErrorInvalidResourceHandle if either was created without timing; other CUDA errors.
  [[nodiscard]] static result<float> elapsed_ms(event_ref start, event_ref end) noexcept {
    if (!start.valid() || !end.valid())
      return error(errc::invalid_argument, "event::elapsed_ms", "the event was moved from");
    float ms = 0.0f;
    if (auto s = detail::check(cudaEventElapsedTime(&ms, start.get(), end.get()), "event::elapsed_ms",
                               "cudaEventElapsedTime");
        !s)
      return s.error();
    return ms;
  }

 private:
  event(cudaEvent_t handle, device_id id) noexcept : handle_(handle), device_(id) {}
  static result<event> create_on_current(device_id id, event_options options) noexcept {
    unsigned flags = options.timing ? cudaEventDefault : cudaEventDisableTiming;
    if (options.blocking_sync) flags |= cudaEventBlockingSync;
    cudaEvent_t handle = nullptr;
    if (auto s = detail::check(cudaEventCreateWithFlags(&handle, flags), "event::create", "cudaEventCreateWithFlags");
        !s)
      return s.error();
    return event(handle, id);
  }

  detail::unique_handle<detail::event_handle> handle_;
  device_id device_;
};

}  // namespace cudamem
