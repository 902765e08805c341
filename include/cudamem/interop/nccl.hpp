// SPDX-License-Identifier: MIT
/// \file
/// NCCL over cudamem (needs libnccl; docs/scaling.md): communicators, groups, and collectives and transfers of device
/// views (a temporary owner does not compile) of the communicator's device, ordered on a stream, never synchronizing.
/// Their errors: invalid_argument (empty communicator, moved-from stream, view on another device), extents_mismatch,
/// out_of_range (root, peer), NCCL's (domain nccl).
///
///     nccl::unique_id::create();  nccl::communicator::init_rank(size, id, rank), init_all(devices, out)
///       rank(), size(), device(), get(), valid(), abort()
///     nccl::group::start(), end()          ncclGroupStart/End as RAII
///     all_reduce(comm, send, recv | data, op, s), broadcast(comm, send, recv, root, s)
///     reduce_scatter(comm, send, recv, op, s), all_gather(comm, send, recv, s)
///     send(comm, data, peer, s), receive(comm, data, peer, s)   each returns status
#pragma once

#if !__has_include(<nccl.h>)
#error "cudamem/interop/nccl.hpp needs NCCL's nccl.h on the include path (and libnccl to link)"
#endif

#include <cudamem/copy.hpp>

#include <nccl.h>

#include <climits>
#include <cstddef>
#include <span>
#include <type_traits>

