// SPDX-License-Identifier: MIT
/// \file
/// Passing file descriptors and small messages between processes over Unix sockets (SCM_RIGHTS): what every user of
/// exportable pools needs to hand a pool's descriptor to another process. Linux; needs no device. Not in cudamem.hpp.
///
///     unique_fd (unique_fd.hpp)                                                   an owned descriptor
///     make_socket_pair([inherit_on_exec])   result<socket_pair{first, second}>     for fork() or posix_spawn()
///     listen_socket(path), accept_connection(listener), connect_socket(path [, timeout_ms])   unrelated processes
///       a path beginning with '@' names a socket in Linux's abstract namespace (no file to remove)
///     send_fd(socket, fd [, data, size]), receive_fd(socket [, data, size])   result<unique_fd>: the fd and bytes
///     send_bytes(socket, data, size), receive_bytes(socket, data, size)        exactly `size` bytes, or an error
///     send_value(socket, value), receive_value<T>(socket)                      a trivially copyable T, as bytes
///     Errors: errc::system with the errno (error::native_code()), naming the call; invalid_argument; a peer that
///     closed the socket early is invalid_argument "the peer closed the socket after N of M bytes".
#pragma once

#include <cudamem/error.hpp>
#include <cudamem/unique_fd.hpp>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <utility>

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace cudamem {

namespace detail {
/// An errno as an error of `api`, naming the system call (`call`).
[[gnu::cold]] inline error system_error(int code, const char* api, const char* call) noexcept {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
  const char* name = strerrorname_np(code);
#else
  const char* name = nullptr;
#endif
  return error(error_domain::system, code, api, call, name, std::strerror(code));
}
}  // namespace detail

/// Two connected Unix stream sockets, one for each process.
struct socket_pair {
  unique_fd first;   ///< One end (by convention the parent's).
  unique_fd second;  ///< The other end (the child's).
};

namespace detail {
inline status check_socket(int socket, const char* api) noexcept {
  if (socket < 0) return error(errc::invalid_argument, api, "socket %d is not a file descriptor", socket);
  return {};
}
// A sockaddr_un for `path`; '@' at the start: the abstract namespace (Linux), the name after it.
inline status unix_address(const char* path, sockaddr_un& address, socklen_t& length, const char* api) noexcept {
  if (path == nullptr || path[0] == '\0') return error(errc::invalid_argument, api, "the socket path is empty");
  const std::size_t chars = std::strlen(path);
  if (chars >= sizeof address.sun_path)
    return error(errc::invalid_argument, api, "the socket path is %zu characters; at most %zu fit", chars,
                 sizeof address.sun_path - 1);
  std::memset(&address, 0, sizeof address);
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path, chars);
  if (path[0] == '@') address.sun_path[0] = '\0';
  length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + chars + (path[0] == '@' ? 0 : 1));
  return {};
}
inline result<unique_fd> unix_stream_socket(const char* api) noexcept {
  unique_fd made(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!made.valid()) return system_error(errno, api, "socket");
  return made;
}
inline status peer_closed(std::size_t done, std::size_t size, const char* api) noexcept {
  return error(errc::invalid_argument, api, "the peer closed the socket after %zu of %zu bytes", done, size);
}
// sendmsg of [data, data + size), with `fd` (>= 0) in an SCM_RIGHTS message beside the first byte; MSG_NOSIGNAL: a
// closed peer is EPIPE, not a SIGPIPE that ends the process.
inline status send_message(int socket, int fd, const void* data, std::size_t size, const char* api) noexcept {
  CUDAMEM_TRY(check_socket(socket, api));
  const auto* bytes = static_cast<const unsigned char*>(data);
  std::size_t done = 0;
  while (done < size) {
    iovec piece{const_cast<unsigned char*>(bytes + done), size - done};
    msghdr message{};
    message.msg_iov = &piece;
    message.msg_iovlen = 1;
    alignas(cmsghdr) unsigned char control[CMSG_SPACE(sizeof(int))] = {};
    if (fd >= 0 && done == 0) {
      message.msg_control = control;
      message.msg_controllen = sizeof control;
      cmsghdr* header = CMSG_FIRSTHDR(&message);
      header->cmsg_level = SOL_SOCKET;
      header->cmsg_type = SCM_RIGHTS;
      header->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(header), &fd, sizeof fd);
    }
    const ssize_t sent = ::sendmsg(socket, &message, MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EINTR) continue;
      return system_error(errno, api, "sendmsg");
    }
    done += static_cast<std::size_t>(sent);
  }
  return {};
}
// recvmsg of exactly `size` bytes into `data`; the descriptor that came with them (if `fd`) into *fd, close-on-exec.
inline status receive_message(int socket, unique_fd* fd, void* data, std::size_t size, const char* api) noexcept {
  CUDAMEM_TRY(check_socket(socket, api));
  auto* bytes = static_cast<unsigned char*>(data);
  std::size_t done = 0;
  unique_fd received;
  while (done < size) {
    iovec piece{bytes + done, size - done};
    msghdr message{};
    message.msg_iov = &piece;
    message.msg_iovlen = 1;
    alignas(cmsghdr) unsigned char control[CMSG_SPACE(sizeof(int) * 4)] = {};
    message.msg_control = control;
    message.msg_controllen = sizeof control;
    const ssize_t got = ::recvmsg(socket, &message, MSG_CMSG_CLOEXEC);
    if (got < 0) {
      if (errno == EINTR) continue;
      return system_error(errno, api, "recvmsg");
    }
    // Every descriptor that came is owned here first, so that none leaks whatever happens next.
    for (cmsghdr* header = CMSG_FIRSTHDR(&message); header != nullptr; header = CMSG_NXTHDR(&message, header)) {
      if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
      const std::size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (std::size_t i = 0; i < count; ++i) {
        int one = -1;
        std::memcpy(&one, CMSG_DATA(header) + i * sizeof(int), sizeof one);
        unique_fd owned(one);
        if (fd != nullptr && !received.valid()) received = std::move(owned);  // the first; others are closed
      }
    }
    if ((message.msg_flags & MSG_CTRUNC) != 0)
      return error(errc::invalid_argument, api, "the message carried more descriptors than one (they were closed)");
    if (got == 0) return peer_closed(done, size, api);
    done += static_cast<std::size_t>(got);
  }
  if (fd != nullptr) {
    if (!received.valid())
      return error(errc::invalid_argument, api, "no file descriptor came with the %zu-byte message", size);
    *fd = std::move(received);
  }
  return {};
}
}  // namespace detail

