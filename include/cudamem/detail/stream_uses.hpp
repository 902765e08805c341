// SPDX-License-Identifier: MIT
// cudamem, internal: the streams a buffer was used on besides its own (buffer::use_on, and stream-ordered copies and
// fills given the owner itself), so that its free waits for them (docs/allocators.md, "Using a buffer on more than one
// stream"). A buffer used on its own stream only holds one null pointer here and makes no CUDA call for it. Each other
// stream gets an event, recorded after each use there; the free makes its stream wait for each (cudaStreamWaitEvent)
// before the resource sees the free, so every resource, the caching pool included, gets the block back ordered after
// all its uses. The free never touches the other streams themselves: they may have ended or be capturing by then.
// The stream order is a parameter, so tests/host/stream_uses.cpp checks the bookkeeping against a fake one.
#pragma once

#include <cudamem/detail/process_wide.hpp>
#include <cudamem/detail/storage.hpp>
#include <cudamem/detail/stream_identity.hpp>
#include <cudamem/detail/sync.hpp>
#include <cudamem/stream.hpp>

#include <concepts>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace cudamem::detail {

/// The checks of the use-checking mode still to settle: a free point (an event on the freeing stream, recorded before
/// the free waited for anything) and the use it should have followed. Resolved by queries only: the free point done
/// while the use is not is a use the program itself did not order before the free.
template <class Marker>
struct use_check {
  Marker free_point, use;
  cudaStream_t home, used_on, freed_on;
  const char* api;  // the call that recorded the use
};
template <class Marker>
struct use_check_list {
  mutex lock;
  vec<use_check<Marker>> pending;
  int enabled = -1;  // -1: not read yet (CUDAMEM_CHECK_STREAM_USES, the macro or the environment variable)
};
struct CUDAMEM_DETAIL_PROCESS_WIDE cuda_use_checks : use_check_list<cudaEvent_t> {};

/// The CUDA side of use tracking. Errors name `api`; nothing here calls the release handler.
struct cuda_use_order {
  using marker = cudaEvent_t;  ///< null until made

  /// 0 when `s` is not capturing (the legacy stream never is), else its capture's id (cudaStreamGetCaptureInfo,
  /// asked only while capturing). A failed query's error is cleared unless sticky; a user's earlier one stays.
  static result<unsigned long long> capture_of(stream_ref s, const char* api) noexcept {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    if (s.get() == cudaStreamLegacy ||
        (driver_capture_status(s.get(), capture) && capture == cudaStreamCaptureStatusNone)) [[likely]]
      return 0ull;
    unsigned long long id = 0;
    const cudaError_t earlier = cudaPeekAtLastError(), code = cudaStreamGetCaptureInfo(s.get(), &capture, &id);
    if (code != cudaSuccess && earlier == cudaSuccess && !error::is_sticky_status(code)) (void)cudaGetLastError();
    CUDAMEM_TRY(check(code, api, "cudaStreamGetCaptureInfo"));
    return capture == cudaStreamCaptureStatusNone ? 0ull : id;
  }
  /// An event on `device` (the current device stays), without timing; in relaxed capture mode, as the destroy: a
  /// capture in progress on this thread (a use in it, a free during it) stays intact.
  static status make(marker& m, device_id device, const char* api) noexcept {
    relaxed_capture_scope relaxed;
    auto guard = device_guard::set(device);
    if (!guard) return guard.error().with_api(api);
    return check(cudaEventCreateWithFlags(&m, cudaEventDisableTiming), api, "cudaEventCreateWithFlags");
  }
  static status record(marker m, stream_ref s, const char* api) noexcept {
    return check(record_event(m, s.get()), api, "cudaEventRecord");
  }
  static status wait(stream_ref s, marker m, const char* api) noexcept {
    return check(cudaStreamWaitEvent(s.get(), m, 0), api, "cudaStreamWaitEvent");
  }
  static void destroy(marker m) noexcept {
    if (m == nullptr) return;
    relaxed_capture_scope relaxed;
    check_release(cudaEventDestroy(m), "cudaEventDestroy");
  }
  /// Whether `m`'s last record is done; an error counts as done (nothing to report).
  static bool done(marker m) noexcept { return query_event(m) != cudaErrorNotReady; }
  static void settle(marker m) noexcept { check_release(cudaEventSynchronize(m), "cudaEventSynchronize"); }
  static use_check_list<marker>& checks() noexcept { return process_wide<cuda_use_checks>(); }
};

