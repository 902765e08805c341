// SPDX-License-Identifier: MIT
/// \file
/// Per-stream allocator registration (ACL's aclrtAllocatorRegister, as RAII): `buffer<T, device>::allocate(n, s)`
/// and `pitched_buffer`'s stream form take their memory from the resource registered on `s`.
///
///     result<registration> register_allocator(stream_ref s, resource_ref<device> r)   unregisters when it goes
///     resource_ref<device> allocator_for(stream_ref s)      the registered one, else default_resource<device>(true)
///
/// The registry is keyed on cudaStreamGetId, which never repeats in a process, so a stream created later at a
/// destroyed stream's address never inherits its registration. The default streams (legacy, per-thread) are shared
/// by every caller on a device and cannot be registered. One registry per process, also across shared libraries.
#pragma once

#include <cudamem/detail/process_wide.hpp>
#include <cudamem/resource.hpp>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>

namespace cudamem {
namespace detail {

/// A fixed table of (stream id, resource) slots. Writers (register, unregister) take the mutex; readers take no lock:
/// each slot is a seqlock (an odd version while a writer changes it), so a lookup is a scan of atomics. Stream ids
/// are opaque integers here, which lets the host tests drive it with made-up ids.
struct CUDAMEM_DETAIL_PROCESS_WIDE allocator_table {
  static constexpr std::size_t capacity = 256;  ///< streams registered at once
  static constexpr std::uint64_t no_stream = ~std::uint64_t{0};
  struct slot {
    std::atomic<std::uint32_t> version{0};
    std::atomic<std::uint64_t> stream_id{no_stream};
    std::atomic<std::uintptr_t> words[2]{};  // the resource_ref's two pointers
  };

  /// Registers `r` for `id`; returns the slot index. Errors: invalid_argument (already registered); not_supported
  /// (the table is full).
  result<std::size_t> insert(std::uint64_t id, resource_ref<device> r) noexcept {
    const std::lock_guard<std::mutex> lock(mutex);
    const std::size_t used = high_water.load(std::memory_order_relaxed);
    std::size_t free_slot = capacity;
    for (std::size_t i = 0; i < used; ++i) {
      const std::uint64_t held = slots[i].stream_id.load(std::memory_order_relaxed);
      if (held == id)
        return error(errc::invalid_argument, "register_allocator",
                     "the stream already has a registered allocator; drop that registration first");
      if (held == no_stream && free_slot == capacity) free_slot = i;
    }
    if (free_slot == capacity) {
      if (used == capacity)
        return error(errc::not_supported, "register_allocator", "at most %zu streams can have a registered allocator",
                     capacity);
      free_slot = used;
      high_water.store(used + 1, std::memory_order_release);
    }
    std::uintptr_t words[2];
    static_assert(sizeof words == sizeof r && std::is_trivially_copyable_v<resource_ref<device>>);
    std::memcpy(words, &r, sizeof words);
    write(slots[free_slot], id, words);
    count.fetch_add(1, std::memory_order_release);
    return free_slot;
  }
  /// Frees slot `index` if it still holds `id`.
  void erase(std::size_t index, std::uint64_t id) noexcept {
    const std::lock_guard<std::mutex> lock(mutex);
    if (slots[index].stream_id.load(std::memory_order_relaxed) != id) return;
    const std::uintptr_t none[2] = {0, 0};
    write(slots[index], no_stream, none);
    count.fetch_sub(1, std::memory_order_release);
  }
  /// The resource registered for `id`, copied into `out`; false when there is none. Lock-free.
  bool find(std::uint64_t id, resource_ref<device>& out) const noexcept {
    const std::size_t used = high_water.load(std::memory_order_acquire);
    for (std::size_t i = 0; i < used; ++i) {
      const slot& s = slots[i];
      for (;;) {
        const std::uint32_t before = s.version.load(std::memory_order_acquire);
        if (before & 1u) continue;  // a writer is inside
        if (s.stream_id.load(std::memory_order_relaxed) != id) break;
        // Acquire loads of the data keep the second version read after them (no fences: ThreadSanitizer checks
        // this code, and it does not model them).
        std::uintptr_t words[2] = {s.words[0].load(std::memory_order_acquire),
                                   s.words[1].load(std::memory_order_acquire)};
        if (s.stream_id.load(std::memory_order_acquire) != id) break;
        if (s.version.load(std::memory_order_relaxed) != before) continue;
        std::memcpy(static_cast<void*>(&out), words, sizeof words);
        return true;
      }
    }
    return false;
  }
  /// Whether nothing is registered: the lookup's fast path, no CUDA call.
  bool empty() const noexcept { return count.load(std::memory_order_acquire) == 0; }

