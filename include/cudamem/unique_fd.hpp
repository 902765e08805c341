// SPDX-License-Identifier: MIT
/// \file
/// `unique_fd`: an owned POSIX file descriptor, closed when it goes; what an exportable pool's share() and
/// receive_fd() return. Needs no device.
///
///     unique_fd(fd): get(), valid(), release(), reset([fd]), ==      owning, move-only; -1 owns nothing
#pragma once

#include <cudamem/detail/unique_handle.hpp>

#include <unistd.h>

namespace cudamem {

namespace detail {
struct fd_handle {  // what a unique_fd owns; -1 is none
  using type = int;
  static int empty() noexcept { return -1; }
  static void release(int fd) noexcept { (void)::close(fd); }  // close's EINTR still closes on Linux: never retried
};
}  // namespace detail

/// An owned file descriptor, closed when it goes; move-only. -1 owns nothing.
class unique_fd {
 public:
  unique_fd() noexcept = default;                                 ///< Owns nothing.
  explicit unique_fd(int fd) noexcept : fd_(fd < 0 ? -1 : fd) {}  ///< Owns `fd` (a negative one: nothing).
  [[nodiscard]] int get() const noexcept { return fd_.get(); }    ///< The descriptor; -1 when none is owned.
  [[nodiscard]] bool valid() const noexcept { return fd_.valid(); }  ///< False when none is owned.
  /// Gives the descriptor up without closing it; this owns nothing afterwards.
  [[nodiscard]] int release() noexcept { return fd_.release(); }
  void reset(int fd = -1) noexcept { fd_.reset(fd < 0 ? -1 : fd); }  ///< Closes the owned descriptor, owns `fd`.
  /// Equal when both own the same descriptor number (or neither owns one).
  friend bool operator==(const unique_fd& a, const unique_fd& b) noexcept { return a.get() == b.get(); }

 private:
  detail::unique_handle<detail::fd_handle> fd_;
};

}  // namespace cudamem
