// SPDX-License-Identifier: MIT
/// \file
/// A ledger of allocations across resources, per device, per stream and per source, and the adaptor that reports into
/// it. A source is one statistics_resource: register it on streams, and it is the ledger's view of those registrations.
///
///     ledger book;                                    thread-safe; outlives its sources
///     statistics_resource<Upstream> counted(upstream, book, "name")   counts what goes through it into `book`
///     counted.usage([since])   counted.usage(stream, [since])   book.device(id, [since])            -> usage
///     book.for_each_stream(f(const ledger_row&))   book.for_each_source(f(const char* name, const usage&))
///     book.reset()          peaks from now, totals from zero: what since::reset reads
///     book.balanced()       no source holds a block
///     book.attach(sink) / detach()   each allocation and free to a recorder (trace.hpp writes a Chrome trace)
///     usage: bytes_in_use, blocks_in_use, peak_bytes, peak_blocks, allocated_bytes, allocations, freed_bytes, frees,
///            cached_bytes (a source over a caching_pool: bytes cached there, not in use)
///
/// The hot path touches one counter cell, the (source, stream)'s, with no lock and, on the thread that first used the
/// stream, no atomic read-modify-write (that thread finds the cell it used last without a lookup); only an allocation
/// that may pass a peak takes the ledger's lock. Counts are in bytes as asked of the adaptor. See docs/allocators.md
/// ("The ledger").
#pragma once

#include <cudamem/detail/storage.hpp>
#include <cudamem/detail/stream_identity.hpp>
#include <cudamem/detail/sync.hpp>
#include <cudamem/resource.hpp>

#include <cstddef>
#include <cstdint>
#include <new>

namespace cudamem {

/// Which figures a view reads: since the ledger was made, or since its last reset() (peaks and totals; in-use figures
/// are the same for both).
enum class since : unsigned char {
  start,  ///< since the ledger was made
  reset,  ///< since its last reset()
};

/// One view of a ledger: a source, a device, or a stream of a source.
struct usage {
  std::int64_t bytes_in_use = 0;  ///< allocated minus freed (a stream's can be negative: freed on another stream)
  std::int64_t blocks_in_use = 0;  ///< allocations minus frees
  std::uint64_t peak_bytes = 0;  ///< the most bytes_in_use has been
  std::uint64_t peak_blocks = 0;  ///< the most blocks_in_use has been
  std::uint64_t allocated_bytes = 0;  ///< bytes of all allocations
  std::uint64_t allocations = 0;  ///< allocations
  std::uint64_t freed_bytes = 0;  ///< bytes of all frees
  std::uint64_t frees = 0;  ///< frees
  std::uint64_t cached_bytes = 0;  ///< a source over a caching_pool: bytes the pool caches (not in use); else 0
};

/// What a ledger tells its sink of each allocation and free, as it happens.
struct allocation_event {
  const char* source;  ///< the statistics_resource's name
  int device;  ///< the stream's device (-1: unknown)
  std::uint64_t stream;  ///< the stream's key (ledger_row::stream)
  const void* address;  ///< the block
  std::size_t bytes;  ///< as asked
  bool is_free;  ///< a free, else an allocation
};
/// Where a ledger sends its events: `record(context, event)`, called on the allocating thread, concurrently from
/// several threads; it must not allocate through the ledger's sources.
struct ledger_sink {
  void (*record)(void* context, const allocation_event& event) noexcept = nullptr;  ///< called per event; null: none
  void* context = nullptr;  ///< passed to record
};

/// A stream of a source, as for_each_stream gives it.
struct ledger_row {
  const char* source;  ///< the statistics_resource's name
  int device;  ///< the stream's device (-1: unknown)
  std::uint64_t stream;  ///< its cudaStreamGetId; ledger::legacy_stream, per_thread_stream, other_streams
  cudamem::usage usage;  ///< its figures
};

namespace detail {
struct ledger_cell;
/// The cell the calling thread counted into last, when it owns it: (source serial, stream, device) -> cell. A thread
/// that keeps to one stream of one adaptor finds its cell here with no lookup and no ownership check. Serials are
/// never reused, so an entry of a destroyed adaptor never matches again. Its address is the thread's token: who owns
/// a ledger cell.
struct last_ledger_cell {
  std::uint64_t serial = 0;  // 0: none
  std::uint64_t stream = 0;
  int device = 0;
  ledger_cell* cell = nullptr;
};
inline last_ledger_cell& last_cell_of_thread() noexcept {
  static thread_local last_ledger_cell last;
  return last;
}
inline std::uint64_t next_source_serial() noexcept {
  static atomic<std::uint64_t> serials{0};
  return serials.fetch_add(1, memory_order_relaxed) + 1;
}

/// The counters of one (source, device, stream). The first thread to count into it owns it: its counts are plain
/// loads and stores; any other thread adds to `foreign` atomically. An allocation adds to the allocated counters and a
/// free to the freed ones, so neither waits on the other's stores; the figures in use are their differences. An
/// allocation that takes the cell's figures in use past its limits calls the ledger (ledger::crossed), which raises the
/// peaks (the cell's, its source's and its device's) and gives each cell new limits; otherwise nothing beyond the cell
/// is touched. Sources and devices have no counters of their own: their figures are the sums of their cells'.
struct alignas(64) ledger_cell {
  enum : unsigned { allocated_bytes, allocations, freed_bytes, frees, counters };
  // The owner's line: its counters, the limits it compares with, the key cell_for compares.
  atomic<std::uint64_t> own[counters] = {};
  atomic<const void*> owner{nullptr};
  atomic<std::int64_t> limit_bytes{0},
      limit_blocks{0};  // in use beyond these: ledger::crossed (written under its lock)
  std::uint64_t stream = 0;
  alignas(64) atomic<std::uint64_t> foreign[counters] = {};
  std::uint32_t source = 0;
  int device = -1;
  atomic<std::uint64_t> peak_bytes[2] = {}, peak_blocks[2] = {};  // [since::start], [since::reset]; under the lock
  atomic<std::uint64_t> base[counters] = {};  // the counters at the last reset

