// SPDX-License-Identifier: MIT
/// \file
/// Pools and adaptors over the memory resources of resource.hpp, and per-stream registration (registry.hpp).
///
///     status set_pool_release_threshold(device_id, bytes = unlimited)   keep cudaMallocAsync's memory across syncs
///     caching_pool<Upstream>            free lists per (stream, size class); reuse across streams after an event
///       set_out_of_memory_hook(hook, context)   called between the cache's release and the retry
///     statistics_adaptor<Upstream>      bytes and blocks outstanding, peak
///     limit_adaptor<Upstream>           a byte budget; over it: errc::out_of_memory naming the budget
///
/// Each holds its upstream by reference: the upstream must outlive it. Zero bytes is "no allocation" everywhere:
/// allocate returns null, deallocate accepts null. See docs/allocators.md.
#pragma once

#include <cudamem/detail/out_of_memory.hpp>
#include <cudamem/detail/storage.hpp>
#include <cudamem/detail/stream_identity.hpp>
#include <cudamem/detail/stream_order.hpp>
#include <cudamem/detail/sync.hpp>
#include <cudamem/registry.hpp>
#include <cudamem/resource.hpp>

#include <cstdint>
#include <utility>

namespace cudamem {

/// Keeps up to `bytes` in device `id`'s default memory pool (device_pool_resource's) across syncs: process-wide, does
/// not synchronize. Errors: out_of_range (no such device); not_supported (no memory pools); CUDA errors.
[[nodiscard]] inline status set_pool_release_threshold(device_id id, std::uint64_t bytes = ~std::uint64_t{0}) noexcept {
  constexpr const char* api = "set_pool_release_threshold";
  CUDAMEM_TRY(detail::require_memory_pools(id, api));
  cudaMemPool_t pool = nullptr;
  CUDAMEM_TRY(detail::check(cudaDeviceGetDefaultMemPool(&pool, id.get()), api, "cudaDeviceGetDefaultMemPool"));
  return detail::check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &bytes), api,
                       "cudaMemPoolSetAttribute");
}

/// What a caching_pool holds and has done: a snapshot, each stream's counters read under its lock in turn.
struct caching_statistics {
  std::size_t bytes_in_use = 0;           ///< bytes handed out and not yet freed (by size class)
  std::size_t blocks_in_use = 0;          ///< blocks handed out and not yet freed
  std::size_t bytes_reserved = 0;         ///< bytes taken from the upstream and not given back (in use or cached)
  std::size_t blocks_reserved = 0;        ///< blocks taken from the upstream and not given back
  std::size_t peak_bytes_reserved = 0;    ///< the most bytes_reserved has been
  std::size_t bytes_cached = 0;           ///< bytes_reserved - bytes_in_use: freed into the pool
  std::size_t blocks_cached = 0;          ///< blocks_reserved - blocks_in_use
  std::size_t reused = 0;                 ///< allocations served from the cache
  std::size_t reused_across_streams = 0;  ///< of those, blocks freed on another stream
  std::size_t upstream_allocations = 0;   ///< allocations the upstream served
  std::size_t out_of_memory_retries = 0;  ///< times the cache was given back after out-of-memory
};

/// What a caching_pool calls when its upstream runs out of memory, after it gave its cache back and before it retries
/// once: `failure.code()` is errc::out_of_memory_retry, its oom() the figures (the cache's from before the release).
using out_of_memory_hook = void (*)(const error& failure, void* context) noexcept;

/// Caches blocks of `Upstream` per (stream, size class): reused on the freeing stream at once, on another stream of
/// its device once an event shows the free done. A block freed on another device's stream goes back to the upstream.
/// Out of memory: gives the cache back, retries once. Thread-safe; caches for max_streams streams (finished caches
/// give their place up), the rest use the upstream; refuses to allocate on capturing streams and keeps blocks freed
/// there until its destruction. Gives blocks back on a stream of its own. The release handler must not call into the
/// pool; the pool must outlive its buffers and the graphs that used them. `StreamOrder` tells streams apart.
template <class Upstream, class StreamOrder = detail::cuda_stream_order>
class caching_pool {
 public:
  using kind = typename Upstream::kind;  ///< the upstream's kind
  static constexpr std::size_t block_alignment = 256;  ///< every block is this aligned (CUDA's guarantee)
  static constexpr std::size_t max_streams = 64;       ///< streams with a cache at once
  /// Streams in slots from here on record an event at each free, so that their caches can be taken over once done.
  static constexpr std::size_t eager_slots_from = max_streams * 3 / 4;
  static constexpr bool selects_device = true;  ///< it makes the stream's device current for the upstream's calls

