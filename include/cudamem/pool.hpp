// SPDX-License-Identifier: MIT
/// \file
/// Pools and adaptors over the memory resources of resource.hpp, and per-stream registration (registry.hpp).
///
///     status set_pool_release_threshold(device_id, bytes = unlimited)   keep cudaMallocAsync's memory across syncs
///     caching_pool<Upstream>            free lists per (stream, size class); reuse across streams after an event
///       trim(), release(), statistics()
///     statistics_adaptor<Upstream>      bytes and blocks outstanding, peak
///     limit_adaptor<Upstream>           a byte budget; over it: errc::out_of_memory naming the budget
///
/// Each holds its upstream by reference: the upstream must outlive it. Every resource here takes zero bytes as "no
/// allocation": allocate returns null, deallocate accepts null. See docs/allocators.md.
#pragma once

#include <cudamem/detail/stream_order.hpp>
#include <cudamem/registry.hpp>
#include <cudamem/resource.hpp>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace cudamem {

/// Sets cudaMemPoolAttrReleaseThreshold of device `id`'s default memory pool (the one device_pool_resource draws
/// from): memory up to `bytes` stays in the pool when a stream synchronizes instead of going back to the driver, so
/// the next cudaMallocAsync is cheap. Process-wide for that device; does not synchronize. Errors: out_of_range (no
/// such device); not_supported (no memory pools); CUDA errors.
[[nodiscard]] inline status set_pool_release_threshold(device_id id, std::uint64_t bytes = ~std::uint64_t{0}) noexcept {
  constexpr const char* api = "set_pool_release_threshold";
  auto pools = detail::cached_attribute<cudaDevAttrMemoryPoolsSupported>(id, api);
  if (!pools) return pools.error();
  if (*pools == 0) return error(errc::not_supported, api, "device %d has no stream-ordered memory pools", id.get());
  cudaMemPool_t pool = nullptr;
  CUDAMEM_TRY(detail::check(cudaDeviceGetDefaultMemPool(&pool, id.get()), api, "cudaDeviceGetDefaultMemPool"));
  return detail::check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &bytes), api,
                       "cudaMemPoolSetAttribute");
}

namespace detail {
inline bool is_out_of_memory(const error& e) noexcept {
  return e.cuda_status() == cudaErrorMemoryAllocation || e.code() == errc::out_of_memory;
}
}  // namespace detail

/// What a caching_pool holds and has done (a snapshot).
struct caching_statistics {
  std::size_t bytes_in_use = 0;           ///< bytes handed out and not yet freed (by size class)
  std::size_t blocks_in_use = 0;          ///< blocks handed out and not yet freed
  std::size_t peak_bytes_in_use = 0;      ///< the most bytes_in_use has been
  std::size_t bytes_cached = 0;           ///< bytes freed into the pool, not yet given back upstream
  std::size_t blocks_cached = 0;          ///< blocks freed into the pool, not yet given back upstream
  std::size_t reused = 0;                 ///< allocations served from the cache
  std::size_t reused_across_streams = 0;  ///< of those, blocks freed on another stream
  std::size_t upstream_allocations = 0;   ///< allocations the upstream served
  std::size_t out_of_memory_retries = 0;  ///< times the cache was given back after out-of-memory
};

/// Caches blocks of `Upstream` (any resource) in free lists per (stream, size class: four per power of two from 256
/// bytes). A block freed on stream A is reused on A at once (stream order makes that safe) and on another stream B
/// of A's device only after an event recorded on A at the free has completed (cudaEventQuery: B never waits for A,
/// and A's busy blocks are passed over). On out-of-memory it waits for and gives back every cached block, then
/// retries once. Thread-safe (one mutex). Refuses a capturing stream (capture_active): register device_pool_resource
/// on streams you capture. Blocks still in use when it is destroyed are lost to it; it must outlive its buffers.
template <class Upstream, class StreamOrder = detail::cuda_stream_order>
class caching_pool {
 public:
  using kind = typename Upstream::kind;  ///< the upstream's kind
  static constexpr std::size_t block_alignment = 256;  ///< every block is this aligned (CUDA's guarantee)