  std::uint64_t total(unsigned c) const noexcept {
    return own[c].load(memory_order_relaxed) + foreign[c].load(memory_order_relaxed);
  }
  // In use: the allocated counter read before the freed one, so that a count landing meanwhile makes the figure low,
  // never high (a peak raised from it is one the figures reached). Wrapped: a stream's may go below zero.
  std::int64_t in_use(unsigned allocated, unsigned freed) const noexcept {
    const std::uint64_t in = own[allocated].load(memory_order_acquire) + foreign[allocated].load(memory_order_acquire);
    return std::int64_t(in - total(freed));
  }
  std::int64_t bytes_now() const noexcept { return in_use(allocated_bytes, freed_bytes); }
  std::int64_t blocks_now() const noexcept { return in_use(allocations, frees); }
  // Counts one allocation (IsFree false) or free by the owner thread; true when an allocation took the figures past
  // the limits (the caller then calls ledger::crossed).
  template <bool IsFree>
  [[gnu::always_inline]] bool count_owned(std::size_t bytes) noexcept {
    constexpr unsigned to_bytes = IsFree ? freed_bytes : allocated_bytes, to_blocks = IsFree ? frees : allocations;
    const std::uint64_t now_bytes = own[to_bytes].load(memory_order_relaxed) + bytes;
    const std::uint64_t now_blocks = own[to_blocks].load(memory_order_relaxed) + 1;
    own[to_bytes].store(now_bytes, memory_order_relaxed);
    own[to_blocks].store(now_blocks, memory_order_relaxed);
    if constexpr (IsFree) return false;
    else
      return past_limits(now_bytes + foreign[allocated_bytes].load(memory_order_relaxed) - total(freed_bytes),
                         now_blocks + foreign[allocations].load(memory_order_relaxed) - total(frees));
  }
  // As count_owned, by any thread: the first to count owns the cell (owned: whether that is the caller).
  template <bool IsFree>
  bool count(std::size_t bytes, const void* me, bool& owned) noexcept {
    const void* held = owner.load(memory_order_relaxed);
    if (held == nullptr && owner.compare_exchange_strong(held, me, memory_order_relaxed)) held = me;
    owned = held == me;
    if (owned) return count_owned<IsFree>(bytes);
    if constexpr (IsFree) {
      foreign[freed_bytes].fetch_add(bytes, memory_order_relaxed);
      foreign[frees].fetch_add(1, memory_order_relaxed);
      return false;
    } else {
      const std::uint64_t now_bytes = foreign[allocated_bytes].fetch_add(bytes, memory_order_relaxed) + bytes;
      const std::uint64_t now_blocks = foreign[allocations].fetch_add(1, memory_order_relaxed) + 1;
      return past_limits(now_bytes + own[allocated_bytes].load(memory_order_relaxed) - total(freed_bytes),
                         now_blocks + own[allocations].load(memory_order_relaxed) - total(frees));
    }
  }
  bool past_limits(std::uint64_t bytes, std::uint64_t blocks) const noexcept {  // figures after an allocation
    return std::int64_t(bytes) > limit_bytes.load(memory_order_relaxed) ||
           std::int64_t(blocks) > limit_blocks.load(memory_order_relaxed);
  }
  static void raise(atomic<std::uint64_t>& peak, std::int64_t now) noexcept {  // under the ledger's lock
    if (now > 0 && std::uint64_t(now) > peak.load(memory_order_relaxed))
      peak.store(std::uint64_t(now), memory_order_relaxed);
  }
  void reset() noexcept {
    for (unsigned c = 0; c < counters; ++c) base[c].store(total(c), memory_order_relaxed);
    peak_bytes[1].store(0, memory_order_relaxed);
    peak_blocks[1].store(0, memory_order_relaxed);
  }
  cudamem::usage read(since from) const noexcept {
    const unsigned p = from == since::reset ? 1 : 0;
    std::uint64_t totals[counters];
    for (unsigned c = 0; c < counters; ++c) totals[c] = total(c);
    cudamem::usage out;
    out.bytes_in_use = std::int64_t(totals[allocated_bytes] - totals[freed_bytes]);
    out.blocks_in_use = std::int64_t(totals[allocations] - totals[frees]);
    out.peak_bytes = peak_bytes[p].load(memory_order_relaxed);
    out.peak_blocks = peak_blocks[p].load(memory_order_relaxed);
    if (p == 1)
      for (unsigned c = 0; c < counters; ++c) totals[c] -= base[c].load(memory_order_relaxed);
    out.allocated_bytes = totals[allocated_bytes], out.allocations = totals[allocations];
    out.freed_bytes = totals[freed_bytes], out.frees = totals[frees];
    return out;
  }
};
}  // namespace detail

template <class Upstream>
class statistics_resource;

/// Counts allocations per device, per stream and per source (statistics_resource) for the sources that report into it.
/// Its tables are made once, at construction (about 120 KiB); should that fail, it counts nothing. It must outlive its
/// sources. Thread-safe. A view of a stream reads that stream's counters; a view of a source or a device sums its
/// streams' counters under the ledger's lock, each counter read exactly once.
class ledger {
 public:
  static constexpr std::size_t max_sources = 32;  ///< sources beyond these count as the last one ("other sources")
  static constexpr std::size_t max_devices = 64;  ///< devices from 63, and unknown ones, count as device 63
  static constexpr std::size_t max_streams = 512;  ///< (source, stream) pairs; beyond them a source's other_streams
  static constexpr std::size_t max_name = 47;  ///< a source's name is kept up to this many characters
  static constexpr std::uint64_t legacy_stream = ~std::uint64_t{0} - 1;  ///< the legacy default stream's key
  static constexpr std::uint64_t per_thread_stream = ~std::uint64_t{0} - 2;  ///< any per-thread default stream's key
  static constexpr std::uint64_t other_streams = ~std::uint64_t{0};  ///< streams CUDA did not name, and overflow

