// SPDX-License-Identifier: MIT
// cudamem, internal: the ids of the streams that stream objects own right now. The caching pool's release() waits for
// cached blocks by recording an event on their stream; it may touch that stream only while it is sure the stream
// exists, which it is while a stream object owns it and cannot destroy it meanwhile. Other streams (raw handles, ended
// objects) are never touched: their blocks wait for the device instead (docs/decisions.md).
#pragma once

#include <cudamem/detail/process_wide.hpp>
#include <cudamem/detail/storage.hpp>
#include <cudamem/detail/sync.hpp>

#include <cstdint>

namespace cudamem::detail {

/// The live stream objects' ids, under one lock.
struct CUDAMEM_DETAIL_PROCESS_WIDE live_stream_ids {
  mutex lock;
  vec<std::uint64_t> ids;
};
inline live_stream_ids& live_streams() noexcept { return process_wide<live_stream_ids>(); }

/// Lists stream `id` as owned by a live stream object (`begins`), or takes it off, before the stream is destroyed or
/// given up. No CUDA call; ~0 (no id) is never listed.
inline void stream_lives(std::uint64_t id, bool begins) noexcept {
  if (id == ~std::uint64_t{0}) return;
  live_stream_ids& live = live_streams();
  const lock_guard<mutex> hold(live.lock);
  if (begins) live.ids.push_back(id);
  else live.ids.erase_if([id](std::uint64_t listed) { return listed == id; });
}

/// `f()` while a stream object owns stream `id`, so that the stream cannot be destroyed meanwhile; false where none
/// does. `f` must not create, destroy or give up a stream object, nor call the release handler (whose code might).
template <class F>
auto while_stream_lives(std::uint64_t id, F&& f) noexcept -> decltype(f()) {
  live_stream_ids& live = live_streams();
  const lock_guard<mutex> hold(live.lock);
  if (!live.ids.contains(id)) return false;
  return f();
}

}  // namespace cudamem::detail