  /// A pool over `upstream`.
  explicit caching_pool(Upstream& upstream, StreamOrder order = {}) noexcept
      : upstream_(upstream), order_(std::move(order)) {}
  caching_pool(const caching_pool&) = delete;
  caching_pool& operator=(const caching_pool&) = delete;
  /// Gives every cached block back (waits for their streams), and the blocks freed during captures after a wait for
  /// their devices (the graphs that used them must be done).
  ~caching_pool() {
    release();
    [[maybe_unused]] const auto relaxed = order_.relaxed();
    detail::vec<int> waited;
    for (const auto& [device, address, bytes] : captured_) {
      if (!waited.contains(device) && order_.wait_device(device)) waited.push_back(device);
      if (!waited.contains(device)) continue;  // the release handler heard: it stays
      if (order_.give_back(device, [&](stream_ref s) { upstream_.deallocate(s, address, bytes, block_alignment); }))
        reserve(0 - bytes, std::size_t(0) - 1);
    }
    for (stream_state* st : states_) {
      order_.destroy(st->event);
      delete st;
    }
  }

  /// A block of at least `bytes` for `s`, in its order; does not synchronize. Errors: invalid_argument (alignment,
  /// moved-from stream); not_supported (alignment > 256); size_overflow; capture_active; the upstream's.
  [[nodiscard, gnu::always_inline]] result<void*> allocate(stream_ref s, std::size_t bytes,
                                                           std::size_t alignment) noexcept {
    if (stream_state* st = known_state(s, bytes, alignment)) [[likely]] {
      const detail::size_class cls = detail::class_of_checked(bytes);
      CUDAMEM_TRY(order_.usable(s, "caching_pool::allocate"));
      if (void* own = take_own(*st, cls, s)) return own;
      return allocate_from(st, cls, s);
    }
    return allocate_checked(s, bytes, alignment);
  }
  /// Caches a block for `s`, its last use's stream; does not synchronize. A default stream, or one of another device
  /// than the block's, gives it to the upstream in its order; a capturing one keeps it for the graph until the pool
  /// goes; on a moved-from one it stays in use. Failures go to the release handler.
  [[gnu::always_inline]] void deallocate(stream_ref s, void* p, std::size_t bytes, std::size_t) noexcept {
    if (stream_state* st = known_state(s, bytes, 1); st != nullptr && p != nullptr) [[likely]]
      if (order_.usable(s, "caching_pool::deallocate") && cache(*st, p, detail::class_of_checked(bytes), s)) return;
    deallocate_checked(s, p, bytes);
  }

  /// Calls `hook(failure, context)` on out-of-memory between the release of the cache and the retry (null: none), so
  /// that the caller can free caches of its own; the hook runs with no lock of the pool held and must not allocate
  /// from it. Thread-safe.
  void set_out_of_memory_hook(out_of_memory_hook hook, void* context = nullptr) noexcept {
    const detail::lock_guard<detail::mutex> lock(mutex_);
    hook_ = hook, hook_context_ = context;
  }
  void trim() noexcept { give_back(false); }  ///< Gives back the cached blocks known done; does not wait.
  void release() noexcept { give_back(true); }  ///< Waits for all cached blocks' streams, gives all back.
  // Neither gives back the blocks freed during captures: the destructor does.
  /// A snapshot of the counters.
  [[nodiscard]] caching_statistics statistics() const noexcept {
    caching_statistics out;
    const detail::lock_guard<detail::mutex> lock(mutex_);
    for (const auto& st : states_) add(out, *st);
    add(out, overflow_);
    out.bytes_reserved = reserved_bytes_.load(detail::memory_order_relaxed);
    out.blocks_reserved = reserved_blocks_.load(detail::memory_order_relaxed);
    out.peak_bytes_reserved = peak_.load(detail::memory_order_relaxed);
    // Sums taken while blocks move between streams can be off for a moment.
    const auto clamp = [](std::size_t v, std::size_t most) { return std::ptrdiff_t(v) < 0 ? 0 : v < most ? v : most; };
    out.bytes_in_use = clamp(out.bytes_in_use, out.bytes_reserved);
    out.blocks_in_use = clamp(out.blocks_in_use, out.blocks_reserved);
    out.bytes_cached = out.bytes_reserved - out.bytes_in_use;
    out.blocks_cached = out.blocks_reserved - out.blocks_in_use;
    out.upstream_allocations = upstream_allocations_.load(detail::memory_order_relaxed);
    out.out_of_memory_retries = retries_.load(detail::memory_order_relaxed);
    return out;
  }

