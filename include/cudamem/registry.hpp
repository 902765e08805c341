// SPDX-License-Identifier: MIT
/// \file
/// Per-stream allocator registration (ACL's aclrtAllocatorRegister, as RAII), one registry per process, keyed on
/// cudaStreamGetId: `buffer<T, device>::allocate(n, s)` and `pitched_buffer`'s stream form allocate from `s`'s.
///
///     result<registration> register_allocator(stream_ref s, resource_ref<device> r)   unregisters when it goes
///     resource_ref<device> allocator_for(stream_ref s)      the registered one, else default_resource<device>(true)
#pragma once

#include <cudamem/detail/process_wide.hpp>
#include <cudamem/detail/unique_handle.hpp>
#include <cudamem/resource.hpp>

#include <array>
#include <atomic>
#include <bit>
#include <cstdint>
#include <mutex>
#include <utility>

namespace cudamem {
namespace detail {

// Fixed (stream id, handle, resource) slots, opaque integers here. Writers take the mutex; each slot is a seqlock (odd
// version while written), read with no lock: readers match the handle, the caller confirms the id.
struct CUDAMEM_DETAIL_PROCESS_WIDE allocator_table {
  static constexpr std::size_t capacity = 256;
  static constexpr std::uint64_t no_stream = ~std::uint64_t{0};
  using ref_words = std::array<std::uintptr_t, 2>;  // a resource_ref's two pointers
  struct slot {
    std::atomic<std::uint32_t> version{0};
    std::atomic<std::uint64_t> stream_id{no_stream};
    std::atomic<std::uintptr_t> handle{0};  // 0: none (free, or its stream is known to be gone)
    std::atomic<std::uintptr_t> words[2]{};
    std::atomic<std::uint64_t> confirmed{no_stream};
  };
  struct entry {  // what a lookup read, and at which slot version
    resource_ref<device> resource;
    std::uint64_t stream_id;
    std::size_t slot;
    std::uint32_t version;
    std::uint64_t confirmed;
  };
  // A ref() matched slot version `version` while disowned_count() was `count`: never vouches for a later write there.
  static std::uint64_t confirmation(std::uint32_t version, std::uint64_t count) noexcept {
    return (std::uint64_t{version & 0xffffffu} << 40) | (count & 0xffffffffffu);
  }
  void confirm(const entry& e, std::uint64_t count) noexcept {
    slots[e.slot].confirmed.store(confirmation(e.version, count), std::memory_order_relaxed);
  }

  // Registers `r`; a slot at `handle` with another id (a destroyed stream's) stops answering for it.
  result<std::size_t> insert(std::uint64_t id, std::uintptr_t handle, resource_ref<device> r) noexcept {
    const std::lock_guard<std::mutex> lock(mutex);
    const std::size_t used = high_water.load(std::memory_order_relaxed);
    std::size_t free_slot = capacity;
    for (std::size_t i = 0; i < used; ++i) {
      const std::uint64_t held = slots[i].stream_id.load(std::memory_order_relaxed);
      if (held == id)
        return error(errc::invalid_argument, "register_allocator",
                     "the stream already has a registered allocator; drop that registration first");
      if (held == no_stream && free_slot == capacity) free_slot = i;
      if (held != no_stream && slots[i].handle.load(std::memory_order_relaxed) == handle)
        write(slots[i], held, 0, {0, 0});  // keeps the id, for its registration's erase
    }
    if (free_slot == capacity) {
      if (used == capacity)
        return error(errc::not_supported, "register_allocator", "at most %zu streams can have a registered allocator",
                     capacity);
      free_slot = used;
      high_water.store(used + 1, std::memory_order_release);
    }
    write(slots[free_slot], id, handle, std::bit_cast<ref_words>(r));
    count.fetch_add(1, std::memory_order_release);
    return free_slot;
  }
  void erase(std::size_t index, std::uint64_t id) noexcept {
    const std::lock_guard<std::mutex> lock(mutex);
    if (slots[index].stream_id.load(std::memory_order_relaxed) != id) return;
    write(slots[index], no_stream, 0, {0, 0});
    count.fetch_sub(1, std::memory_order_release);
  }
  bool find(std::uintptr_t handle, entry& out) const noexcept {
    const std::size_t used = high_water.load(std::memory_order_acquire);
    for (std::size_t i = 0; i < used; ++i) {
      const slot& s = slots[i];
      for (;;) {
        const std::uint32_t before = s.version.load(std::memory_order_acquire);
        if (before & 1u) continue;  // a writer is inside
        if (s.handle.load(std::memory_order_acquire) != handle) break;
        // Acquire loads keep the version re-read after them (not fences: ThreadSanitizer does not model those).
        const ref_words ref = {s.words[0].load(std::memory_order_acquire), s.words[1].load(std::memory_order_acquire)};
        const std::uint64_t id = s.stream_id.load(std::memory_order_acquire);
        const std::uint64_t confirmed = s.confirmed.load(std::memory_order_acquire);
        if (s.version.load(std::memory_order_relaxed) != before) continue;
        out = {std::bit_cast<resource_ref<device>>(ref), id, i, before, confirmed};
        return true;
      }
    }
    return false;
  }
  bool empty() const noexcept { return count.load(std::memory_order_acquire) == 0; }

