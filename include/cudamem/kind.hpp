// SPDX-License-Identifier: MIT
/// \file
/// Memory kinds as types, their traits, and the copy rules between them, in one place.
///
///     host, pinned, device, managed        the kinds: host_accessible, device_accessible, page_locked, name
///     memory_kind<K>                       one of the four
///     stream_orderable<K>                  may K take part in stream-ordered copies and fills (not host)
///     kind_convertible<From, To>           a view of From may be viewed as To (pinned widens to host)
///     copy_direction<Dst, Src>             the cudaMemcpyKind a copy between them uses
#pragma once

#include <cudamem/detail/config.hpp>

#include <type_traits>

namespace cudamem {

/// Pageable host memory (new, malloc, std::vector): host code only, and only synchronous copies and fills.
struct host {
  static constexpr bool host_accessible = true;     ///< host code may read and write it
  static constexpr bool device_accessible = false;  ///< kernels may not
  static constexpr bool page_locked = false;        ///< pageable: no stream-ordered copies or fills
  static constexpr const char* name = "host";       ///< the kind's name, for messages
};
/// Page-locked host memory (cudaMallocHost, or host_register), mapped for kernels too (zero-copy).
struct pinned {
  static constexpr bool host_accessible = true;    ///< host code may read and write it
  static constexpr bool device_accessible = true;  ///< kernels may too, through the mapping
  static constexpr bool page_locked = true;        ///< may take part in stream-ordered copies and fills
  static constexpr const char* name = "pinned";    ///< the kind's name, for messages
};
/// Device memory (cudaMalloc, cudaMallocAsync). Not readable from the host.
struct device {
  static constexpr bool host_accessible = false;   ///< host code may not touch it
  static constexpr bool device_accessible = true;  ///< kernels may read and write it
  static constexpr bool page_locked = true;        ///< not pageable: stream-ordered copies and fills take it
  static constexpr const char* name = "device";    ///< the kind's name, for messages
};
/// Managed (unified) memory, migrated on demand; readable from both sides.
struct managed {
  static constexpr bool host_accessible = true;    ///< host code may read and write it
  static constexpr bool device_accessible = true;  ///< kernels may too
  static constexpr bool page_locked = true;        ///< not pageable: stream-ordered copies and fills take it
  static constexpr const char* name = "managed";   ///< the kind's name, for messages
};
/// Satisfied by the four kinds above and nothing else.
template <class K>
concept memory_kind =
    std::is_same_v<K, host> || std::is_same_v<K, pinned> || std::is_same_v<K, device> || std::is_same_v<K, managed>;
template <memory_kind K>
inline constexpr bool stream_orderable = K::page_locked;  ///< May K be in stream-ordered copies and fills? Not host.
/// Whether a view of kind From may be used where kind To is asked: the same kind, or pinned as host. Never narrows.
template <memory_kind From, memory_kind To>
inline constexpr bool kind_convertible =
    std::is_same_v<From, To> || (std::is_same_v<From, pinned> && std::is_same_v<To, host>);
/// The cudaMemcpyKind of a copy into Dst from Src; cudaMemcpyDefault (the driver decides) with managed memory.
template <memory_kind Dst, memory_kind Src>
inline constexpr cudaMemcpyKind copy_direction =
    std::is_same_v<Dst, managed> || std::is_same_v<Src, managed> ? cudaMemcpyDefault
    : Dst::host_accessible && Src::host_accessible               ? cudaMemcpyHostToHost
    : Dst::host_accessible                                       ? cudaMemcpyDeviceToHost
    : Src::host_accessible                                       ? cudaMemcpyHostToDevice
                                                                 : cudaMemcpyDeviceToDevice;
namespace detail {
enum class kind_id : unsigned char { host, pinned, device, managed };  // a kind as a run-time value, for the engine
template <memory_kind K>
inline constexpr kind_id kind_id_of = std::is_same_v<K, host>     ? kind_id::host
                                      : std::is_same_v<K, pinned> ? kind_id::pinned
                                      : std::is_same_v<K, device> ? kind_id::device
                                                                  : kind_id::managed;
}  // namespace detail
}  // namespace cudamem