  ledger() noexcept : tables_(new(std::nothrow) tables()) {}  ///< An empty ledger.
  ledger(const ledger&) = delete;
  ledger& operator=(const ledger&) = delete;

  /// Device `id`'s figures over every source. cached_bytes is 0 (sources know theirs).
  [[nodiscard]] cudamem::usage device(device_id id, since from = since::start) const noexcept {
    if (!tables_) return {};
    const std::size_t slot = device_slot(id.get());
    const detail::lock_guard<detail::mutex> hold(tables_->lock);
    return summed(tables_->devices[slot], from,
                  [slot](const detail::ledger_cell& c) { return device_slot(c.device) == slot; });
  }
  /// `f(row)` for each (source, stream) counted so far, in the order they were first seen.
  template <class F>
  void for_each_stream(F&& f, since from = since::start) const {
    if (!tables_) return;
    const std::size_t used = tables_->used_streams.load(detail::memory_order_acquire);
    for (std::size_t i = 0; i < used; ++i) {
      const detail::ledger_cell& cell = tables_->streams[i];
      f(ledger_row{tables_->names[cell.source], cell.device, cell.stream, cell.read(from)});
    }
  }
  /// `f(name, usage)` for each source so far, with its cached bytes where it still lives.
  template <class F>
  void for_each_source(F&& f, since from = since::start) const {
    if (!tables_) return;
    const std::size_t used = tables_->used_sources.load(detail::memory_order_acquire);
    for (std::size_t i = 0; i < used; ++i) f(static_cast<const char*>(tables_->names[i]), source_usage(i, from));
  }
  /// Peaks from the figures now, totals from zero, for views since::reset; since::start views keep theirs. Counts
  /// made during the reset may land before or after it.
  void reset() noexcept {
    if (!tables_) return;
    const detail::lock_guard<detail::mutex> hold(tables_->lock);
    const std::size_t used = tables_->used_streams.load(detail::memory_order_relaxed);
    for (std::size_t i = 0; i < used; ++i) tables_->streams[i].reset();
    for (peaks& p : tables_->sources)
      p.bytes[1].store(0, detail::memory_order_relaxed), p.blocks[1].store(0, detail::memory_order_relaxed);
    for (peaks& p : tables_->devices)
      p.bytes[1].store(0, detail::memory_order_relaxed), p.blocks[1].store(0, detail::memory_order_relaxed);
    rebalance();
  }
  /// True when no source has a block outstanding: every allocation counted has been freed. (Devices are not asked: a
  /// block freed on another device's stream counts on that device.)
  [[nodiscard]] bool balanced() const noexcept {
    if (!tables_) return true;
    std::int64_t bytes[max_sources] = {}, blocks[max_sources] = {};
    const detail::lock_guard<detail::mutex> hold(tables_->lock);
    const std::size_t used = tables_->used_streams.load(detail::memory_order_relaxed);
    for (std::size_t i = 0; i < used; ++i) {
      const detail::ledger_cell& cell = tables_->streams[i];
      bytes[cell.source] += cell.bytes_now(), blocks[cell.source] += cell.blocks_now();
    }
    for (std::size_t i = 0; i < max_sources; ++i)
      if (bytes[i] != 0 || blocks[i] != 0) return false;
    return true;
  }
  /// Sends every allocation and free to `sink` from now on (one sink at a time; a new one replaces the last). Attach
  /// and detach while no allocation through the ledger's sources runs, or the old sink may hear one more event.
  void attach(ledger_sink sink) noexcept {
    sink_context_.store(sink.context, detail::memory_order_relaxed);
    sink_.store(sink.record, detail::memory_order_release);
  }
  void detach() noexcept { sink_.store(nullptr, detail::memory_order_release); }  ///< No sink from now on.