  /// A pool over `upstream`, which must outlive it; `order` is how streams are told apart and ordered (CUDA events).
  explicit caching_pool(Upstream& upstream, StreamOrder order = {}) noexcept
      : upstream_(upstream), order_(std::move(order)) {}
  caching_pool(const caching_pool&) = delete;
  caching_pool& operator=(const caching_pool&) = delete;
  ~caching_pool() { release(); }  ///< Gives every cached block back (waits for their streams).

  /// A block of at least `bytes` usable on `s` in its order; does not synchronize. Errors: invalid_argument
  /// (alignment not a power of two); not_supported (alignment > 256); size_overflow; capture_active; the upstream's
  /// (out of memory: after giving back the cache and retrying once).
  [[nodiscard]] result<void*> allocate(stream_ref s, std::size_t bytes, std::size_t alignment) noexcept {
    constexpr const char* api = "caching_pool::allocate";
    CUDAMEM_TRY(detail::check_alignment(alignment, api));
    if (bytes == 0) return nullptr;
    auto cls = detail::class_of(bytes, api);
    if (!cls) return cls.error();
    auto key = order_.identify(s, api);
    if (!key) return key.error();
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      if (void* cached = take_cached(state_of(*key), *cls)) return cached;
    }
    auto fresh = upstream_.allocate(s, cls->bytes, block_alignment);
    if (!fresh && detail::is_out_of_memory(fresh.error())) {
      release();
      count([](caching_statistics& st) { ++st.out_of_memory_retries; });
      fresh = upstream_.allocate(s, cls->bytes, block_alignment);
    }
    if (!fresh) return fresh.error();
    count([&](caching_statistics& st) {
      ++st.upstream_allocations;
      hand_out(st, cls->bytes);
    });
    return *fresh;
  }
  /// Takes a block back into the cache for `s` (the stream its last use was queued on); does not synchronize. A
  /// stream the pool cannot use (capturing, moved from) gets it straight back to the upstream, and the release
  /// handler hears why.
  void deallocate(stream_ref s, void* p, std::size_t bytes, std::size_t) noexcept {
    if (p == nullptr) return;
    constexpr const char* api = "caching_pool::deallocate";
    const detail::size_class cls = detail::class_of(bytes, api).value_or(detail::size_class{0, bytes});
    auto key = order_.identify(s, api);
    status marked = key ? status() : status(key.error());
    if (key) {
      const std::lock_guard<std::mutex> lock(mutex_);
      const std::size_t index = state_of(*key);
      stream_state& st = streams_[index];
      marked = order_.mark(st.event, st.device, s);
      if (marked) {
        lists_[list_key(index, cls)].push_back(block{p, cls.bytes, ++st.recorded});
        stats_.bytes_cached += cls.bytes;
        ++stats_.blocks_cached;
        take_back(stats_, cls.bytes);
        return;
      }
    }
    report_release_failure(marked.error());
    upstream_.deallocate(s, p, cls.bytes, block_alignment);
    count([&](caching_statistics& st) { take_back(st, cls.bytes); });
  }

  /// Gives the upstream every cached block whose stream has finished with it; does not wait.
  void trim() noexcept { give_back(false); }
  /// Waits for the streams of all cached blocks, then gives every one to the upstream; synchronizes (per event).
  void release() noexcept { give_back(true); }
  /// A snapshot of the counters.
  [[nodiscard]] caching_statistics statistics() const noexcept {
    const std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

 private:
  using marker = typename StreamOrder::marker;
  struct stream_state {
    detail::stream_key key;
    int device;
    marker event{};
    std::uint64_t recorded = 0, passed = 0;  // frees marked so far; frees known done
  };
  struct block {
    void* address;
    std::size_t bytes;
    std::uint64_t mark;  // the stream's free count when it came back
  };
  // Free lists are keyed on (stream index, size class index).
  static std::uint64_t list_key(std::size_t stream_index, detail::size_class cls) noexcept {
    return (std::uint64_t{stream_index} << 16) | cls.index;
  }
  static void hand_out(caching_statistics& st, std::size_t bytes) noexcept {
    st.bytes_in_use += bytes;
    ++st.blocks_in_use;
    if (st.bytes_in_use > st.peak_bytes_in_use) st.peak_bytes_in_use = st.bytes_in_use;
  }
  static void take_back(caching_statistics& st, std::size_t bytes) noexcept {
    st.bytes_in_use -= bytes;
    --st.blocks_in_use;
  }
  template <class Update>
  void count(Update&& update) noexcept {
    const std::lock_guard<std::mutex> lock(mutex_);
    update(stats_);
  }

  // The index of the stream's state, added on first sight. Under the mutex.
  std::size_t state_of(detail::stream_key key) {
    for (std::size_t i = 0; i < streams_.size(); ++i)
      if (streams_[i].key.id == key.id && streams_[i].device == key.device) return i;
    streams_.push_back(stream_state{key, key.device});
    return streams_.size() - 1;
  }
  // Whether the free that cached `b` on stream `owner` is known to be done, asking the event at most once.
  bool is_done(stream_state& owner, const block& b) noexcept {
    if (b.mark <= owner.passed) return true;
    if (owner.recorded > owner.passed && order_.passed(owner.event)) owner.passed = owner.recorded;
    return b.mark <= owner.passed;
  }
  // A cached block of class `cls` for stream `me`: its own newest, else the oldest finished one of a stream of the
  // same device. Under the mutex.
  void* take_cached(std::size_t me, detail::size_class cls) noexcept {
    auto take = [&](std::vector<block>& list, std::size_t at, bool across) {
      void* address = list[at].address;
      list.erase(list.begin() + static_cast<std::ptrdiff_t>(at));
      stats_.bytes_cached -= cls.bytes;
      --stats_.blocks_cached;
      ++stats_.reused;
      if (across) ++stats_.reused_across_streams;
      hand_out(stats_, cls.bytes);
      return address;
    };
    if (auto own = lists_.find(list_key(me, cls)); own != lists_.end() && !own->second.empty())
      return take(own->second, own->second.size() - 1, false);
    for (std::size_t other = 0; other < streams_.size(); ++other) {
      if (other == me || streams_[other].device != streams_[me].device) continue;
      auto list = lists_.find(list_key(other, cls));
      if (list != lists_.end() && !list->second.empty() && is_done(streams_[other], list->second.front()))
        return take(list->second, 0, true);
    }
    return nullptr;
  }
  // Moves the blocks to give back out of the lists (all, or the finished ones), then frees them outside the lock.
  void give_back(bool wait) noexcept {
    std::vector<std::pair<int, block>> leaving;
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      for (auto& [key, list] : lists_) {
        if (list.empty()) continue;
        stream_state& owner = streams_[static_cast<std::size_t>(key >> 16)];
        if (wait && owner.recorded > owner.passed) {
          order_.wait(owner.event);
          owner.passed = owner.recorded;
        }
        std::size_t done = 0;
        while (done < list.size() && is_done(owner, list[done])) ++done;
        for (std::size_t i = 0; i < done; ++i) {
          leaving.emplace_back(owner.device, list[i]);
          stats_.bytes_cached -= list[i].bytes;
          --stats_.blocks_cached;
        }
        list.erase(list.begin(), list.begin() + static_cast<std::ptrdiff_t>(done));
      }
      if (wait) forget_streams();
    }
    for (auto& [device, b] : leaving)
      order_.give_back(device, [&](stream_ref s) { upstream_.deallocate(s, b.address, b.bytes, block_alignment); });
  }
  // After release(): no block is cached, so the per-stream state (one event each) can go.
  void forget_streams() noexcept {
    for (stream_state& st : streams_) order_.destroy(st.event);
    streams_.clear();
    lists_.clear();
  }

  Upstream& upstream_;
  [[no_unique_address]] StreamOrder order_;
  mutable std::mutex mutex_;
  std::vector<stream_state> streams_;
  std::unordered_map<std::uint64_t, std::vector<block>> lists_;
  caching_statistics stats_;
};
static_assert(memory_resource_for<caching_pool<device_pool_resource>, device>);