namespace cudamem::nccl {

namespace detail {
using namespace cudamem::detail;
template <class T, class U = std::remove_cv_t<T>>
constexpr ncclDataType_t data_type_for() noexcept {
  constexpr bool integer = std::is_integral_v<U> && !is_any_of<U, bool, char, wchar_t, char8_t, char16_t, char32_t> &&
                           (sizeof(U) == 1 || sizeof(U) == 4 || sizeof(U) == 8);
  static_assert(integer || is_any_of<U, float, double, __half, __nv_bfloat16>,
                "cudamem::nccl: NCCL has no data type for this element type; use std::int8_t, std::uint8_t, "
                "std::int32_t, std::uint32_t, std::int64_t, std::uint64_t, __half, __nv_bfloat16, float or double "
                "(to move raw bytes, view them as std::uint8_t)");
  if constexpr (std::is_same_v<U, float>) return ncclFloat32;
  else if constexpr (std::is_same_v<U, double>) return ncclFloat64;
  else if constexpr (std::is_same_v<U, __half>) return ncclFloat16;
  else if constexpr (std::is_same_v<U, __nv_bfloat16>) return ncclBfloat16;
  else if constexpr (sizeof(U) == 1) return std::is_signed_v<U> ? ncclInt8 : ncclUint8;
  else if constexpr (sizeof(U) == 4) return std::is_signed_v<U> ? ncclInt32 : ncclUint32;
  else return std::is_signed_v<U> ? ncclInt64 : ncclUint64;
}
/// An NCCL result as a status of the nccl domain, with the result's name and ncclGetErrorString's message.
inline status check_nccl(ncclResult_t code, const char* api, const char* call) noexcept {
  if (code == ncclSuccess) return {};
  constexpr const char* names[] = {"ncclSuccess",       "ncclUnhandledCudaError", "ncclSystemError",
                                   "ncclInternalError", "ncclInvalidArgument",    "ncclInvalidUsage",
                                   "ncclRemoteError",   "ncclInProgress"};
  const auto index = static_cast<unsigned>(code);
  return error(error_domain::nccl, static_cast<int>(code), api, call, index < 8 ? names[index] : "ncclResult_t",
               ncclGetErrorString(code));
}
inline void release_nccl(ncclResult_t code, const char* call) noexcept {
  if (auto released = check_nccl(code, nullptr, call); !released) report_release_failure(released.error());
}
struct comm_handle {  // what a communicator owns
  using type = ncclComm_t;
  static type empty() noexcept { return nullptr; }
  static void release(type comm) noexcept { release_nccl(ncclCommDestroy(comm), "ncclCommDestroy"); }
};
struct group_handle {  // what a group owns: a ncclGroupStart still to be ended
  using type = bool;
  static type empty() noexcept { return false; }
  static void release(type) noexcept { release_nccl(ncclGroupEnd(), "ncclGroupEnd"); }
};
}  // namespace detail

/// The ncclDataType_t of elements of type T (cv-qualifiers ignored); a type NCCL lacks fails to compile.
template <class T>
inline constexpr ncclDataType_t data_type_of = detail::data_type_for<T>();
/// The reduction of a collective (ncclRedOp_t).
enum class reduce_op { sum = ncclSum, prod = ncclProd, max = ncclMax, min = ncclMin, avg = ncclAvg };
/// A communicator's identity: rank 0 makes it and passes `native` (NCCL_UNIQUE_ID_BYTES) to every other rank.
struct unique_id {
  ncclUniqueId native{};  ///< The bytes to pass on.
  /// A fresh id (ncclGetUniqueId; may open a bootstrap socket). Errors: NCCL errors.
  [[nodiscard]] static result<unique_id> create() noexcept {
    unique_id id;
    CUDAMEM_TRY(detail::check_nccl(ncclGetUniqueId(&id.native), "nccl::unique_id::create", "ncclGetUniqueId"));
    return id;
  }
};

/// One rank on one device. Move-only; ncclCommDestroy when it goes (failures: release handler); empty once aborted.
class communicator {
 public:
  communicator() noexcept = default;  ///< Empty: for arrays that init_all fills.
  /// Joins `id` of `world_size` ranks as `rank` on `device` (ncclCommInitRank; blocks until every rank has joined).
  /// The current device stays. Errors: out_of_range (no such device); NCCL errors.
  [[nodiscard]] static result<communicator> init_rank(int world_size, const unique_id& id, int rank,
                                                      device_id device) noexcept {
    constexpr const char* api = "nccl::communicator::init_rank";
    auto current = device_guard::set(device);
    if (!current) return current.error().with_api(api);
    ncclComm_t comm = nullptr;
    CUDAMEM_TRY(detail::check_nccl(ncclCommInitRank(&comm, world_size, id.native, rank), api, "ncclCommInitRank"));
    return communicator(comm, rank, world_size, device);
  }
  /// Rank i on `devices[i]` into `out[i]`, all in this process (ncclCommInitAll); on error `out` is left as it was.
  /// Errors: invalid_argument (sizes differ, or more than 64 devices); NCCL errors.
  [[nodiscard]] static status init_all(std::span<const device_id> devices, std::span<communicator> out) noexcept {
    constexpr const char* api = "nccl::communicator::init_all";
    constexpr std::size_t most = 64;
    if (devices.size() != out.size() || devices.size() > most || devices.empty())
      return error(errc::invalid_argument, api, "%zu devices and %zu communicators (1 to %zu of each)", devices.size(),
                   out.size(), most);
    ncclComm_t comms[most] = {};
    int ordinals[most] = {};
    for (std::size_t i = 0; i < devices.size(); ++i) ordinals[i] = devices[i].get();
    const int count = static_cast<int>(devices.size());
    CUDAMEM_TRY(detail::check_nccl(ncclCommInitAll(comms, count, ordinals), api, "ncclCommInitAll"));
    for (int i = 0; i < count; ++i) out[static_cast<std::size_t>(i)] = communicator(comms[i], i, count, devices[i]);
    return {};
  }
  [[nodiscard]] int rank() const noexcept { return rank_; }                 ///< This rank, from 0.
  [[nodiscard]] int size() const noexcept { return size_; }                 ///< The number of ranks.
  [[nodiscard]] device_id device() const noexcept { return device_; }       ///< The device of this rank.
  [[nodiscard]] ncclComm_t get() const noexcept { return comm_.get(); }     ///< The raw handle; null when empty.
  [[nodiscard]] bool valid() const noexcept { return comm_.valid(); }       ///< False when empty.
  /// Abandons it (ncclCommAbort), cancelling pending operations; empty afterwards. Errors: invalid_argument, NCCL.
  [[nodiscard]] status abort() noexcept {
    if (!valid()) return error(errc::invalid_argument, "nccl::communicator::abort", "the communicator is empty");
    return detail::check_nccl(ncclCommAbort(comm_.release()), "nccl::communicator::abort", "ncclCommAbort");
  }

