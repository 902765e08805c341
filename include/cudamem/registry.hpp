// SPDX-License-Identifier: MIT
/// \file
/// Per-stream allocator registration (ACL's aclrtAllocatorRegister, as RAII), one registry per process, keyed on
/// cudaStreamGetId: `buffer<T, device>::allocate(n, s)` and `pitched_buffer`'s stream form allocate from `s`'s.
///
///     result<registration> register_allocator(stream_ref s, resource_ref<device> r)   unregisters when it goes
///     resource_ref<device> allocator_for(stream_ref s)      the registered one, else default_resource<device>(true)
#pragma once

#include <cudamem/detail/process_wide.hpp>
#include <cudamem/detail/stream_identity.hpp>
#include <cudamem/detail/sync.hpp>
#include <cudamem/detail/unique_handle.hpp>
#include <cudamem/resource.hpp>

#include <cstdint>
#include <utility>

namespace cudamem {
namespace detail {

// Fixed (stream id, handle, resource) slots, opaque integers here. Writers take the mutex; each slot is a seqlock (odd
// version while written), read with no lock: readers match the id, or the handle (then the caller checks the id).
struct CUDAMEM_DETAIL_PROCESS_WIDE allocator_table {
  static constexpr std::size_t capacity = 256;
  static constexpr std::uint64_t no_stream = ~std::uint64_t{0};
  struct ref_words {  // a resource_ref's two pointers
    std::uintptr_t word[2];
    std::uintptr_t operator[](std::size_t i) const noexcept { return word[i]; }
  };
  struct slot {
    atomic<std::uint32_t> version{0};
    atomic<std::uint64_t> stream_id{no_stream};
    atomic<std::uintptr_t> handle{0};  // 0: none (free, or its stream is known to be gone)
    atomic<std::uintptr_t> words[2]{};
  };
  struct entry {  // what a lookup read
    resource_ref<device> resource;
    std::uint64_t stream_id;
  };

  // Registers `r`; a slot at `handle` with another id (a destroyed stream's) stops answering for it.
  result<std::size_t> insert(std::uint64_t id, std::uintptr_t handle, resource_ref<device> r) noexcept {
    const lock_guard<detail::mutex> lock(mutex);
    const std::size_t used = high_water.load(memory_order_relaxed);
    std::size_t free_slot = capacity;
    for (std::size_t i = 0; i < used; ++i) {
      const std::uint64_t held = slots[i].stream_id.load(memory_order_relaxed);
      if (held == id)
        return error(errc::invalid_argument, "register_allocator",
                     "the stream already has a registered allocator; drop that registration first");
      if (held == no_stream && free_slot == capacity) free_slot = i;
      if (held != no_stream && slots[i].handle.load(memory_order_relaxed) == handle)
        write(slots[i], held, 0, {0, 0});  // keeps the id, for its registration's erase
    }
    if (free_slot == capacity) {
      if (used == capacity)
        return error(errc::not_supported, "register_allocator", "at most %zu streams can have a registered allocator",
                     capacity);
      free_slot = used;
      high_water.store(used + 1, memory_order_release);
    }
    write(slots[free_slot], id, handle, __builtin_bit_cast(ref_words, r));
    count.fetch_add(1, memory_order_release);
    return free_slot;
  }
  void erase(std::size_t index, std::uint64_t id) noexcept {
    const lock_guard<detail::mutex> lock(mutex);
    if (slots[index].stream_id.load(memory_order_relaxed) != id) return;
    write(slots[index], no_stream, 0, {0, 0});
    count.fetch_sub(1, memory_order_release);
  }
  /// The registration of stream `id` (not no_stream).
  bool find_id(std::uint64_t id, entry& out) const noexcept { return find(id, 0, out); }
  /// The registration answering for `handle` (not 0), of whatever stream id it holds: the caller checks that.
  bool find_handle(std::uintptr_t handle, entry& out) const noexcept { return find(no_stream, handle, out); }
  bool empty() const noexcept { return count.load(memory_order_acquire) == 0; }