 private:
  using marker = typename StreamOrder::marker;
  struct block {
    void* address;
    std::uint64_t mark;  // the stream's free count when it came back
  };
  struct device_block {  // a block leaving the caches, or kept for a graph
    int device;
    void* address;
    std::size_t bytes;
  };
  struct alignas(64) stream_state {  // counters wrap: a block freed on another stream counts on both
    stream_state(cudaStream_t h, std::uint64_t i, int d) noexcept : handle(h), id(i), device(d) {}
    const cudaStream_t handle;  // this cache line is read by every find(): nothing written often
    const std::uint64_t id;     // cudaStreamGetId's: never repeated in a process, unlike the handle
    const int device;
    alignas(64) mutable detail::spin_lock lock;
    bool demanded = false;  // another stream found blocks no event covers: record one at our next call
    bool eager = false;     // in a slot from eager_slots_from: demanded stays set, each free is covered at once
    bool retired = false;   // its stream is gone or its slot was taken: never cached into again
    marker event{};
    std::uint64_t frees = 0, recorded = 0, passed = 0;  // frees so far; frees the last record covers; known done
    std::size_t bytes_in_use = 0, blocks_in_use = 0, reused = 0, reused_across = 0;
    detail::owner<detail::vec<block>[]> lists;  // per size class; made at the first free
    void in_use(std::size_t bytes, std::size_t blocks) noexcept {  // negative as wrapped unsigned
      bytes_in_use += bytes;
      blocks_in_use += blocks;
    }
  };
  static void add(caching_statistics& out, const stream_state& st) noexcept {
    const detail::lock_guard<detail::spin_lock> lock(st.lock);
    out.bytes_in_use += st.bytes_in_use;
    out.blocks_in_use += st.blocks_in_use;
    out.reused += st.reused;
    out.reused_across_streams += st.reused_across;
  }
  void reserve(std::size_t bytes, std::size_t blocks) noexcept {  // negative as wrapped unsigned
    const std::size_t now = reserved_bytes_.fetch_add(bytes, detail::memory_order_relaxed) + bytes;
    reserved_blocks_.fetch_add(blocks, detail::memory_order_relaxed);
    if (blocks == 1) upstream_allocations_.fetch_add(1, detail::memory_order_relaxed);
    std::size_t peak = peak_.load(detail::memory_order_relaxed);
    while (blocks == 1 && now > peak && !peak_.compare_exchange_weak(peak, now, detail::memory_order_relaxed)) {}
  }
  static std::uint64_t device_bit(int device) noexcept {  // devices from 63 share a bit: they are asked for
    return std::uint64_t{1} << (device < 0 ? 0 : device > 63 ? 63 : device);
  }
  void served(int device) noexcept {  // before the block is handed out, so every free of it sees the bit
    if (device < 0) return;  // CUDA could not say: its frees ask CUDA where the pool serves several devices
    const std::uint64_t bit = device_bit(device);
    if ((served_.load(detail::memory_order_relaxed) & bit) == 0) served_.fetch_or(bit, detail::memory_order_relaxed);
  }
  // The device of block `p`: the one device the pool has taken blocks from (no call), else CUDA's answer.
  int block_device(void* p, int fallback) const noexcept {
    const std::uint64_t devices = served_.load(detail::memory_order_relaxed);
    if (devices != 0 && (devices & (devices - 1)) == 0 && devices != device_bit(63)) return __builtin_ctzll(devices);
    return order_.device_of(p).value_or(fallback);
  }
  // Whether `p` may be cached for `st`'s stream: a block of its device. One load where the pool serves one device.
  bool belongs(const stream_state& st, void* p) const noexcept {
    if (served_.load(detail::memory_order_relaxed) == device_bit(st.device) && st.device < 63) [[likely]]
      return true;
    return block_device(p, st.device) == st.device;
  }
  int device_for(const stream_state* st, stream_ref s) const noexcept {  // for the upstream; -1: the current one
    if (st != nullptr && st != &overflow_) return st->device;
    if (!s.valid() || detail::is_default_stream(s.get())) return -1;
    return order_.device(s, "caching_pool").value_or(-1);
  }
  bool is_done(stream_state& owner, const block& b) noexcept {  // b's free known done? One query at most; locked
    if (b.mark <= owner.passed) return true;
    if (b.mark > owner.recorded) return false;
    if (owner.recorded > owner.passed && order_.passed(owner.event)) owner.passed = owner.recorded;
    return b.mark <= owner.passed;
  }
  static marker drop(stream_state& st) noexcept {  // a retired, empty state's; its event, to destroy unlocked
    st.lists.reset();
    return std::exchange(st.event, marker{});
  }
  static std::uint64_t newest(const stream_state& st) noexcept {  // the newest cached block's mark; 0: none
    std::uint64_t mark = 0;
    for (std::size_t c = 0; st.lists && c < detail::size_classes; ++c)
      if (!st.lists[c].empty() && st.lists[c].back().mark > mark) mark = st.lists[c].back().mark;
    return mark;
  }
  [[gnu::noinline]] result<void*> allocate_checked(stream_ref s, std::size_t bytes, std::size_t alignment) noexcept {
    constexpr const char* api = "caching_pool::allocate";
    CUDAMEM_TRY(detail::check_alignment(alignment, api));
    if (bytes == 0) return nullptr;
    auto cls = detail::class_of(bytes, api);
    if (!cls) return cls.error();
    CUDAMEM_TRY(order_.usable(s, api));
    auto found = state_for(s, api);
    if (!found) return found.error();
    if (*found != &overflow_)
      if (void* own = take_own(**found, *cls, s)) return own;
    return allocate_from(*found, *cls, s);
  }
  [[gnu::noinline]] result<void*> allocate_from(stream_state* st, detail::size_class cls, stream_ref s) noexcept {
    if (st != &overflow_)
      if (void* other = take_other(*st, cls)) return other;
    const int device = device_for(st, s);
    auto from_upstream = [&] {
      return order_.on_device(device, [&]() -> result<void*> {
        auto got = upstream_.allocate(s, cls.bytes, block_alignment);
        if (got) served(device >= 0 ? device : order_.current_device());  // -1: a default stream, on the current one
        return got;
      });
    };
    auto fresh = from_upstream();
    if (!fresh && detail::is_out_of_memory(fresh.error()))
      fresh = retry_after_out_of_memory(fresh.error(), cls.bytes, device, from_upstream);
    if (!fresh) return fresh.error();
    reserve(cls.bytes, 1);
    const detail::lock_guard<detail::spin_lock> lock(st->lock);
    st->in_use(cls.bytes, 1);
    return *fresh;
  }
  // The upstream refused `bytes` for `device` (-1: the current one): gives the cache back, calls the hook, retries once
  // (`again`). A failure again carries the device's figures then and the cache's from before the release.
  template <class Again>
  [[gnu::cold, gnu::noinline]] result<void*> retry_after_out_of_memory(const error& refused, std::size_t bytes,
                                                                       int device, Again& again) noexcept {
    constexpr const char* api = "caching_pool::allocate";
    const int on = device >= 0 ? device : order_.current_device();
    out_of_memory_info before = refused.oom() != nullptr ? *refused.oom() : detail::device_figures(bytes, on);
    before.requested_bytes = bytes;
    cached_figures(before);
    release();
    retries_.fetch_add(1, detail::memory_order_relaxed);
    out_of_memory_hook hook = nullptr;
    void* context = nullptr;
    {
      const detail::lock_guard<detail::mutex> lock(mutex_);
      hook = hook_, context = hook_context_;
    }
    if (hook != nullptr)
      hook(error(errc::out_of_memory_retry, api, "out of memory; the cache was given back, one retry follows")
               .with_out_of_memory(before),
           context);
    auto fresh = again();
    if (fresh || !detail::is_out_of_memory(fresh.error())) return fresh;
    out_of_memory_info after =
        fresh.error().oom() != nullptr ? *fresh.error().oom() : detail::device_figures(bytes, on);
    after.requested_bytes = bytes;
    after.cached_bytes = before.cached_bytes, after.largest_cached_block = before.largest_cached_block;
    after.known |= out_of_memory_info::cache;
    return fresh.error().with_api(api).with_out_of_memory(after);
  }
  void cached_figures(out_of_memory_info& info) const noexcept {  // the blocks in the caches, and the largest
    const detail::lock_guard<detail::mutex> lock(mutex_);
    std::uint64_t bytes = 0, largest = 0;
    const auto count = [&](std::size_t block_bytes, std::size_t blocks) {
      bytes += block_bytes * blocks;
      if (blocks != 0 && block_bytes > largest) largest = block_bytes;
    };
    for (const stream_state* st : states_) {
      const detail::lock_guard<detail::spin_lock> st_lock(st->lock);
      for (std::size_t c = 0; st->lists && c < detail::size_classes; ++c)
        count(detail::size_class_bytes(c), st->lists[c].size());
    }
    for (const device_block& b : stranded_) count(b.bytes, 1);
    info.cached_bytes = bytes, info.largest_cached_block = largest;
    info.known |= out_of_memory_info::cache;
  }
  // False: `st` retired, or `p` is another device's block (it must not be handed out as `st`'s device's).
  [[gnu::always_inline]] bool cache(stream_state& st, void* p, detail::size_class cls, stream_ref s) noexcept {
    if (!belongs(st, p)) [[unlikely]]
      return false;
    {
      const detail::lock_guard<detail::spin_lock> lock(st.lock);
      if (!st.retired && st.lists && !st.demanded) [[likely]] {
        push_own(st, p, cls);
        return true;
      }
    }
    return marking(st, s, [&st, p, cls] {  // it has no lists yet, was asked to mark or has retired
      if (st.retired) return false;
      if (!st.lists) st.lists.reset(new detail::vec<block>[detail::size_classes]());
      push_own(st, p, cls);
      return true;
    });
  }
  [[gnu::noinline]] void deallocate_checked(stream_ref s, void* p, std::size_t bytes) noexcept {
    if (p == nullptr) return;
    constexpr const char* api = "caching_pool::deallocate";
    const detail::size_class cls = detail::class_of(bytes, api).value_or(detail::size_class{0, bytes});
    status usable = order_.usable(s, api);
    if (!usable && usable.error() == errc::capture_active) {
      // The captured work uses the block whenever the graph is launched: a free in the capture would be a free node
      // of memory the graph did not allocate. It stays in use, out of every cache, until the pool's destruction.
      const detail::lock_guard<detail::mutex> lock(mutex_);
      captured_.push_back({block_device(p, device_for(nullptr, s)), p, cls.bytes});
      return;
    }
    for (int attempt = 0; usable && attempt < 2; ++attempt) {  // once more if the state retired under us
      auto found = state_for(s, api);
      if (!found) (void)(usable = found.error());
      else if (*found == &overflow_ || !belongs(**found, p)) break;  // another device's block: to the upstream
      else if (cache(**found, p, cls, s)) return;
    }
    if (!usable) report_release_failure(usable.error());
    if (!s.valid()) return;  // no stream to order the free on, nor a device known to wait for: it stays in use
    detail::unique_lock<detail::spin_lock> lock(overflow_.lock);  // before `reserve`: statistics() reads in-use first
    overflow_.in_use(0 - cls.bytes, std::size_t(0) - 1);
    lock.unlock();
    // On the block's own device, in the order of `s` (its last use), which may be another device's stream.
    order_.on_device(block_device(p, device_for(nullptr, s)),
                     [&] { upstream_.deallocate(s, p, cls.bytes, block_alignment); });
    reserve(0 - cls.bytes, std::size_t(0) - 1);
  }
  // The state of a stream object's reference (by the id it carries) for a request the fast path serves, else null.
  // No lock, no CUDA call.
  stream_state* known_state(stream_ref s, std::size_t bytes, std::size_t alignment) const noexcept {
    const std::uint64_t id = detail::stream_identity::carried(s);
    if (id == detail::no_stream_id || bytes - 1 >= detail::max_class_bytes || (alignment & (alignment - 1)) != 0 ||
        alignment - 1 >= block_alignment)
      return nullptr;
    return find(id);
  }
  stream_state* find(std::uint64_t id) const noexcept {  // slots_ hold no retired state
    const std::size_t used = used_.load(detail::memory_order_acquire);
    for (std::size_t i = 0; i < used; ++i) {
      stream_state* st = slots_[i].load(detail::memory_order_acquire);
      if (st != nullptr && st->id == id) return st;
    }
    return nullptr;
  }
  // `s`'s state, by the id its stream object recorded, else by cudaStreamGetId's (usable() said it is not capturing).
  result<stream_state*> state_for(stream_ref s, const char* api) noexcept {
    if (stream_state* st = known_state(s, 1, 1)) return st;
    if (detail::is_default_stream(s.get())) return &overflow_;
    std::uint64_t id = detail::stream_identity::carried(s);
    if (id == detail::no_stream_id) {
      auto asked = order_.id(s, api);
      if (!asked) return asked.error();
      id = *asked;
    }
    if (stream_state* st = find(id)) return st;
    marker gone{};  // a retired state's event, destroyed unlocked
    auto made = adopt(s, id, api, gone);
    order_.destroy(gone);
    return made;
  }
  // Makes stream `id`'s state, retiring another at the handle; all slots taken: an empty state's, else overflow_.
  result<stream_state*> adopt(stream_ref s, std::uint64_t id, const char* api, marker& gone) noexcept {
    const detail::lock_guard<detail::mutex> lock(mutex_);
    const std::size_t used = used_.load(detail::memory_order_relaxed);
    std::size_t slot = 0;  // the handle's, else `used`: a new one
    while (slot < used && slots_[slot].load(detail::memory_order_relaxed)->handle != s.get()) ++slot;
    stream_state* const at_handle = slot < used ? slots_[slot].load(detail::memory_order_relaxed) : nullptr;
    if (at_handle != nullptr && at_handle->id == id) return at_handle;
    auto device = order_.device(s, api);
    if (!device) return device.error();
    // One hold of the lock, so a free that found the state sees it retired; false: `only_empty` and it caches blocks.
    auto retire = [&](std::size_t at, bool only_empty) {
      stream_state& old = *slots_[at].load(detail::memory_order_relaxed);
      const detail::lock_guard<detail::spin_lock> held(old.lock);
      const bool empty = newest(old) == 0;
      if (only_empty && !empty) return false;
      old.retired = true;
      old.demanded = false;
      if (empty) gone = drop(old);
      return true;
    };
    if (at_handle != nullptr) retire(slot, false);
    for (std::size_t i = 0; i < used && slot == max_streams; ++i)  // all taken
      if (retire(i, true)) slot = i;
    detail::owner<detail::vec<block>[]> taken_over;  // else a finished state's blocks, kept by the new state
    if (slot == max_streams) slot = take_over(*device, taken_over, gone);
    if (slot == max_streams) return &overflow_;
    states_.push_back(new stream_state(s.get(), id, *device));
    stream_state& made = *states_.back();
    made.eager = made.demanded = slot >= eager_slots_from;
    made.lists = std::move(taken_over);
    made.frees = made.recorded = made.passed = newest(made);  // the blocks taken over are finished: for any stream
    slots_[slot].store(&made, detail::memory_order_release);
    if (slot == used) used_.store(used + 1, detail::memory_order_release);  // after the slot, never before
    return states_.back();
  }
  // Under mutex_, every slot taken: retires the next state (round robin) of `device` whose cached blocks are all known
  // finished, moving them to `blocks`; its slot, else max_streams. Eager slots' states are the ones found.
  std::size_t take_over(int device, detail::owner<detail::vec<block>[]>& blocks, marker& gone) noexcept {
    for (std::size_t n = 0; n < max_streams; ++n) {
      const std::size_t at = (prune_from_ + n) % max_streams;
      stream_state& old = *slots_[at].load(detail::memory_order_relaxed);
      if (old.device != device) continue;
      const detail::lock_guard<detail::spin_lock> held(old.lock);
      const std::uint64_t cached = newest(old);
      if (cached == 0 || !is_done(old, block{nullptr, cached})) continue;  // a later mark covers the earlier ones
      blocks = std::move(old.lists);
      old.retired = true;
      old.demanded = false;
      gone = drop(old);
      prune_from_ = at + 1;
      return at;
    }
    return max_streams;
  }
  [[gnu::always_inline]] void* take_own(stream_state& st, detail::size_class cls, stream_ref s) noexcept {
    {
      const detail::lock_guard<detail::spin_lock> lock(st.lock);
      if (!st.demanded) [[likely]]
        return pop_own(st, cls);
    }
    return marking(st, s, [&st, cls] { return pop_own(st, cls); });
  }
  // `f` and, if another stream asked, a record of the event over the frees so far; a failure is reported unlocked.
  template <class F>
  [[gnu::noinline]] auto marking(stream_state& st, stream_ref s, F f) noexcept {
    detail::unique_lock<detail::spin_lock> lock(st.lock);
    const auto out = f();
    status marked;
    if (st.demanded) {
      st.demanded = st.eager;  // an eager state records after each free
      if (st.recorded != st.frees) marked = order_.mark(st.event, st.device, s);
      if (marked) st.recorded = st.frees;
    }
    lock.unlock();
    if (!marked) report_release_failure(marked.error());
    return out;
  }
  static void push_own(stream_state& st, void* p, detail::size_class cls) noexcept {
    st.lists[cls.index].push_back(block{p, ++st.frees});
    st.in_use(0 - cls.bytes, std::size_t(0) - 1);
  }
  static void* pop_own(stream_state& st, detail::size_class cls) noexcept {
    if (!st.lists || st.lists[cls.index].empty()) return nullptr;
    void* address = st.lists[cls.index].back().address;
    st.lists[cls.index].pop_back();
    st.in_use(cls.bytes, 1);
    ++st.reused;
    return address;
  }
  // The oldest finished block of class `cls` of another stream on `me`'s device; asks for a mark where none covers.
  void* take_other(stream_state& me, detail::size_class cls) noexcept {
    const std::size_t used = used_.load(detail::memory_order_acquire);
    for (std::size_t i = 0; i < used; ++i) {
      stream_state* other = slots_[i].load(detail::memory_order_acquire);
      if (other == nullptr || other == &me || other->device != me.device) continue;
      const detail::unique_lock<detail::spin_lock> lock(other->lock, detail::try_to_lock);
      if (!lock || other->retired || !other->lists || other->lists[cls.index].empty()) continue;
      auto& list = other->lists[cls.index];
      if (!is_done(*other, list.front())) {
        if (list.front().mark > other->recorded) other->demanded = true;
        continue;
      }
      void* address = list.front().address;
      list.erase(list.begin());
      other->in_use(cls.bytes, 1);
      ++other->reused;
      ++other->reused_across;
      return address;
    }
    return nullptr;
  }
  void give_back(bool wait) noexcept {  // the finished blocks (all when `wait`); asks for marks where none covers
    [[maybe_unused]] const auto relaxed = order_.relaxed();
    detail::vec<device_block> leaving;
    detail::vec<marker> gone;  // events of retired states: destroyed with no lock held
    detail::unique_lock<detail::mutex> lock(mutex_);
    leaving.swap(stranded_);  // finished blocks an earlier give-back could not return
    if (wait) wait_for_cached();
    for (stream_state* held : states_) {
      stream_state& st = *held;
      const detail::lock_guard<detail::spin_lock> st_lock(st.lock);
      if (!wait && newest(st) > st.recorded && !st.retired) st.demanded = true;
      for (std::size_t c = 0; st.lists && c < detail::size_classes; ++c) {
        auto& list = st.lists[c];
        block* done = list.begin();
        while (done != list.end() && is_done(st, *done)) ++done;
        for (block* b = list.begin(); b != done; ++b)
          leaving.push_back({st.device, b->address, detail::size_class_bytes(c)});
        list.erase(list.begin(), done);
      }
      if (st.retired && newest(st) == 0) gone.push_back(drop(st));  // nothing will be cached there again
    }
    lock.unlock();
    for (marker m : gone) order_.destroy(m);
    detail::vec<device_block> kept;  // no stream to free them on: cached, still reserved
    for (auto& [device, address, bytes] : leaving) {
      if (order_.give_back(device, [&](stream_ref s) { upstream_.deallocate(s, address, bytes, block_alignment); }))
        reserve(0 - bytes, std::size_t(0) - 1);
      else kept.push_back({device, address, bytes});
    }
    if (kept.empty()) return;
    lock.lock();
    stranded_.append(kept.begin(), kept.end());
  }
  // Under mutex_: waits for cached frees by the event that covers them. Frees no event covers get one, recorded on
  // their stream only while a stream object owns it (the stream cannot end meanwhile: detail/live_streams.hpp) and it
  // is not capturing; the rest (raw handles, ended streams, a stream capturing now) wait for their device. A handle
  // alone is never used: it may be another stream's now, maybe one being captured, whose graph a record would join.
  void wait_for_cached() noexcept {
    struct pending {
      stream_state* st;
      std::uint64_t upto;  // the frees it covers
      bool by_device;
      marker event;
    };
    detail::vec<pending> waits;
    detail::vec<int> devices;
    detail::vec<error> failures;  // of records, reported with no stream state's lock held
    for (stream_state* held : states_) {
      stream_state& st = *held;
      const detail::lock_guard<detail::spin_lock> st_lock(st.lock);
      const std::uint64_t cached = newest(st);
      // Blocks no event covers: an event now, on the stream if a stream object still owns it (docs/decisions.md).
      if (cached > st.recorded && !st.retired) {
        if (auto marked = order_.mark_live(st.event, st.device, st.handle, st.id); !marked)
          failures.push_back(marked.error());
        else if (*marked) st.recorded = st.frees;
      }
      const bool by_device = cached > st.recorded;
      if (by_device && !devices.contains(st.device)) devices.push_back(st.device);
      if (by_device || cached > st.passed)
        waits.push_back({&st, by_device ? st.frees : st.recorded, by_device, st.event});
    }
    for (const error& failure : failures) report_release_failure(failure);
    devices.erase_if([&](int device) { return !order_.wait_device(device); });  // keeps those synchronized
    for (const auto& [st, upto, by_device, event] : waits) {
      const bool done = by_device ? devices.contains(st->device) : order_.wait(event);
      const detail::lock_guard<detail::spin_lock> st_lock(st->lock);
      if (done && upto > st->passed) st->passed = upto;
    }
  }