 private:
  template <class>
  friend class statistics_resource;
  using cached_fn = std::uint64_t (*)(const void*) noexcept;
  struct source_info {
    cached_fn cached = nullptr;  // null once the source is gone
    const void* object = nullptr;
  };
  struct peaks {  // of a source or a device: [since::start], [since::reset]
    detail::atomic<std::uint64_t> bytes[2] = {}, blocks[2] = {};
  };
  struct tables {
    detail::ledger_cell streams[max_streams];
    peaks sources[max_sources];
    peaks devices[max_devices];
    char names[max_sources][max_name + 1] = {};
    source_info info[max_sources];
    detail::atomic<std::size_t> used_sources{0}, used_streams{0};
    detail::mutex lock;  // new sources and streams, source_info, peaks and limits
  };
  static std::size_t device_slot(int device) noexcept {
    return device < 0 || std::size_t(device) >= max_devices ? max_devices - 1 : std::size_t(device);
  }
  // The sum of the cells `pick` chooses, with the peaks `p`; under the lock.
  template <class Pick>
  cudamem::usage summed(const peaks& p, since from, Pick pick) const noexcept {
    cudamem::usage out;
    const std::size_t used = tables_->used_streams.load(detail::memory_order_relaxed);
    for (std::size_t i = 0; i < used; ++i) {
      const detail::ledger_cell& cell = tables_->streams[i];
      if (!pick(cell)) continue;
      const cudamem::usage one = cell.read(from);
      out.bytes_in_use += one.bytes_in_use, out.blocks_in_use += one.blocks_in_use;
      out.allocated_bytes += one.allocated_bytes, out.allocations += one.allocations;
      out.freed_bytes += one.freed_bytes, out.frees += one.frees;
    }
    const unsigned at = from == since::reset ? 1 : 0;
    out.peak_bytes = p.bytes[at].load(detail::memory_order_relaxed);
    out.peak_blocks = p.blocks[at].load(detail::memory_order_relaxed);
    return out;
  }
  cudamem::usage source_usage(std::size_t index, since from) const noexcept {
    const detail::lock_guard<detail::mutex> hold(tables_->lock);
    cudamem::usage out =
        summed(tables_->sources[index], from, [index](const detail::ledger_cell& c) { return c.source == index; });
    if (const source_info& info = tables_->info[index]; info.cached != nullptr)
      out.cached_bytes = info.cached(info.object);
    return out;
  }
  // An allocation took a cell past its limits: raise the peaks and give out new limits.
  [[gnu::noinline]] void crossed() noexcept {
    const detail::lock_guard<detail::mutex> hold(tables_->lock);
    rebalance();
  }
  // Under the lock. Raises every peak that the figures now pass (each cell's, each source's, each device's), then
  // gives each cell limits such that no peak can be passed while every cell stays within its own: a cell may grow by
  // an equal share of the room its source and its device have left below their peaks (since::reset ones, which are
  // never above the since::start ones), and not past its own peak. A cell whose allocations pass its limits comes
  // back here; one that stays within them touches nothing else. A steady state (allocations and frees of a working
  // set that has peaked) never comes back.
  void rebalance() noexcept {
    struct sum {
      std::int64_t bytes = 0, blocks = 0, cells = 0, room_bytes = 0, room_blocks = 0;
    };
    sum sources[max_sources], devices[max_devices];
    const std::size_t used = tables_->used_streams.load(detail::memory_order_relaxed);
    for (std::size_t i = 0; i < used; ++i) {
      detail::ledger_cell& cell = tables_->streams[i];
      const std::int64_t bytes = cell.bytes_now(), blocks = cell.blocks_now();
      sum& source = sources[cell.source];
      sum& device = devices[device_slot(cell.device)];
      source.bytes += bytes, source.blocks += blocks, ++source.cells;
      device.bytes += bytes, device.blocks += blocks, ++device.cells;
      for (unsigned at = 0; at < 2; ++at) {
        detail::ledger_cell::raise(cell.peak_bytes[at], bytes);
        detail::ledger_cell::raise(cell.peak_blocks[at], blocks);
      }
    }
    const auto room = [](sum& s, peaks& p) {
      if (s.cells == 0) return;
      for (unsigned at = 0; at < 2; ++at) {
        detail::ledger_cell::raise(p.bytes[at], s.bytes);
        detail::ledger_cell::raise(p.blocks[at], s.blocks);
      }
      s.room_bytes = (std::int64_t(p.bytes[1].load(detail::memory_order_relaxed)) - s.bytes) / s.cells;
      s.room_blocks = (std::int64_t(p.blocks[1].load(detail::memory_order_relaxed)) - s.blocks) / s.cells;
    };
    for (std::size_t i = 0; i < max_sources; ++i) room(sources[i], tables_->sources[i]);
    for (std::size_t i = 0; i < max_devices; ++i) room(devices[i], tables_->devices[i]);
    const auto least = [](std::int64_t a, std::int64_t b) { return a < b ? a : b; };
    for (std::size_t i = 0; i < used; ++i) {
      detail::ledger_cell& cell = tables_->streams[i];
      const sum& from_source = sources[cell.source];
      const sum& from_device = devices[device_slot(cell.device)];
      const std::int64_t bytes = cell.bytes_now(), blocks = cell.blocks_now();
      cell.limit_bytes.store(least(std::int64_t(cell.peak_bytes[1].load(detail::memory_order_relaxed)),
                                   bytes + least(from_source.room_bytes, from_device.room_bytes)),
                             detail::memory_order_relaxed);
      cell.limit_blocks.store(least(std::int64_t(cell.peak_blocks[1].load(detail::memory_order_relaxed)),
                                    blocks + least(from_source.room_blocks, from_device.room_blocks)),
                              detail::memory_order_relaxed);
    }
  }
  // A new source named `name` (the last one, shared, when all are taken); its index.
  std::size_t add_source(const char* name, cached_fn cached, const void* object) noexcept {
    if (!tables_) return 0;
    const detail::lock_guard<detail::mutex> hold(tables_->lock);
    std::size_t used = tables_->used_sources.load(detail::memory_order_relaxed);
    if (used == max_sources) return max_sources - 1;
    if (used == max_sources - 1) name = "other sources";
    char* kept = tables_->names[used];
    for (std::size_t i = 0; i < max_name && name != nullptr && name[i] != '\0'; ++i) kept[i] = name[i];
    tables_->info[used] = {cached, object};
    tables_->used_sources.store(used + 1, detail::memory_order_release);
    return used;
  }
  void remove_source(std::size_t index, const void* object) noexcept {
    if (!tables_) return;
    const detail::lock_guard<detail::mutex> hold(tables_->lock);
    if (tables_->info[index].object == object) tables_->info[index] = {};
  }
  // The cell of (source, device, stream), made under the lock if new. The last max_sources cells are kept for each
  // source's (unknown device, other_streams) cell, so that one can always be made: when the others are taken, a new
  // stream of a source counts there.
  detail::ledger_cell* stream_cell(std::size_t source, int device, std::uint64_t stream) noexcept {
    const detail::lock_guard<detail::mutex> hold(tables_->lock);
    const std::size_t used = tables_->used_streams.load(detail::memory_order_relaxed);
    for (std::size_t i = 0; i < used; ++i) {  // another thread may have made it meanwhile
      detail::ledger_cell& cell = tables_->streams[i];
      if (cell.source == source && cell.device == device && cell.stream == stream) return &cell;
    }
    if (used >= max_streams - max_sources && !(device == -1 && stream == other_streams)) return nullptr;
    detail::ledger_cell& made = tables_->streams[used];  // limits 0: its first allocation comes to rebalance
    made.source = std::uint32_t(source), made.device = device, made.stream = stream;
    tables_->used_streams.store(used + 1, detail::memory_order_release);
    return &made;
  }
  bool counts() const noexcept { return static_cast<bool>(tables_); }

