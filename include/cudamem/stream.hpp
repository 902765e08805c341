/// \file
/// Streams and events: `stream` owns a cudaStream_t, `stream_ref` refers to one, `event` owns a
/// cudaEvent_t.
#pragma once

#include <cudamem/device.hpp>

#include <cstdint>

namespace cudamem {

class event;

namespace detail {
/// What a moved-from stream hands out: never a handle CUDA would accept silently (null would be
/// the legacy default stream), and checked by every library call that takes a stream.
inline cudaStream_t invalid_stream() noexcept { return reinterpret_cast<cudaStream_t>(~std::uintptr_t{0}); }

/// The outcome of cudaStreamQuery / cudaEventQuery: done, not yet (not an error, and not left in
/// CUDA's last-error slot), or an error.
inline result<bool> query_result(cudaError_t code, const char* api, const char* cuda_call) noexcept {
  if (code == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  if (auto s = check(code, api, cuda_call); !s) return s.error();
  return true;
}
}  // namespace detail

/// A non-owning reference to a CUDA stream. Trivially copyable. The owner converts to it, never
/// the other way.
class stream_ref {
 public:
  /// The legacy default stream (cudaStreamLegacy), also in builds with per-thread default streams.
  constexpr stream_ref() noexcept = default;
  /// Refers to a raw handle the caller keeps alive (null means the default stream of the build:
  /// legacy, or per-thread under `--default-stream per-thread`). Not checked.
  [[nodiscard]] static stream_ref from_native_handle(cudaStream_t handle) noexcept { return stream_ref(handle); }
  /// The legacy default stream: synchronizes with every blocking stream of its device.
  [[nodiscard]] static stream_ref legacy() noexcept { return stream_ref(cudaStreamLegacy); }
  /// The calling thread's per-thread default stream.
  [[nodiscard]] static stream_ref per_thread() noexcept { return stream_ref(cudaStreamPerThread); }

  /// The raw handle, for kernel launches and other libraries. For a moved-from stream's reference
  /// it is a sentinel CUDA rejects, never null.
  [[nodiscard]] cudaStream_t get() const noexcept { return handle_; }
  /// False for the reference a moved-from stream hands out.
  [[nodiscard]] bool valid() const noexcept { return handle_ != detail::invalid_stream(); }

  /// Blocks the calling thread until all work queued on the stream has finished. Synchronizes.
  /// Errors: invalid_argument for a moved-from stream; CUDA errors, including failures of earlier
  /// asynchronous work.
  [[nodiscard]] status synchronize() const noexcept {
    if (!valid()) return moved_from("stream::synchronize");
    return detail::check(cudaStreamSynchronize(handle_), "stream::synchronize", "cudaStreamSynchronize");
  }
  /// Whether all queued work has finished (cudaStreamQuery). Does not block. Errors: as
  /// synchronize(); not-ready is the value false, never an error.
  [[nodiscard]] result<bool> ready() const noexcept {
    if (!valid()) return moved_from("stream::ready");
    return detail::query_result(cudaStreamQuery(handle_), "stream::ready", "cudaStreamQuery");
  }
  /// Makes work queued on this stream from now on wait for the work `e` captured (its last
  /// record()). Does not block the host. Errors: invalid_argument for a moved-from stream or event;
  /// CUDA errors.
  [[nodiscard]] status wait(const event& e) const noexcept;

  /// The device the stream belongs to (cudaStreamGetDevice). Does not synchronize. Errors: as
  /// synchronize().
  [[nodiscard]] result<device_id> device() const noexcept {
    if (!valid()) return moved_from("stream::device");
    int ordinal = 0;
    if (auto s = detail::check(cudaStreamGetDevice(handle_, &ordinal), "stream::device", "cudaStreamGetDevice"); !s)
      return s.error();
    return device_id(ordinal);
  }

  /// Equal when the handles are. The legacy stream and a null handle compare unequal, though in
  /// builds without per-thread default streams they are the same stream.
  friend bool operator==(stream_ref a, stream_ref b) noexcept { return a.handle_ == b.handle_; }