  Upstream& upstream_;
  [[no_unique_address]] StreamOrder order_;
  mutable detail::mutex mutex_;  // states_, slot changes, stranded_, captured_, prune_from_
  detail::vec<stream_state*> states_;  // every state made, live or retired, until destruction (owned)
  detail::vec<device_block> stranded_;  // finished, not yet given back
  detail::vec<device_block> captured_;  // freed during a capture: the graphs' until destruction
  std::size_t prune_from_ = 0;  // where the next search for a finished state to take over begins
  out_of_memory_hook hook_ = nullptr;  // under mutex_, with its context
  void* hook_context_ = nullptr;
  detail::atomic<stream_state*> slots_[max_streams] = {};
  detail::atomic<std::size_t> used_{0};
  stream_state overflow_{nullptr, 0, -1};
  detail::atomic<std::size_t> reserved_bytes_{0}, reserved_blocks_{0}, peak_{0}, upstream_allocations_{0}, retries_{0};
  detail::atomic<std::uint64_t> served_{0};  // a bit per device the pool has taken blocks from (63: 63 and above)
};
/// Pools compare by identity: each caches blocks of its own.
template <class Upstream, class StreamOrder>
bool operator==(const caching_pool<Upstream, StreamOrder>& a, const caching_pool<Upstream, StreamOrder>& b) noexcept {
  return &a == &b;
}
static_assert(memory_resource_for<caching_pool<device_pool_resource>, device>);