  std::mutex mutex;
  std::atomic<std::size_t> high_water{0};
  std::atomic<std::size_t> count{0};
  slot slots[capacity];

 private:
  static void write(slot& s, std::uint64_t id, const std::uintptr_t (&words)[2]) noexcept {
    // Odd while it changes; release stores of the data, so a reader that sees new data sees the odd version too.
    s.version.fetch_add(1, std::memory_order_relaxed);
    s.words[0].store(words[0], std::memory_order_release);
    s.words[1].store(words[1], std::memory_order_release);
    s.stream_id.store(id, std::memory_order_release);
    s.version.fetch_add(1, std::memory_order_release);
  }
};

/// cudaStreamGetId: unique for the life of the process; legal on a capturing stream (it neither synchronizes nor
/// queries work), so stream-ordered allocation can be captured through a registered allocator.
inline result<std::uint64_t> stream_id(stream_ref s, const char* api) noexcept {
  if (!s.valid()) return handle_moved_from(api, "stream");
  unsigned long long id = 0;
  CUDAMEM_TRY(check(cudaStreamGetId(s.get(), &id), api, "cudaStreamGetId"));
  return static_cast<std::uint64_t>(id);
}
inline allocator_table& allocators() noexcept { return process_wide<allocator_table>(); }
}  // namespace detail

/// A registration of a device resource on a stream (move-only); its destruction unregisters it. Buffers allocated
/// through it keep their own resource_ref and stay valid after it goes; the resource object itself must outlive
/// every buffer it made.
class registration {
 public:
  registration(registration&& other) noexcept : slot_(other.slot_), id_(other.id_) { other.id_ = none; }
  registration& operator=(registration&& other) noexcept {
    if (this != &other) {
      reset();
      slot_ = other.slot_;
      id_ = other.id_;
      other.id_ = none;
    }
    return *this;
  }
  registration(const registration&) = delete;
  registration& operator=(const registration&) = delete;
  ~registration() { reset(); }
  /// Unregisters now (nothing after a move or an earlier reset). Does not synchronize.
  void reset() noexcept {
    if (id_ != none) detail::allocators().erase(slot_, id_);
    id_ = none;
  }
  /// Whether it still holds a registration.
  [[nodiscard]] bool active() const noexcept { return id_ != none; }

 private:
  friend result<registration> register_allocator(stream_ref, resource_ref<device>) noexcept;
  static constexpr std::uint64_t none = detail::allocator_table::no_stream;
  registration(std::size_t slot, std::uint64_t id) noexcept : slot_(slot), id_(id) {}
  std::size_t slot_ = 0;
  std::uint64_t id_ = none;
};

/// Makes `r` the allocator of `s` until the returned registration goes. Does not synchronize; legal during capture.
/// Errors: invalid_argument (a moved-from stream; a default stream, which every caller on the device shares; a stream
/// that already has one); not_supported (256 streams registered at once); CUDA errors from cudaStreamGetId.
[[nodiscard]] inline result<registration> register_allocator(stream_ref s, resource_ref<device> r) noexcept {
  constexpr const char* api = "register_allocator";
  if (s.valid() && detail::is_default_stream(s.get()))
    return error(errc::invalid_argument, api,
                 "a default stream (legacy or per-thread) is shared by every caller on the device and cannot have an "
                 "allocator of its own; create a stream");
  auto id = detail::stream_id(s, api);
  if (!id) return id.error();
  auto slot = detail::allocators().insert(*id, r);
  if (!slot) return slot.error();
  return registration(*slot, *id);
}

/// The resource registered on `s`, else default_resource<device>(true) (the stream-ordered pool). Cheap: no CUDA call
/// while nothing is registered or for a default stream; else one cudaStreamGetId and a lock-free scan. A moved-from
/// stream or a failed query gives the default, whose allocate then reports the problem.
[[nodiscard]] inline resource_ref<device> allocator_for(stream_ref s) noexcept {
  resource_ref<device> found = default_resource<device>(true);
  const detail::allocator_table& table = detail::allocators();
  if (table.empty() || !s.valid() || detail::is_default_stream(s.get())) return found;
  unsigned long long id = 0;
  if (cudaStreamGetId(s.get(), &id) != cudaSuccess) {
    (void)cudaGetLastError();
    return found;
  }
  (void)table.find(id, found);
  return found;
}

}  // namespace cudamem