 private:
  explicit stream_ref(cudaStream_t handle) noexcept : handle_(handle) {}
  static error moved_from(const char* api) noexcept {
    return error(errc::invalid_argument, api, "the stream was moved from");
  }
  friend class stream;
  cudaStream_t handle_ = cudaStreamLegacy;
};

/// Options for stream::create. The defaults make a non-blocking stream of default priority.
struct stream_options {
  /// cudaStreamNonBlocking: the stream does not synchronize with the legacy default stream.
  bool non_blocking = true;
  /// Priority; lower numbers are higher priority. 0 is the default; CUDA clamps it to the device's
  /// range.
  int priority = 0;
};

/// An owning CUDA stream: move-only, destroyed (cudaStreamDestroy) when it goes. A moved-from
/// stream refers to nothing: every operation on it returns errc::invalid_argument.
class stream {
 public:
  /// Creates a stream on `id` (cudaStreamCreateWithPriority); the current device is left as it was.
  /// Errors: out_of_range for an id that names no device; CUDA errors (no device).
  [[nodiscard]] static result<stream> create(device_id id, stream_options options = {}) noexcept {
    if (auto s = detail::check_device(id, "stream::create"); !s) return s.error();
    auto guard = device_guard::set(id);
    if (!guard) return guard.error().with_api("stream::create");
    cudaStream_t handle = nullptr;
    const unsigned flags = options.non_blocking ? cudaStreamNonBlocking : cudaStreamDefault;
    if (auto s = detail::check(cudaStreamCreateWithPriority(&handle, flags, options.priority), "stream::create",
                               "cudaStreamCreateWithPriority");
        !s)
      return s.error();
    return stream(handle, id);
  }
  /// Creates a stream on the current device. Errors: CUDA errors (no device).
  [[nodiscard]] static result<stream> create(stream_options options = {}) noexcept {
    auto id = current_device();
    if (!id) return id.error().with_api("stream::create");
    return create(*id, options);
  }
  /// Takes ownership of a raw handle created on `id`; it will be destroyed with this object.
  /// Errors: invalid_argument for null, cudaStreamLegacy or cudaStreamPerThread (never owned).
  [[nodiscard]] static result<stream> adopt(cudaStream_t handle, device_id id) noexcept {
    if (handle == nullptr || handle == cudaStreamLegacy || handle == cudaStreamPerThread)
      return error(errc::invalid_argument, "stream::adopt", "a default stream cannot be owned");
    return stream(handle, id);
  }

  /// Takes over the stream of `other`, which is left moved-from.
  stream(stream&& other) noexcept : handle_(other.handle_), device_(other.device_) {
    other.handle_ = detail::invalid_stream();
  }
  /// Destroys this stream's handle (see ~stream), then takes over the stream of `other`.
  stream& operator=(stream&& other) noexcept {
    if (this != &other) {
      destroy();
      handle_ = other.handle_;
      device_ = other.device_;
      other.handle_ = detail::invalid_stream();
    }
    return *this;
  }
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;
  /// Destroys the stream (cudaStreamDestroy). Does not wait: work already queued still runs, and
  /// CUDA releases the stream when it is done. A failure goes to the release handler.
  ~stream() { destroy(); }

  /// A non-owning reference; it must not outlive this stream. Invalid for a moved-from stream.
  [[nodiscard]] stream_ref ref() const noexcept { return stream_ref(handle_); }
  /// As ref(): a stream passes wherever a stream_ref is taken.
  operator stream_ref() const noexcept { return ref(); }
  /// The raw handle (a sentinel CUDA rejects after a move, never null).
  [[nodiscard]] cudaStream_t get() const noexcept { return handle_; }
  /// The device the stream was created on (for an adopted stream: the id given to adopt).
  [[nodiscard]] device_id device() const noexcept { return device_; }
  /// False after a move or release().
  [[nodiscard]] bool valid() const noexcept { return handle_ != detail::invalid_stream(); }
  /// Gives up ownership: the caller destroys the returned handle. The stream is moved-from after.
  [[nodiscard]] cudaStream_t release() noexcept {
    cudaStream_t handle = handle_;
    handle_ = detail::invalid_stream();
    return handle;
  }