/// `s` and `t` are the same stream (null is this build's default stream). Per-thread streams of two threads share a
/// handle: a buffer given to one and used on the other is not told apart (docs/allocators.md).
inline bool same_stream(cudaStream_t s, cudaStream_t t) noexcept {
#if defined(CUDA_API_PER_THREAD_DEFAULT_STREAM)
  const cudaStream_t null_is = cudaStreamPerThread;
#else
  const cudaStream_t null_is = cudaStreamLegacy;
#endif
  return (s == nullptr ? null_is : s) == (t == nullptr ? null_is : t);
}

/// Whether the use-checking mode is on: set_stream_use_checking's, else CUDAMEM_CHECK_STREAM_USES (the environment
/// variable, else the macro) when first asked.
template <class Order>
bool use_checking(const Order& order) noexcept {
  auto& list = order.checks();
  int on = __atomic_load_n(&list.enabled, __ATOMIC_ACQUIRE);
  if (on < 0) [[unlikely]] {
#if defined(CUDAMEM_CHECK_STREAM_USES)
    int initial = (CUDAMEM_CHECK_STREAM_USES) ? 1 : 0;
#else
    int initial = 0;
#endif
    if (const char* env = std::getenv("CUDAMEM_CHECK_STREAM_USES"); env != nullptr && *env != '\0')
      initial = *env != '0';
    int unread = -1;
    __atomic_compare_exchange_n(&list.enabled, &unread, initial, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    on = __atomic_load_n(&list.enabled, __ATOMIC_ACQUIRE);
  }
  return on > 0;
}

/// Settles the checks whose free point is done (all, after waiting for each free point, when `wait`): a use not done
/// then is reported. The number reported.
template <class Order>
std::size_t settle_use_checks(const Order& order, bool wait) noexcept {
  auto& list = order.checks();
  vec<use_check<typename Order::marker>> settled;
  {
    const lock_guard<mutex> hold(list.lock);
    if (!wait) {
      list.pending.erase_if([&](const use_check<typename Order::marker>& c) {
        if (!order.done(c.free_point)) return false;
        settled.push_back(c);
        return true;
      });
    } else {
      settled.swap(list.pending);
    }
  }
  std::size_t races = 0;
  for (const auto& c : settled) {
    if (wait) order.settle(c.free_point);
    if (!order.done(c.use)) {  // asked after the free point was done: the use outlived the free's own order
      ++races;
      report_release_failure(error(errc::invalid_argument, "stream use check",
                                   "a buffer allocated on stream %p, used on stream %p (by %s), was freed on stream "
                                   "%p before that use was done: only its use tracking kept the memory from being "
                                   "reused under the use; order the free after it (an event), or call use_on",
                                   static_cast<void*>(c.home), static_cast<void*>(c.used_on), c.api,
                                   static_cast<void*>(c.freed_on)));
    }
    order.destroy(c.free_point);
    order.destroy(c.use);
  }
  return races;
}

/// The other streams a buffer was used on: one pointer, null until the first use on a stream not its own. Thread-safe
/// for uses (a const buffer may be copied from on several threads at once); join() runs alone, at the free.
template <class Order>
class basic_stream_uses {
 public:
  using marker = typename Order::marker;

  basic_stream_uses() noexcept = default;
  explicit basic_stream_uses(Order order) noexcept : order_(order) {}
  // A move is not a use: like any non-const operation it must not race with the buffer's uses on other threads (the
  // program orders them, as it orders any writes), so it needs plain loads and stores, not read-modify-writes, which
  // cost a locked instruction per move of a buffer.
  basic_stream_uses(basic_stream_uses&& other) noexcept
      : list_(other.list_.load(memory_order::acquire)), order_(other.order_) {
    other.list_.store(nullptr, memory_order::relaxed);
  }
  basic_stream_uses& operator=(basic_stream_uses&& other) noexcept {  // after join(): this one is empty
    if (this == &other) return *this;
    list* const mine = list_.load(memory_order::acquire);
    list_.store(other.list_.load(memory_order::acquire), memory_order::release);
    other.list_.store(nullptr, memory_order::relaxed);
    discard(mine);
    return *this;
  }
  basic_stream_uses(const basic_stream_uses&) = delete;
  basic_stream_uses& operator=(const basic_stream_uses&) = delete;
  ~basic_stream_uses() { discard(list_.load(memory_order::acquire)); }

  /// No stream recorded.
  [[nodiscard]] bool empty() const noexcept { return list_.load(memory_order::acquire) == nullptr; }
  /// The streams recorded (for tests).
  [[nodiscard]] std::size_t count() const noexcept {
    list* l = list_.load(memory_order::acquire);
    if (l == nullptr) return 0;
    const lock_guard<spin_lock> hold(l->lock);
    return l->entries.size();
  }

  /// Before an operation on `s` that uses the buffer (whose stream is `home`): the event to record after it, made
  /// now, or none (`s` is `home`; or `s` captures a graph that `home` is not part of, and not `strict`). Nothing is
  /// enqueued. Errors (nothing recorded): capture_active (`strict`, a capture `home` is not part of; CUDA cannot name
  /// the capturing stream's device), invalid_argument (moved-from stream), CUDA's.
  [[nodiscard]] result<maybe<marker>> prepare(stream_ref home, stream_ref s, const char* api,
                                              bool strict) const noexcept {
    if (same_stream(home.get(), s.get())) [[likely]]
      return maybe<marker>();
    return prepare_other(home, s, api, strict);
  }
  /// After the operation: the use's point on `s`. Errors: CUDA's.
  [[nodiscard]] status commit(const maybe<marker>& m, stream_ref s, const char* api) const noexcept {
    if (!m) return {};
    return order_.record(*m, s, api);
  }
  /// Records that the buffer is used on `s` up to the work queued there so far (use_on).
  [[nodiscard]] status note(stream_ref home, stream_ref s, const char* api) const noexcept {
    auto m = prepare(home, s, api, true);
    if (!m) return m.error();
    return commit(*m, s, api);
  }

  /// Before the free on `freeing`: `freeing` waits for each use recorded outside captures (or in the capture it is
  /// part of now), and the records are dropped. False: the memory must not be freed (kept; the release handler hears
  /// why): a use outside the capture that `freeing` is part of now, or a wait CUDA refused. Enqueues only waits, and
  /// only on `freeing`, the free's own stream.
  [[nodiscard]] bool join(stream_ref home, stream_ref freeing, const char* api) noexcept {
    if (list_.load(memory_order::relaxed) == nullptr) [[likely]]  // a plain load: no use runs during the free
      return true;
    return join_list(*list_.exchange(nullptr, memory_order::acq_rel), home, freeing, api);
  }

 private:
  struct entry {
    cudaStream_t stream;
    std::uint64_t id;  // a stream object's (carried), else no_stream_id: then the handle tells streams apart
    unsigned long long capture;  // 0: outside captures
    marker event;
    const char* api;  // the first call that recorded it
    bool checked;  // its event belongs to a pending use check now
  };
  struct list {
    spin_lock lock;
    vec<entry> entries;
  };
  [[gnu::noinline]] result<maybe<marker>> prepare_other(stream_ref home, stream_ref s, const char* api,
                                                        bool strict) const noexcept {
    if (!s.valid()) return handle_moved_from(api, "stream");
    auto capture = order_.capture_of(s, api);
    if (!capture) return capture.error();
    if (*capture != 0) {
      auto home_capture = order_.capture_of(home, api);
      if (!home_capture || *home_capture != *capture) {
        if (!strict) return maybe<marker>();
        return error(errc::capture_active, api,
                     "stream %p is capturing a graph that the buffer's stream %p is not part of: the graph's "
                     "launches would use the buffer after any free could wait for them; keep the buffer until they "
                     "are done, or allocate it on a stream of the capture",
                     static_cast<void*>(s.get()), static_cast<void*>(home.get()));
      }
    }
    const std::uint64_t id = stream_identity::carried(s);
    list* l = list_.load(memory_order::acquire);
    if (l == nullptr) {
      list* made = new (std::nothrow) list();
      if (made == nullptr) return error(errc::out_of_memory, api, "no host memory to record a stream use");
      if (list_.compare_exchange_strong(l, made, memory_order::acq_rel)) l = made;
      else delete made;  // another thread's came first: `l` is it
    }
    const lock_guard<spin_lock> hold(l->lock);
    for (const entry& e : l->entries)
      if (e.capture == *capture && (id != no_stream_id ? e.id == id : e.id == no_stream_id && e.stream == s.get()))
        return maybe<marker>(e.event);
    auto device = s.device();
    if (!device) return device.error().with_api(api);
    marker m{};
    CUDAMEM_TRY(order_.make(m, *device, api));
    l->entries.push_back(entry{s.get(), id, *capture, m, api, false});
    return maybe<marker>(m);
  }

  [[gnu::noinline]] bool join_list(list& l, stream_ref home, stream_ref freeing, const char* api) noexcept {
    bool keep = false;
    auto now = order_.capture_of(freeing, api);
    if (!now) {  // whether a wait would join a capture is unknown: none is made, the memory stays
      report_release_failure(now.error());
      keep = true;
    }
    const unsigned long long capture = now ? *now : ~0ull;
    const bool checking = capture == 0 && use_checking(order_);
    if (checking) settle_use_checks(order_, false);
    vec<use_check<marker>> checks;
    for (entry& e : l.entries) {  // free points first: recorded before the free waits for anything
      if (!checking || e.capture != 0) continue;
      use_check<marker> c{marker{}, e.event, home.get(), e.stream, freeing.get(), e.api};
      auto device = freeing.device();
      if (!device || !order_.make(c.free_point, *device, api) || !order_.record(c.free_point, freeing, api)) {
        order_.destroy(c.free_point);
        continue;  // not checked; still waited for below
      }
      checks.push_back(c);
      e.checked = true;
    }
    for (const entry& e : l.entries) {
      if (e.capture == capture) {
        if (const status waited = order_.wait(freeing, e.event, api); !waited) {
          report_release_failure(waited.error());
          keep = true;
        }
      } else if (e.capture == 0 && now) {
        keep = true;
        report_release_failure(error(errc::capture_active, api,
                                     "the buffer was used on stream %p before the capture on stream %p began, so its "
                                     "free there could not be ordered after that use: its memory is kept, not freed",
                                     static_cast<void*>(e.stream), static_cast<void*>(freeing.get())));
      }
      // Else a use in a capture that is over, or another one: the graph's launches are the uses, which the user's
      // program must let finish before the free, as for any memory a graph uses.
    }
    if (!checks.empty()) {
      auto& pending = order_.checks();
      const lock_guard<mutex> hold(pending.lock);
      pending.pending.append(checks.begin(), checks.end());
    }
    for (const entry& e : l.entries)  // destroyed once the work it marks is done
      if (!e.checked) order_.destroy(e.event);
    delete &l;
    return !keep;
  }
  void discard(list* l) const noexcept {  // records never joined (a buffer that never held memory)
    if (l == nullptr) return;
    for (const entry& e : l->entries) order_.destroy(e.event);
    delete l;
  }

  mutable atomic<list*> list_{nullptr};
  [[no_unique_address]] Order order_{};
};

using stream_uses = basic_stream_uses<cuda_use_order>;

/// What copies and fills read of an owner (buffer, pitched_buffer): its stream and its use records.
struct owner_access {
  template <class Owner>
  static auto uses(const Owner& owner) noexcept -> decltype(owner.tracked_uses()) {
    return owner.tracked_uses();
  }
};
/// An owner whose uses on other streams are recorded when a stream-ordered operation is given it (by reference).
template <class V>
concept tracked_owner = requires(const V& v) {
  { owner_access::uses(v) } -> std::same_as<const stream_uses&>;
  { v.stream() } -> std::same_as<stream_ref>;
};
/// Records a use on `s` of `operand` if it is a tracked owner (else nothing, at compile time): `commit` false before
/// the operation (makes the record: errors leave nothing enqueued), true after it (marks the use's end on `s`).
template <class V>
[[gnu::always_inline]] inline status owner_use(const V& operand, stream_ref s, const char* api, bool commit) noexcept {
  if constexpr (tracked_owner<V>) {
    const stream_uses& uses = owner_access::uses(operand);
    auto m = uses.prepare(operand.stream(), s, api, false);
    if (!m) return m.error();
    if (commit) return uses.commit(*m, s, api);
  }
  return {};
}

}  // namespace cudamem::detail