 private:
  communicator(ncclComm_t comm, int rank, int size, device_id device) noexcept
      : comm_(comm), rank_(rank), size_(size), device_(device) {}
  cudamem::detail::unique_handle<detail::comm_handle> comm_;
  int rank_ = -1, size_ = 0;
  device_id device_;
};

/// NCCL calls issued together (ncclGroupStart to end()); the destructor ends one left open (failures: release handler).
class group {
 public:
  /// Starts a group. Errors: NCCL errors.
  [[nodiscard]] static result<group> start() noexcept {
    CUDAMEM_TRY(detail::check_nccl(ncclGroupStart(), "nccl::group::start", "ncclGroupStart"));
    return group();
  }
  /// Ends the group (ncclGroupEnd), enqueuing its calls. Errors: invalid_argument (ended already); NCCL errors.
  [[nodiscard]] status end() noexcept {
    if (!open_.release()) return error(errc::invalid_argument, "nccl::group::end", "the group has ended already");
    return detail::check_nccl(ncclGroupEnd(), "nccl::group::end", "ncclGroupEnd");
  }

 private:
  group() noexcept : open_(true) {}
  cudamem::detail::unique_handle<detail::group_handle> open_;
};

namespace detail {
/// A device view, not an owner passed as a temporary (it would free its memory while the call is queued).
template <class V>
concept device_view = viewable<std::remove_cvref_t<V>> &&
                      std::is_same_v<typename std::remove_cvref_t<V>::kind, cudamem::device> && !temporary_owner<V>;
enum class extents { equal, send_ranks_times, recv_ranks_times };  // how the extents of send and recv relate
constexpr const char* rule_text[] = {"recv.size() == send.size()", "send.size() == ranks * recv.size()",
                                     "recv.size() == ranks * send.size()"};
inline constexpr int no_rank = INT_MIN;  // a collective without a root: no rank to check
/// Checks a call, then issues `fn(send, recv, count, type, args..., comm, stream)` (count: recv's for reduce_scatter).
template <bool Writes, class Send, class Recv, class Fn, class... Args>
status issue(const char* api, const char* nccl_call, Fn fn, const communicator& comm, Send& send, Recv& recv,
             stream_ref s, extents rule, int rank, Args... args) noexcept {
  const auto in = send.view();
  const auto out = recv.view();
  using T = typename decltype(out)::element_type;
  static_assert(std::is_same_v<std::remove_cv_t<typename decltype(in)::element_type>, std::remove_cv_t<T>>,
                "cudamem::nccl: the element types of send and recv differ");
  static_assert(!Writes || !std::is_const_v<T>, "cudamem::nccl: recv is a view of const elements");
  if (!comm.valid()) return error(errc::invalid_argument, api, "the communicator is empty");
  if (!s.valid()) return handle_moved_from(api, "stream");
  for (device_id where : {in.device(), out.device()})
    if (where != comm.device())
      return error(errc::invalid_argument, api, "a view is on device %d, the communicator's rank on device %d",
                   where.get(), comm.device().get());
  const auto ranks = static_cast<std::size_t>(comm.size());
  std::size_t sent = 0, received = 0;  // the extents scaled as the rule says, to be equal (send == ranks * recv, ...)
  if (__builtin_mul_overflow(in.size(), rule == extents::recv_ranks_times ? ranks : 1, &sent) ||
      __builtin_mul_overflow(out.size(), rule == extents::send_ranks_times ? ranks : 1, &received) || sent != received)
    return error(errc::extents_mismatch, api, "send has %zu elements, recv %zu, with %d ranks (needs %s)", in.size(),
                 out.size(), comm.size(), rule_text[static_cast<int>(rule)]);
  if (rank != no_rank && (rank < 0 || rank >= comm.size()))
    return error(errc::out_of_range, api, "rank %d out of range (%d ranks)", rank, comm.size());
  const std::size_t count = rule == extents::send_ranks_times ? out.size() : in.size();
  return check_nccl(fn(in.data().get(), out.data().get(), count, data_type_of<T>, args..., comm.get(), s.get()), api,
                    nccl_call);
}
}  // namespace detail

/// Reduces every rank's `send` by `op` into every rank's `recv` (ncclAllReduce; equal extents; may be one view).
template <detail::device_view Send, detail::device_view Recv>
[[nodiscard]] status all_reduce(const communicator& comm, Send&& send, Recv&& recv, reduce_op op,
                                stream_ref s) noexcept {
  return detail::issue<true>("nccl::all_reduce", "ncclAllReduce", ncclAllReduce, comm, send, recv, s,
                             detail::extents::equal, detail::no_rank, ncclRedOp_t(op));
}
/// all_reduce in place: every rank's `data` becomes the reduction.
template <detail::device_view Data>
[[nodiscard]] status all_reduce(const communicator& comm, Data&& data, reduce_op op, stream_ref s) noexcept {
  return all_reduce(comm, data, data, op, s);
}
/// Copies rank `root`'s `send` to every rank's `recv` (ncclBroadcast; equal extents).
template <detail::device_view Send, detail::device_view Recv>
[[nodiscard]] status broadcast(const communicator& comm, Send&& send, Recv&& recv, int root, stream_ref s) noexcept {
  return detail::issue<true>("nccl::broadcast", "ncclBroadcast", ncclBroadcast, comm, send, recv, s,
                             detail::extents::equal, root, root);
}
/// Reduces `send` (ranks * recv.size()); rank r gets block r in `recv` (ncclReduceScatter).
template <detail::device_view Send, detail::device_view Recv>
[[nodiscard]] status reduce_scatter(const communicator& comm, Send&& send, Recv&& recv, reduce_op op,
                                    stream_ref s) noexcept {
  return detail::issue<true>("nccl::reduce_scatter", "ncclReduceScatter", ncclReduceScatter, comm, send, recv, s,
                             detail::extents::send_ranks_times, detail::no_rank, ncclRedOp_t(op));
}
/// Gathers rank r's `send` into block r of every `recv` (ranks * send.size(); ncclAllGather).
template <detail::device_view Send, detail::device_view Recv>
[[nodiscard]] status all_gather(const communicator& comm, Send&& send, Recv&& recv, stream_ref s) noexcept {
  return detail::issue<true>("nccl::all_gather", "ncclAllGather", ncclAllGather, comm, send, recv, s,
                             detail::extents::recv_ranks_times, detail::no_rank);
}
/// Sends `data` to rank `peer` (ncclSend; group it with a receive).
template <detail::device_view Data>
[[nodiscard]] status send(const communicator& comm, Data&& data, int peer, stream_ref s) noexcept {
  const auto call = [](const void* in, const void*, auto... rest) { return ncclSend(in, rest...); };
  return detail::issue<false>("nccl::send", "ncclSend", call, comm, data, data, s, detail::extents::equal, peer, peer);
}
/// Receives `data.size()` elements from rank `peer` into `data` (ncclRecv).
template <detail::device_view Data>
[[nodiscard]] status receive(const communicator& comm, Data&& data, int peer, stream_ref s) noexcept {
  const auto call = [](const void*, void* out, auto... rest) { return ncclRecv(out, rest...); };
  return detail::issue<true>("nccl::receive", "ncclRecv", call, comm, data, data, s, detail::extents::equal, peer,
                             peer);
}

}  // namespace cudamem::nccl
