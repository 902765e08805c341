// SPDX-License-Identifier: MIT
// cudamem, internal: the ids of the streams that stream objects own right now. The caching pool's release() waits for
// cached blocks by recording an event on their stream; it may touch that stream only while it is sure the stream
// exists, which it is while a stream object owns it and cannot destroy it meanwhile. Other streams (raw handles, ended
// objects) are never touched: their blocks wait for the device instead (docs/decisions.md).
#pragma once

#include <cudamem/detail/process_wide.hpp>

#include <pthread.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>

namespace cudamem::detail {

/// The live stream objects' ids, under one lock; grown with realloc (a failed growth leaves an id out: its blocks are
/// then waited for by device, which is slower, never wrong).
struct CUDAMEM_DETAIL_PROCESS_WIDE live_stream_ids {
  pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  std::uint64_t* ids = nullptr;
  std::size_t count = 0, capacity = 0;
};
inline live_stream_ids& live_streams() noexcept { return process_wide<live_stream_ids>(); }

/// Lists stream `id` as owned by a live stream object (`begins`), or takes it off, before the stream is destroyed or
/// given up. No CUDA call; ~0 (no id) is never listed.
inline void stream_lives(std::uint64_t id, bool begins) noexcept {
  if (id == ~std::uint64_t{0}) return;
  live_stream_ids& live = live_streams();
  pthread_mutex_lock(&live.lock);
  if (begins) {
    if (live.count == live.capacity) {
      const std::size_t grown = live.capacity == 0 ? 64 : live.capacity * 2;
      if (void* more = std::realloc(live.ids, grown * sizeof(std::uint64_t))) {
        live.ids = static_cast<std::uint64_t*>(more);
        live.capacity = grown;
      }
    }
    if (live.count < live.capacity) live.ids[live.count++] = id;
  } else {
    for (std::size_t i = 0; i < live.count; ++i)
      if (live.ids[i] == id) {
        live.ids[i] = live.ids[--live.count];
        break;
      }
  }
  pthread_mutex_unlock(&live.lock);
}

/// `f()` while a stream object owns stream `id`, so that the stream cannot be destroyed meanwhile; false where none
/// does. `f` must not create, destroy or give up a stream object, nor call the release handler (whose code might).
template <class F>
auto while_stream_lives(std::uint64_t id, F&& f) noexcept -> decltype(f()) {
  live_stream_ids& live = live_streams();
  pthread_mutex_lock(&live.lock);
  bool found = false;
  for (std::size_t i = 0; i < live.count && !found; ++i) found = live.ids[i] == id;
  if (!found) {
    pthread_mutex_unlock(&live.lock);
    return false;
  }
  auto out = f();
  pthread_mutex_unlock(&live.lock);
  return out;
}

}  // namespace cudamem::detail