  /// Blocks until all work queued on the stream has finished. Synchronizes. Errors: as
  /// stream_ref::synchronize.
  [[nodiscard]] status synchronize() const noexcept { return ref().synchronize(); }
  /// Whether all queued work has finished. Does not block. Errors: as stream_ref::ready.
  [[nodiscard]] result<bool> ready() const noexcept { return ref().ready(); }
  /// Makes later work on this stream wait for the work `e` captured. Does not block the host.
  /// Errors: as stream_ref::wait.
  [[nodiscard]] status wait(const event& e) const noexcept;

 private:
  stream(cudaStream_t handle, device_id id) noexcept : handle_(handle), device_(id) {}
  void destroy() noexcept {
    if (valid()) detail::check_release(cudaStreamDestroy(handle_), "cudaStreamDestroy");
    handle_ = detail::invalid_stream();
  }
  cudaStream_t handle_;
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

/// An owning CUDA event: move-only, destroyed (cudaEventDestroy) when it goes. A moved-from event
/// refers to nothing: every operation on it returns errc::invalid_argument.
class event {
 public:
  /// Creates an event on the current device (cudaEventCreateWithFlags). Errors: CUDA errors (no
  /// device).
  [[nodiscard]] static result<event> create(event_options options = {}) noexcept {
    unsigned flags = options.timing ? cudaEventDefault : cudaEventDisableTiming;
    if (options.blocking_sync) flags |= cudaEventBlockingSync;
    cudaEvent_t handle = nullptr;
    if (auto s = detail::check(cudaEventCreateWithFlags(&handle, flags), "event::create", "cudaEventCreateWithFlags"); !s)
      return s.error();
    return event(handle);
  }

  /// Takes over the event of `other`, which is left moved-from.
  event(event&& other) noexcept : handle_(other.handle_) { other.handle_ = nullptr; }
  /// Destroys this event's handle, then takes over the event of `other`.
  event& operator=(event&& other) noexcept {
    if (this != &other) {
      destroy();
      handle_ = other.handle_;
      other.handle_ = nullptr;
    }
    return *this;
  }
  event(const event&) = delete;
  event& operator=(const event&) = delete;
  /// Destroys the event (cudaEventDestroy); does not wait for it. A failure goes to the release
  /// handler.
  ~event() { destroy(); }

  /// The raw handle; null after a move.
  [[nodiscard]] cudaEvent_t get() const noexcept { return handle_; }
  /// False after a move.
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
  /// Errors: as synchronize(); not-ready is the value false, never an error.
  [[nodiscard]] result<bool> ready() const noexcept {
    if (!valid()) return moved_from("event::ready");
    return detail::query_result(cudaEventQuery(handle_), "event::ready", "cudaEventQuery");
  }
  /// Milliseconds between two recorded events (both created with timing). Does not block.
  /// Errors: invalid_argument for a moved-from event; cudaErrorNotReady if either has not completed;
  /// cudaErrorInvalidResourceHandle if either was created without timing; other CUDA errors.
  [[nodiscard]] static result<float> elapsed_ms(const event& start, const event& end) noexcept {
    if (!start.valid() || !end.valid()) return moved_from("event::elapsed_ms");
    float ms = 0.0f;
    if (auto s = detail::check(cudaEventElapsedTime(&ms, start.handle_, end.handle_), "event::elapsed_ms",
                               "cudaEventElapsedTime");
        !s)
      return s.error();
    return ms;
  }

 private:
  explicit event(cudaEvent_t handle) noexcept : handle_(handle) {}
  static error moved_from(const char* api) noexcept { return error(errc::invalid_argument, api, "the event was moved from"); }
  void destroy() noexcept {
    if (handle_ != nullptr) detail::check_release(cudaEventDestroy(handle_), "cudaEventDestroy");
    handle_ = nullptr;
  }
  cudaEvent_t handle_;
};

inline status stream_ref::wait(const event& e) const noexcept {
  if (!valid()) return moved_from("stream::wait");
  if (!e.valid()) return error(errc::invalid_argument, "stream::wait", "the event was moved from");
  return detail::check(cudaStreamWaitEvent(handle_, e.get(), 0), "stream::wait", "cudaStreamWaitEvent");
}
inline status stream::wait(const event& e) const noexcept { return ref().wait(e); }

}  // namespace cudamem