/// A connected pair of Unix stream sockets (socketpair). Both are close-on-exec unless `inherit_on_exec`: then a
/// program started with exec or posix_spawn inherits them (pass it the number). fork() children have both either way.
/// Errors: errc::system (socketpair, fcntl).
[[nodiscard]] inline result<socket_pair> make_socket_pair(bool inherit_on_exec = false) noexcept {
  constexpr const char* api = "make_socket_pair";
  int ends[2] = {-1, -1};
  if (::socketpair(AF_UNIX, SOCK_STREAM | (inherit_on_exec ? 0 : SOCK_CLOEXEC), 0, ends) != 0)
    return detail::system_error(errno, api, "socketpair");
  return socket_pair{unique_fd(ends[0]), unique_fd(ends[1])};
}

/// A socket listening at `path` ('@name': Linux's abstract namespace), for connect_socket from another process. A file
/// path must not exist yet (remove a stale one first); the caller removes it when done (unlink). Errors:
/// invalid_argument (empty or too long a path); errc::system (socket, bind: EADDRINUSE when the path exists; listen).
[[nodiscard]] inline result<unique_fd> listen_socket(const char* path, int backlog = 16) noexcept {
  constexpr const char* api = "listen_socket";
  sockaddr_un address;
  socklen_t length = 0;
  CUDAMEM_TRY(detail::unix_address(path, address, length, api));
  auto made = detail::unix_stream_socket(api);
  if (!made) return made;
  if (::bind(made->get(), reinterpret_cast<const sockaddr*>(&address), length) != 0)
    return detail::system_error(errno, api, "bind");
  if (::listen(made->get(), backlog) != 0) return detail::system_error(errno, api, "listen");
  return made;
}