/// What a statistics_adaptor counts.
struct allocation_statistics {
  std::size_t bytes_outstanding = 0;  ///< bytes allocated and not yet freed (as asked)
  std::size_t blocks_outstanding = 0;  ///< blocks allocated and not yet freed
  std::size_t peak_bytes = 0;  ///< the most bytes_outstanding has been
};

/// Counts bytes (as asked) and blocks outstanding through `Upstream`, and the peak of bytes. Lock-free.
template <class Upstream>
class statistics_adaptor {
 public:
  using kind = typename Upstream::kind;  ///< the upstream's kind
  explicit statistics_adaptor(Upstream& upstream) noexcept : upstream_(upstream) {}  ///< Counts through `upstream`.
  /// As the upstream's.
  [[nodiscard]] result<void*> allocate(stream_ref s, std::size_t bytes, std::size_t alignment) noexcept {
    if (bytes == 0) return nullptr;
    auto got = upstream_.allocate(s, bytes, alignment);
    if (!got) return got;
    const std::size_t now = bytes_.fetch_add(bytes, detail::memory_order_relaxed) + bytes;
    blocks_.fetch_add(1, detail::memory_order_relaxed);
    std::size_t peak = peak_.load(detail::memory_order_relaxed);
    while (now > peak && !peak_.compare_exchange_weak(peak, now, detail::memory_order_relaxed)) {}
    return got;
  }
  /// As the upstream's.
  void deallocate(stream_ref s, void* p, std::size_t bytes, std::size_t alignment) noexcept {
    if (p == nullptr) return;
    upstream_.deallocate(s, p, bytes, alignment);
    bytes_.fetch_sub(bytes, detail::memory_order_relaxed);
    blocks_.fetch_sub(1, detail::memory_order_relaxed);
  }
  /// A snapshot (each counter read on its own).
  [[nodiscard]] allocation_statistics statistics() const noexcept {
    return {bytes_.load(detail::memory_order_relaxed), blocks_.load(detail::memory_order_relaxed),
            peak_.load(detail::memory_order_relaxed)};
  }