  detail::owner<tables> tables_;
  detail::atomic<void (*)(void*, const allocation_event&) noexcept> sink_{nullptr};
  detail::atomic<void*> sink_context_{nullptr};
};

/// Counts what goes through `Upstream` into a ledger, per device, per stream and as one source named at construction;
/// otherwise as the upstream (its errors, its ordering, its selects_device). Holds the upstream and the ledger by
/// reference: both must outlive it. Register it on streams (register_allocator) to count their buffers.
template <class Upstream>
class statistics_resource {
 public:
  using kind = typename Upstream::kind;  ///< the upstream's kind
  /// As the upstream: it makes the stream's device current itself.
  static constexpr bool selects_device = requires { requires Upstream::selects_device; };
  static constexpr std::size_t max_streams = 64;  ///< streams with cells of their own; the rest count as other_streams

  /// Counts through `upstream` into `book` as the source `name` (copied, up to ledger::max_name characters).
  statistics_resource(Upstream& upstream, ledger& book, const char* name) noexcept
      : upstream_(upstream), book_(book), source_(book.add_source(name, cached_of(), &upstream)) {}
  statistics_resource(const statistics_resource&) = delete;
  statistics_resource& operator=(const statistics_resource&) = delete;
  ~statistics_resource() { book_.remove_source(source_, &upstream_); }  ///< Its figures stay in the ledger.