/// The next connection to `listener` (blocks until one comes). Errors: invalid_argument; errc::system (accept4).
[[nodiscard]] inline result<unique_fd> accept_connection(int listener) noexcept {
  constexpr const char* api = "accept_connection";
  CUDAMEM_TRY(detail::check_socket(listener, api));
  for (;;) {
    unique_fd accepted(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
    if (accepted.valid()) return accepted;
    if (errno != EINTR) return detail::system_error(errno, api, "accept4");
  }
}

/// A socket connected to the listener at `path`. While nothing listens there (ENOENT, ECONNREFUSED) it tries again
/// every 10 ms for up to `timeout_ms` (0: once), so a client may start before its server. Errors: invalid_argument;
/// errc::system (connect: the last errno when the time ran out).
[[nodiscard]] inline result<unique_fd> connect_socket(const char* path, int timeout_ms = 0) noexcept {
  constexpr const char* api = "connect_socket";
  sockaddr_un address;
  socklen_t length = 0;
  CUDAMEM_TRY(detail::unix_address(path, address, length, api));
  for (int waited_ms = 0;; waited_ms += 10) {
    auto made = detail::unix_stream_socket(api);
    if (!made) return made;
    if (::connect(made->get(), reinterpret_cast<const sockaddr*>(&address), length) == 0) return made;
    const int code = errno;
    const bool not_yet = code == ENOENT || code == ECONNREFUSED || code == EINTR;
    if (!not_yet || waited_ms >= timeout_ms) return detail::system_error(code, api, "connect");
    (void)::poll(nullptr, 0, 10);
  }
}

/// Sends exactly `size` bytes. Does not block once the socket's buffer has room. Errors: invalid_argument; errc::system
/// (sendmsg: EPIPE when the peer has closed; the process gets no SIGPIPE).
[[nodiscard]] inline status send_bytes(int socket, const void* data, std::size_t size) noexcept {
  if (data == nullptr && size != 0) return error(errc::invalid_argument, "send_bytes", "null data with a size");
  return detail::send_message(socket, -1, data, size, "send_bytes");
}
/// Receives exactly `size` bytes (blocks until they came). Errors: invalid_argument (also: the peer closed the socket
/// first, with how many bytes came); errc::system (recvmsg).
[[nodiscard]] inline status receive_bytes(int socket, void* data, std::size_t size) noexcept {
  if (data == nullptr && size != 0) return error(errc::invalid_argument, "receive_bytes", "null data with a size");
  return detail::receive_message(socket, nullptr, data, size, "receive_bytes");
}

/// Sends a duplicate of `fd` (SCM_RIGHTS) with `size` bytes of `data` (none: one zero byte, since a descriptor needs
/// a byte to travel with); `fd` stays open here. Errors: invalid_argument (a negative fd); as send_bytes.
[[nodiscard]] inline status send_fd(int socket, int fd, const void* data = nullptr, std::size_t size = 0) noexcept {
  constexpr const char* api = "send_fd";
  if (fd < 0) return error(errc::invalid_argument, api, "%d is not a file descriptor", fd);
  if (data == nullptr && size != 0) return error(errc::invalid_argument, api, "null data with a size");
  const unsigned char zero = 0;
  if (size == 0) data = &zero, size = 1;
  return detail::send_message(socket, fd, data, size, api);
}
/// Receives a descriptor sent by send_fd (close-on-exec) and exactly `size` bytes with it (none: the one byte
/// send_fd sent without data). Errors: invalid_argument (no descriptor came; more than one came; the peer closed
/// early); errc::system (recvmsg). Nothing is left open on an error.
[[nodiscard]] inline result<unique_fd> receive_fd(int socket, void* data = nullptr, std::size_t size = 0) noexcept {
  constexpr const char* api = "receive_fd";
  if (data == nullptr && size != 0) return error(errc::invalid_argument, api, "null data with a size");
  unsigned char one = 0;
  if (size == 0) data = &one, size = 1;
  unique_fd fd;
  CUDAMEM_TRY(detail::receive_message(socket, &fd, data, size, api));
  return fd;
}

/// Sends the bytes of a trivially copyable value (an ipc_descriptor, say). Errors: as send_bytes.
template <class T>
  requires std::is_trivially_copyable_v<T>
[[nodiscard]] status send_value(int socket, const T& value) noexcept {
  return send_bytes(socket, &value, sizeof value);
}
/// Receives a value sent by send_value. Errors: as receive_bytes.
template <class T>
  requires(std::is_trivially_copyable_v<T> && std::is_default_constructible_v<T>)
[[nodiscard]] result<T> receive_value(int socket) noexcept {
  T value{};
  CUDAMEM_TRY(receive_bytes(socket, &value, sizeof value));
  return value;
}

}  // namespace cudamem