 private:
  Upstream& upstream_;
  detail::atomic<std::size_t> bytes_{0}, blocks_{0}, peak_{0};
};
/// Adaptors compare by identity: each counts what went through it.
template <class Upstream>
bool operator==(const statistics_adaptor<Upstream>& a, const statistics_adaptor<Upstream>& b) noexcept {
  return &a == &b;
}
static_assert(memory_resource_for<statistics_adaptor<device_pool_resource>, device>);

/// Refuses (out_of_memory, naming the budget) what would take the bytes outstanding through `Upstream` past a budget.
template <class Upstream>
class limit_adaptor {
 public:
  using kind = typename Upstream::kind;  ///< the upstream's kind
  /// Allows at most `budget_bytes` outstanding through `upstream`.
  limit_adaptor(Upstream& upstream, std::size_t budget_bytes) noexcept : upstream_(upstream), budget_(budget_bytes) {}
  /// As the upstream's, within the budget. Errors: out_of_memory (over budget); the upstream's.
  [[nodiscard]] result<void*> allocate(stream_ref s, std::size_t bytes, std::size_t alignment) noexcept {
    if (bytes == 0) return nullptr;
    std::size_t used = used_.load(detail::memory_order_relaxed);
    do {
      if (bytes > budget_ - used)
        return detail::with_device_figures(
            error(errc::out_of_memory, "limit_adaptor::allocate",
                  "%zu bytes would exceed the budget of %zu bytes (%zu in use)", bytes, budget_, used),
            bytes, -1);
    } while (!used_.compare_exchange_weak(used, used + bytes, detail::memory_order_relaxed));
    auto got = upstream_.allocate(s, bytes, alignment);
    if (!got) used_.fetch_sub(bytes, detail::memory_order_relaxed);
    return got;
  }
  /// As the upstream's.
  void deallocate(stream_ref s, void* p, std::size_t bytes, std::size_t alignment) noexcept {
    if (p == nullptr) return;
    upstream_.deallocate(s, p, bytes, alignment);
    used_.fetch_sub(bytes, detail::memory_order_relaxed);
  }
  [[nodiscard]] std::size_t budget() const noexcept { return budget_; }  ///< The budget in bytes.
  [[nodiscard]] std::size_t used() const noexcept { return used_.load(detail::memory_order_relaxed); }  ///< In use.

 private:
  Upstream& upstream_;
  std::size_t budget_;
  detail::atomic<std::size_t> used_{0};
};
/// Adaptors compare by identity: each holds a budget of its own.
template <class Upstream>
bool operator==(const limit_adaptor<Upstream>& a, const limit_adaptor<Upstream>& b) noexcept {
  return &a == &b;
}
static_assert(memory_resource_for<limit_adaptor<device_pool_resource>, device>);

}  // namespace cudamem