/// Bytes and blocks outstanding through an upstream resource, and the peak. Lock-free; thread-safe.
struct allocation_statistics {
  std::size_t bytes_outstanding = 0;   ///< bytes allocated and not yet freed (as asked)
  std::size_t blocks_outstanding = 0;  ///< blocks allocated and not yet freed
  std::size_t peak_bytes = 0;          ///< the most bytes_outstanding has been
};

/// Counts what goes through `Upstream`: bytes (as asked) and blocks outstanding, and the peak of bytes. Adds nothing
/// else; errors are the upstream's.
template <class Upstream>
class statistics_adaptor {
 public:
  using kind = typename Upstream::kind;  ///< the upstream's kind
  /// Counts what goes through `upstream`, which must outlive it.
  explicit statistics_adaptor(Upstream& upstream) noexcept : upstream_(upstream) {}
  /// As the upstream's; zero bytes: null, counted as nothing.
  [[nodiscard]] result<void*> allocate(stream_ref s, std::size_t bytes, std::size_t alignment) noexcept {
    if (bytes == 0) return nullptr;
    auto got = upstream_.allocate(s, bytes, alignment);
    if (!got) return got;
    const std::size_t now = bytes_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    blocks_.fetch_add(1, std::memory_order_relaxed);
    std::size_t peak = peak_.load(std::memory_order_relaxed);
    while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {}
    return got;
  }
  /// As the upstream's; null does nothing.
  void deallocate(stream_ref s, void* p, std::size_t bytes, std::size_t alignment) noexcept {
    if (p == nullptr) return;
    upstream_.deallocate(s, p, bytes, alignment);
    bytes_.fetch_sub(bytes, std::memory_order_relaxed);
    blocks_.fetch_sub(1, std::memory_order_relaxed);
  }
  /// A snapshot (each counter read on its own).
  [[nodiscard]] allocation_statistics statistics() const noexcept {
    return {bytes_.load(std::memory_order_relaxed), blocks_.load(std::memory_order_relaxed),
            peak_.load(std::memory_order_relaxed)};
  }