  detail::mutex mutex;
  atomic<std::size_t> high_water{0}, count{0};
  slot slots[capacity];

 private:
  bool find(std::uint64_t id, std::uintptr_t handle, entry& out) const noexcept {  // by `id`, else by `handle`
    const std::size_t used = high_water.load(memory_order_acquire);
    for (std::size_t i = 0; i < used; ++i) {
      const slot& s = slots[i];
      for (;;) {
        const std::uint32_t before = s.version.load(memory_order_acquire);
        if (before & 1u) continue;  // a writer is inside
        const std::uint64_t held = s.stream_id.load(memory_order_acquire);
        if (id != no_stream ? held != id : s.handle.load(memory_order_acquire) != handle) break;
        // Acquire loads keep the version re-read after them (not fences: ThreadSanitizer does not model those).
        const ref_words ref = {s.words[0].load(memory_order_acquire), s.words[1].load(memory_order_acquire)};
        if (s.version.load(memory_order_relaxed) != before) continue;
        out = {__builtin_bit_cast(resource_ref<device>, ref), held};
        return true;
      }
    }
    return false;
  }
  // Release stores of the data: a reader that sees new data sees the odd version too.
  static void write(slot& s, std::uint64_t id, std::uintptr_t handle, const ref_words& ref) noexcept {
    s.version.fetch_add(1, memory_order_relaxed);
    s.words[0].store(ref[0], memory_order_release);
    s.words[1].store(ref[1], memory_order_release);
    s.stream_id.store(id, memory_order_release);
    s.handle.store(handle, memory_order_release);
    s.version.fetch_add(1, memory_order_release);
  }
};

inline std::uintptr_t handle_key(stream_ref s) noexcept { return reinterpret_cast<std::uintptr_t>(s.get()); }
inline allocator_table& allocators() noexcept { return process_wide<allocator_table>(); }
/// allocator_for's lookup in `table`, `id_of` standing for stream_id_of (tests fake it). A stream object's reference
/// matches by the id it carries, with no CUDA call. One known only by handle matches the registration at its handle
/// if CUDA names the same id; a capturing one cannot be asked, and the registration at its handle may be a destroyed
/// stream's left registered: the fallback, never a registration that may be stale.
template <class IdOf>
resource_ref<device> registered_for(const allocator_table& table, stream_ref s, resource_ref<device> fallback,
                                    IdOf&& id_of) noexcept {
  allocator_table::entry found{fallback, allocator_table::no_stream};
  if (const std::uint64_t carried = stream_identity::carried(s); carried != no_stream_id)
    return table.find_id(carried, found) ? found.resource : fallback;
  if (!table.find_handle(handle_key(s), found)) return fallback;
  std::uint64_t id = no_stream_id;
  if (id_of(s, id) != stream_id_source::asked || id != found.stream_id) return fallback;
  return found.resource;
}
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
  unsigned long long id = detail::stream_identity::carried(s);
  if (id == detail::no_stream_id)
    CUDAMEM_TRY(detail::check(detail::stream_unique_id(s.get(), &id), api, "cudaStreamGetId"));
  auto slot = detail::allocators().insert(id, detail::handle_key(s), r);
  if (!slot) return slot.error();
  return registration({*slot, id});
}

/// The resource registered on `s`, else default_resource<device>(true) (also for a moved-from stream or a failed
/// query). Does not synchronize. A stream object's reference is looked up by the id it carries, with no CUDA call; one
/// made by from_native_handle asks CUDA for the stream's id, and while that stream captures (CUDA does not name it)
/// gets the default: the registration at its handle may be a destroyed stream's whose handle CUDA handed on.
[[nodiscard]] inline resource_ref<device> allocator_for(stream_ref s) noexcept {
  const resource_ref<device> fallback = default_resource<device>(true);
  const detail::allocator_table& table = detail::allocators();
  if (table.empty() || !s.valid() || detail::is_default_stream(s.get())) return fallback;
  return detail::registered_for(table, s, fallback, &detail::stream_id_of);
}

}  // namespace cudamem
