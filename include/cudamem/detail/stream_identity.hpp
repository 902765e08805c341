// SPDX-License-Identifier: MIT
// cudamem, internal: which stream a stream_ref names, for the per-stream state of the caching pool and the allocator
// registry. CUDA hands a destroyed stream's handle to a later stream; cudaStreamGetId's ids are never repeated in a
// process, so that state is keyed on the id, and a handle alone is never trusted (docs/decisions.md).
#pragma once

#include <cudamem/stream.hpp>

#include <cstdint>

namespace cudamem::detail {

struct stream_identity {
  /// The id a stream object's ref() carries (recorded when the object was made), else no_stream_id. No CUDA call.
  static std::uint64_t carried(stream_ref s) noexcept { return s.id_; }
  /// The device ordinal the reference was made with (negative: not known). No CUDA call.
  static int known_device(stream_ref s) noexcept { return s.device_; }
  /// A reference as a stream object's ref() makes it, for tests over made-up handles and ids.
  static stream_ref make(cudaStream_t handle, device_id device, std::uint64_t id) noexcept {
    return stream_ref(handle, device.get(), id);
  }
};

/// How stream_id_of came by an id.
enum class stream_id_source {
  carried,    ///< the reference's own: no CUDA call
  asked,      ///< cudaStreamGetId's, of a stream not capturing
  capturing,  ///< none: a capturing stream known only by handle is not asked (CUDA does not name it)
  failed,     ///< none: CUDA refused a query (its error cleared unless sticky; a user's earlier one kept)
};
/// `s`'s id (into `id`): the one it carries, else CUDA's, asked through the driver. `s` is neither moved-from nor a
/// default stream. Does not synchronize; never disturbs a capture.
inline stream_id_source stream_id_of(stream_ref s, std::uint64_t& id) noexcept {
  id = stream_identity::carried(s);
  if (id != no_stream_id) [[likely]]
    return stream_id_source::carried;
  unsigned long long asked = no_stream_id;
  if (id_unless_capturing(s.get(), asked) != cudaSuccess) return stream_id_source::failed;
  if (asked == no_stream_id) return stream_id_source::capturing;
  id = asked;
  return stream_id_source::asked;
}

}  // namespace cudamem::detail