  /// As the upstream's; counted when it succeeds.
  [[nodiscard]] result<void*> allocate(stream_ref s, std::size_t bytes, std::size_t alignment) noexcept {
    auto got = upstream_.allocate(s, bytes, alignment);
    if (got && *got != nullptr) note<false>(key_of(s), *got, bytes);
    return got;
  }
  /// As the upstream's; counted (a null `p` is not).
  void deallocate(stream_ref s, void* p, std::size_t bytes, std::size_t alignment) noexcept {
    if (p != nullptr)
      note<true>(key_of(s), p, bytes);  // first: the address is still a block's when the sink hears of it
    upstream_.deallocate(s, p, bytes, alignment);
  }
  /// This source's figures, with the upstream's cached bytes where it is a caching_pool.
  [[nodiscard]] cudamem::usage usage(since from = since::start) const noexcept {
    if (!book_.counts()) return {};
    return book_.source_usage(source_, from);
  }
  /// The figures of stream `s` through this source (its allocations on `s`, its frees on `s`); zeros if none.
  [[nodiscard]] cudamem::usage usage(stream_ref s, since from = since::start) const noexcept {
    const key k = key_of(s);
    for (std::size_t i = 0, used = used_.load(detail::memory_order_acquire); i < used; ++i)
      if (detail::ledger_cell* cell = cells_[i].load(detail::memory_order_acquire); cell->stream == k.stream)
        if (cell->device == k.device) return cell->read(from);
    return {};
  }
  [[nodiscard]] Upstream& upstream() const noexcept { return upstream_; }  ///< The upstream.