 private:
  Upstream& upstream_;
  std::atomic<std::size_t> bytes_{0}, blocks_{0}, peak_{0};
};
static_assert(memory_resource_for<statistics_adaptor<device_pool_resource>, device>);

/// Refuses an allocation that would take the bytes outstanding through `Upstream` past a budget, with
/// errc::out_of_memory naming the budget; nothing is allocated then. Lock-free; thread-safe.
template <class Upstream>
class limit_adaptor {
 public:
  using kind = typename Upstream::kind;  ///< the upstream's kind
  /// Allows at most `budget_bytes` outstanding through `upstream`, which must outlive it.
  limit_adaptor(Upstream& upstream, std::size_t budget_bytes) noexcept : upstream_(upstream), budget_(budget_bytes) {}
  /// As the upstream's, within the budget; zero bytes: null. Errors: out_of_memory (over budget); the upstream's.
  [[nodiscard]] result<void*> allocate(stream_ref s, std::size_t bytes, std::size_t alignment) noexcept {
    if (bytes == 0) return nullptr;
    std::size_t used = used_.load(std::memory_order_relaxed);
    do {
      if (bytes > budget_ - used)
        return error(errc::out_of_memory, "limit_adaptor::allocate",
                     "%zu bytes would exceed the budget of %zu bytes (%zu in use)", bytes, budget_, used);
    } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
    auto got = upstream_.allocate(s, bytes, alignment);
    if (!got) used_.fetch_sub(bytes, std::memory_order_relaxed);
    return got;
  }
  /// As the upstream's; null does nothing.
  void deallocate(stream_ref s, void* p, std::size_t bytes, std::size_t alignment) noexcept {
    if (p == nullptr) return;
    upstream_.deallocate(s, p, bytes, alignment);
    used_.fetch_sub(bytes, std::memory_order_relaxed);
  }
  [[nodiscard]] std::size_t budget() const noexcept { return budget_; }  ///< The budget in bytes.
  [[nodiscard]] std::size_t used() const noexcept { return used_.load(std::memory_order_relaxed); }  ///< In use.

 private:
  Upstream& upstream_;
  std::size_t budget_;
  std::atomic<std::size_t> used_{0};
};
static_assert(memory_resource_for<limit_adaptor<device_pool_resource>, device>);

}  // namespace cudamem