  std::mutex mutex;
  std::atomic<std::size_t> high_water{0}, count{0};
  slot slots[capacity];

 private:
  // Release stores of the data: a reader that sees new data sees the odd version too.
  static void write(slot& s, std::uint64_t id, std::uintptr_t handle, const ref_words& ref) noexcept {
    s.version.fetch_add(1, std::memory_order_relaxed);
    s.confirmed.store(no_stream, std::memory_order_relaxed);
    s.words[0].store(ref[0], std::memory_order_release);
    s.words[1].store(ref[1], std::memory_order_release);
    s.stream_id.store(id, std::memory_order_release);
    s.handle.store(handle, std::memory_order_release);
    s.version.fetch_add(1, std::memory_order_release);
  }
};

inline std::uintptr_t handle_key(stream_ref s) noexcept { return reinterpret_cast<std::uintptr_t>(s.get()); }
inline allocator_table& allocators() noexcept { return process_wide<allocator_table>(); }
struct registered {  // what a registration owns: its slot and stream id
  using type = std::pair<std::size_t, std::uint64_t>;
  static type empty() noexcept { return {0, allocator_table::no_stream}; }
  static void release(type held) noexcept { allocators().erase(held.first, held.second); }
};
}  // namespace detail

/// A device resource's registration on a stream; move-only (a moved-from one holds none). Unregisters when destroyed
/// or assigned to; buffers made through it keep their own resource_ref (the resource must outlive them).
class registration {
 public:
  void reset() noexcept { held_.reset(); }  ///< Unregisters now, if it still holds one; does not synchronize.
  [[nodiscard]] bool active() const noexcept { return held_.valid(); }  ///< Whether it still holds a registration.

 private:
  friend result<registration> register_allocator(stream_ref, resource_ref<device>) noexcept;
  explicit registration(detail::registered::type held) noexcept : held_(held) {}
  detail::unique_handle<detail::registered> held_;
};

/// Makes `r` the allocator of `s` until the registration goes; does not synchronize. Errors: invalid_argument (a
/// moved-from or default stream; already registered); capture_active; not_supported (256 registered); CUDA errors.
[[nodiscard]] inline result<registration> register_allocator(stream_ref s, resource_ref<device> r) noexcept {
  constexpr const char* api = "register_allocator";
  if (!s.valid()) return detail::handle_moved_from(api, "stream");
  if (detail::is_default_stream(s.get()))
    return error(errc::invalid_argument, api,
                 "a default stream (legacy or per-thread) is shared by every caller on the device and cannot have an "
                 "allocator of its own; create a stream");
  CUDAMEM_TRY(detail::refuse_capture(s.get(), api,
                                     "CUDA does not name a capturing stream's id; register the allocator before the "
                                     "capture begins"));
  unsigned long long id = 0;
  CUDAMEM_TRY(detail::check(detail::stream_unique_id(s.get(), &id), api, "cudaStreamGetId"));
  auto slot = detail::allocators().insert(id, detail::handle_key(s), r);
  if (!slot) return slot.error();
  return registration({*slot, id});
}

/// The resource registered on `s`, else default_resource<device>(true) (also for a moved-from stream or a failed
/// query). Does not synchronize; a CUDA call only where a registration at the handle needs its stream id checked.
[[nodiscard]] inline resource_ref<device> allocator_for(stream_ref s) noexcept {
  const resource_ref<device> fallback = default_resource<device>(true);
  detail::allocator_table& table = detail::allocators();
  if (table.empty() || !s.valid() || detail::is_default_stream(s.get())) return fallback;
  detail::allocator_table::entry found{fallback, 0, 0, 0, 0};
  if (!table.find(detail::handle_key(s), found)) return fallback;
  const std::uint64_t disowned = detail::disowned_count().load(std::memory_order_acquire);
  if (detail::from_owner(s) && found.confirmed == detail::allocator_table::confirmation(found.version, disowned))
    return found.resource;
  const cudaError_t earlier = cudaPeekAtLastError();  // a failed query's error is cleared, a user's earlier one kept
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  cudaError_t code = detail::stream_capture_status(s.get(), &capture);
  if (code == cudaSuccess && capture != cudaStreamCaptureStatusNone) return found.resource;
  if (code == cudaSuccess) code = detail::stream_unique_id(s.get(), &id);
  if (code != cudaSuccess && earlier == cudaSuccess && !error::is_sticky_status(code)) (void)cudaGetLastError();
  if (code != cudaSuccess || id != found.stream_id) return fallback;
  if (detail::from_owner(s)) table.confirm(found, disowned);
  return found.resource;
}

}  // namespace cudamem