 private:
  struct key {
    std::uint64_t stream;
    int device;
  };
  static ledger::cached_fn cached_of() noexcept {
    if constexpr (requires(const Upstream& u) { u.statistics().bytes_cached; })
      return [](const void* u) noexcept -> std::uint64_t {
        return static_cast<const Upstream*>(u)->statistics().bytes_cached;
      };
    else return nullptr;
  }
  [[gnu::always_inline]] static key key_of(stream_ref s) noexcept {
    const std::uint64_t carried = detail::stream_identity::carried(s);
    if (const int known = detail::stream_identity::known_device(s); carried != detail::no_stream_id && known >= 0)
        [[likely]]
      return {carried, known};  // a stream object's reference: its id and device, no call
    return key_asked(s);
  }
  [[gnu::noinline]] static key key_asked(stream_ref s) noexcept {  // default streams, raw handles: may ask CUDA
    if (!s.valid()) return {ledger::other_streams, -1};
    if (detail::is_default_stream(s.get())) {
      int device = -1;
      if (cudaGetDevice(&device) != cudaSuccess) (void)cudaGetLastError(), device = -1;
      return {s.get() == cudaStreamPerThread ? ledger::per_thread_stream : ledger::legacy_stream, device};
    }
    std::uint64_t id = detail::no_stream_id;
    if (detail::stream_id_of(s, id) != detail::stream_id_source::asked) id = ledger::other_streams;
    auto where = s.device();
    return {id, where ? where->get() : -1};
  }
  detail::ledger_cell* cell_for(const key& k) noexcept {
    const std::size_t used = used_.load(detail::memory_order_acquire);
    for (std::size_t i = 0; i < used; ++i) {
      detail::ledger_cell* cell = cells_[i].load(detail::memory_order_relaxed);
      if (cell->stream == k.stream && cell->device == k.device) [[likely]]
        return cell;
    }
    return add_cell(k);
  }
  [[gnu::noinline]] detail::ledger_cell* add_cell(const key& k) noexcept {
    const detail::lock_guard<detail::mutex> hold(lock_);
    const std::size_t used = used_.load(detail::memory_order_relaxed);
    for (std::size_t i = 0; i < used; ++i)
      if (detail::ledger_cell* cell = cells_[i].load(detail::memory_order_relaxed);
          cell->stream == k.stream && cell->device == k.device)
        return cell;
    if (used == max_streams) return cells_[max_streams - 1].load(detail::memory_order_relaxed);
    const bool full = used == max_streams - 1;  // the last cell counts every stream after it
    detail::ledger_cell* cell = book_.stream_cell(source_, k.device, full ? ledger::other_streams : k.stream);
    if (cell == nullptr) cell = book_.stream_cell(source_, -1, ledger::other_streams);  // always made (kept for it)
    cells_[used].store(cell, detail::memory_order_release);
    used_.store(used + 1, detail::memory_order_release);
    return cell;
  }
  // The key is read where the stream_ref arrives: passing the reference on costs store-forwarding stalls.
  template <bool IsFree>
  [[gnu::always_inline]] void note(const key k, const void* p, std::size_t bytes) noexcept {
    const detail::last_ledger_cell& last = detail::last_cell_of_thread();
    if (last.serial == serial_ && last.stream == k.stream && last.device == k.device) [[likely]] {
      if (last.cell->count_owned<IsFree>(bytes)) [[unlikely]]
        book_.crossed();
    } else {
      note_found<IsFree>(k, bytes);
    }
    if (const auto record = book_.sink_.load(detail::memory_order_acquire)) [[unlikely]]
      if (book_.counts())
        record(book_.sink_context_.load(detail::memory_order_relaxed),
               allocation_event{book_.tables_->names[source_], k.device, k.stream, p, bytes, IsFree});
  }
  // note() past the thread's last cell: finds the cell, counts, and remembers it for the thread if it owns it.
  template <bool IsFree>
  [[gnu::noinline]] void note_found(const key k, std::size_t bytes) noexcept {
    if (!book_.counts()) return;
    detail::ledger_cell* cell = cell_for(k);
    bool owned = false;
    detail::last_ledger_cell& last = detail::last_cell_of_thread();
    if (cell->count<IsFree>(bytes, &last, owned)) book_.crossed();
    if (owned) last = {serial_, k.stream, k.device, cell};
  }
  Upstream& upstream_;
  ledger& book_;
  std::size_t source_;
  std::uint64_t serial_ = detail::next_source_serial();  // this adaptor, for the thread's last cell
  detail::mutex lock_;  // new cells
  detail::atomic<std::size_t> used_{0};
  detail::atomic<detail::ledger_cell*> cells_[max_streams] = {};
};
/// Adaptors compare by identity: each is a source of its own.
template <class Upstream>
bool operator==(const statistics_resource<Upstream>& a, const statistics_resource<Upstream>& b) noexcept {
  return &a == &b;
}
static_assert(memory_resource_for<statistics_resource<device_pool_resource>, device>);

}  // namespace cudamem
