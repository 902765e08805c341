// SPDX-License-Identifier: MIT
// Without a device: the IPC descriptor's encoding and checks, and passing file descriptors between processes
// (socketpair and named sockets, between forked processes; a pipe's descriptor travels and is read through).
#include <cudamem/fd_passing.hpp>
#include <cudamem/ipc.hpp>

#include "catch.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>

using namespace cudamem;

namespace {

constexpr unsigned char test_uuid[16] = {0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0,
                                         0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef};

// A descriptor of 1000 ints at offset 256 of a 8192-byte allocation, as export_ipc makes one.
ipc_descriptor int_descriptor() {
  unsigned char handle[64];
  for (int i = 0; i < 64; ++i) handle[i] = static_cast<unsigned char>(i * 7 + 1);
  return detail::make_ipc_descriptor(ipc_kind::device_memory, detail::ipc_type_class<int>(), sizeof(int), alignof(int),
                                     1000, 3, test_uuid, handle, 256, 8192);
}

template <class Change>
ipc_descriptor resealed(ipc_descriptor d, Change change) {
  change(detail::fields_of(d));
  detail::seal(d);
  return d;
}

std::string message_of(const status& s) { return s ? std::string("success") : std::string(s.error().message()); }

bool says(const status& s, const char* text) {
  if (s) return false;
  return std::string(s.error().message()).find(text) != std::string::npos;
}

status elements_as(const ipc_descriptor& d, std::size_t size, std::size_t align, std::uint8_t type_class) {
  return detail::check_ipc_elements(d, size, align, type_class, "test");
}

// Runs `body` in a forked child; its exit status (0: passed; the body returns a number that says which check failed).
template <class Body>
int in_child(Body body) {
  const pid_t pid = fork();
  if (pid == 0) _exit(body());
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// An import is an owner of device memory: copies take it, its views have the imported type (const stays const), and
// the pool is a memory resource.
static_assert(viewable<ipc_memory<float>> && ipc_memory<float>::owns_memory);
static_assert(std::is_same_v<decltype(std::declval<ipc_memory<float>&>().view()), span<float, device>>);
static_assert(std::is_same_v<decltype(std::declval<const ipc_memory<float>&>().view()), span<const float, device>>);
static_assert(std::is_same_v<decltype(std::declval<ipc_memory<const int>&>().view()), span<const int, device>>);
static_assert(memory_resource_for<ipc_pool, device> && !std::is_copy_constructible_v<ipc_memory<int>> &&
              std::is_nothrow_move_constructible_v<ipc_memory<int>> && std::is_trivially_copyable_v<ipc_descriptor>);

}  // namespace

TEST_CASE("ipc descriptor: what export writes travels as bytes and comes back equal", "[ipc]") {
  const ipc_descriptor d = int_descriptor();
  CHECK(ipc_descriptor::size == 152);
  CHECK(d.kind() == ipc_kind::device_memory);
  CHECK(d.version() == ipc_descriptor::current_version);
  CHECK(d.count() == 1000);
  CHECK(d.element_size() == 4);
  CHECK(d.device_ordinal() == 3);
  CHECK(d.exporter_pid() == static_cast<unsigned>(getpid()));
  CHECK(std::memcmp(d.data(), "CMIP", 4) == 0);  // the magic, first
  unsigned char bytes[ipc_descriptor::size];
  std::memcpy(bytes, d.data(), sizeof bytes);
  auto back = ipc_descriptor::from_bytes(bytes, sizeof bytes);
  REQUIRE(back);
  CHECK(*back == d);
  CHECK(detail::check_ipc_descriptor(d, ipc_kind::device_memory, "test"));
  CHECK(elements_as(d, sizeof(int), alignof(int), detail::ipc_type_class<int>()));

  auto short_one = ipc_descriptor::from_bytes(bytes, sizeof bytes - 1);
  REQUIRE_FALSE(short_one);
  CHECK(short_one.error() == errc::invalid_argument);
  CHECK(std::string(short_one.error().message()) == "ipc_descriptor::from_bytes: 151 bytes; a descriptor is 152 bytes");
  CHECK_FALSE(ipc_descriptor::from_bytes(nullptr, 152));
  // The empty descriptor is no descriptor.
  CHECK(says(detail::check_ipc_descriptor(ipc_descriptor(), ipc_kind::device_memory, "test"), "magic 0x00000000"));
}

TEST_CASE("ipc descriptor: every single corrupted byte is caught", "[ipc]") {
  const ipc_descriptor d = int_descriptor();
  const std::size_t checked = offsetof(detail::ipc_fields, checksum);
  for (std::size_t at = 0; at < ipc_descriptor::size; ++at)
    for (unsigned char flip : {0x01, 0x80, 0xFF}) {
      unsigned char bytes[ipc_descriptor::size];
      std::memcpy(bytes, d.data(), sizeof bytes);
      bytes[at] ^= flip;
      INFO("byte " << at << " ^ " << int(flip));
      auto read = ipc_descriptor::from_bytes(bytes, sizeof bytes);
      REQUIRE_FALSE(read);
      CHECK(read.error() == errc::invalid_argument);
      // A flip in the magic or version is named as such; any other, in the checksum's bytes or those it covers,
      // as corruption.
      if (at >= 4 + 2 || at >= checked)
        CHECK(std::string(read.error().message()).find("corrupted") != std::string::npos);
    }
}

TEST_CASE("ipc descriptor: garbage, another magic, version or kind are refused by name", "[ipc]") {
  unsigned char garbage[ipc_descriptor::size];
  std::uint64_t state = 0x9E3779B97F4A7C15ull;
  for (unsigned char& b : garbage) {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    b = static_cast<unsigned char>(state);
  }
  auto read = ipc_descriptor::from_bytes(garbage, sizeof garbage);
  REQUIRE_FALSE(read);
  CHECK(std::string(read.error().message()).find("not a cudamem IPC descriptor") != std::string::npos);

  const ipc_descriptor d = int_descriptor();
  CHECK(says(detail::check_ipc_descriptor(resealed(d, [](auto& f) { f.magic = 0x12345678; }), ipc_kind::device_memory,
                                          "import_ipc"),
             "import_ipc: not a cudamem IPC descriptor (magic 0x12345678, expected 0x50494d43)"));
  CHECK(says(detail::check_ipc_descriptor(resealed(d, [](auto& f) { f.version = 7; }), ipc_kind::device_memory, "t"),
             "descriptor version 7; this cudamem reads version 1"));
  CHECK(says(detail::check_ipc_descriptor(resealed(d, [](auto& f) { f.kind = 9; }), ipc_kind::device_memory, "t"),
             "unknown descriptor kind 9"));
  CHECK(says(detail::check_ipc_descriptor(resealed(d, [](auto& f) { f.kind = 0; }), ipc_kind::device_memory, "t"),
             "unknown descriptor kind 0"));
  // Each kind, imported as another, names the call that imports it.
  const char* importers[] = {"import_ipc", "imported_pool::import_memory", "imported_pool::import", "ipc_event::open",
                             "growable"};
  for (int kind = 1; kind <= 5; ++kind)
    for (int as = 1; as <= 5; ++as) {
      const ipc_descriptor k = resealed(d, [kind](auto& f) { f.kind = static_cast<std::uint8_t>(kind); });
      const status checked = detail::check_ipc_descriptor(k, ipc_kind(as), "t");
      INFO(kind << " as " << as << ": " << message_of(checked));
      if (kind == as) CHECK(checked);
      else CHECK(says(checked, importers[kind - 1]));
    }
  CHECK(std::string(to_string(ipc_kind::pool_memory)) == "pool_memory");
  CHECK(std::string(to_string(ipc_kind(0))) == "unknown");
  CHECK(std::string(to_string(ipc_kind(6))) == "unknown");
}

TEST_CASE("ipc descriptor: the element type is checked by size and class", "[ipc]") {
  const ipc_descriptor d = int_descriptor();
  struct four_bytes {
    char c[4];
  };
  struct eight_bytes {
    int a, b;
  };
  CHECK(says(elements_as(d, sizeof(double), alignof(double), detail::ipc_type_class<double>()),
             "exported with 4-byte elements; imported as 8-byte elements"));
  CHECK(says(elements_as(d, sizeof(eight_bytes), alignof(eight_bytes), detail::ipc_type_class<eight_bytes>()),
             "4-byte elements"));
  CHECK(says(elements_as(d, sizeof(float), alignof(float), detail::ipc_type_class<float>()),
             "exported as signed integers; imported as floating-point numbers"));
  CHECK(says(elements_as(d, sizeof(unsigned), alignof(unsigned), detail::ipc_type_class<unsigned>()),
             "imported as unsigned integers"));
  // A type known only by its size matches any of that size, both ways; const does not matter.
  CHECK(elements_as(d, sizeof(four_bytes), alignof(four_bytes), detail::ipc_type_class<four_bytes>()));
  CHECK(elements_as(d, sizeof(int), alignof(int), detail::ipc_type_class<const int>()));
  const ipc_descriptor opaque = resealed(d, [](auto& f) { f.type_class = 0; });
  CHECK(elements_as(opaque, sizeof(float), alignof(float), detail::ipc_type_class<float>()));
  CHECK(detail::ipc_type_class<bool>() == 4);
  CHECK(detail::ipc_type_class<std::byte>() == 0);
  CHECK(detail::ipc_type_class<unsigned char>() == 1);
  CHECK(detail::ipc_type_class<long long>() == 2);
  CHECK(detail::ipc_type_class<double>() == 3);
}

TEST_CASE("ipc descriptor: the extent must lie inside the exported allocation", "[ipc]") {
  const ipc_descriptor d = int_descriptor();  // 4000 bytes from offset 256 of 8192
  CHECK(elements_as(resealed(d, [](auto& f) { f.count = (8192 - 256) / 4; }), 4, 4, 2));
  CHECK(says(elements_as(resealed(d, [](auto& f) { f.count = (8192 - 256) / 4 + 1; }), 4, 4, 2),
             "7940 bytes from offset 256 lie outside the exported allocation of 8192 bytes"));
  CHECK(says(elements_as(resealed(d,
                                  [](auto& f) {
                                    f.offset_bytes = 8196;
                                    f.count = 0;
                                  }),
                         4, 4, 2),
             "outside the exported allocation"));
  CHECK(elements_as(resealed(d,
                             [](auto& f) {
                               f.offset_bytes = 8192;
                               f.count = 0;
                             }),
                    4, 4, 2));
  const status overflow = elements_as(resealed(d, [](auto& f) { f.count = ~0ull / 2; }), 4, 4, 2);
  REQUIRE_FALSE(overflow);
  CHECK(overflow.error() == errc::size_overflow);
  // The first element must be aligned for the imported type.
  CHECK(says(elements_as(resealed(d, [](auto& f) { f.offset_bytes = 258; }), 4, 4, 2), "not a multiple"));
}

TEST_CASE("ipc descriptor: one made by this process is refused here, accepted in a forked child", "[ipc]") {
  const ipc_descriptor d = int_descriptor();
  CHECK(says(detail::refuse_own_descriptor(d, "import_ipc"), "exported by this process"));
  // Another pid with this process's tag (a child of a fork shares the tag): not this process.
  CHECK(detail::refuse_own_descriptor(resealed(d, [](auto& f) { f.pid ^= 0x40000000u; }), "t"));
  // This pid with another tag (a process of another pid namespace): not this process either.
  CHECK(detail::refuse_own_descriptor(resealed(d, [](auto& f) { f.process_tag ^= 1; }), "t"));
  CHECK(in_child([&d] { return detail::refuse_own_descriptor(d, "t") ? 0 : 1; }) == 0);
}

TEST_CASE("ipc descriptor: a device's UUID reads as nvidia-smi prints it", "[ipc]") {
  char text[41];
  detail::format_uuid(test_uuid, text);
  CHECK(std::string(text) == "GPU-12345678-9abc-def0-0123-456789abcdef");
}

TEST_CASE("fd passing: a pipe's descriptor crosses a socketpair into a forked child, with its bytes", "[ipc][fd]") {
  auto pair = make_socket_pair();
  REQUIRE(pair);
  int pipe_ends[2];
  REQUIRE(pipe2(pipe_ends, O_CLOEXEC) == 0);
  unique_fd pipe_read(pipe_ends[0]), pipe_write(pipe_ends[1]);
  const ipc_descriptor sent = int_descriptor();
  // Sent before the fork, the pipe's read end closed here and its bytes written: the child has the pipe only through
  // the socket, and reads what the parent wrote.
  REQUIRE(send_fd(pair->first.get(), pipe_read.get(), &sent, ipc_descriptor::size));
  pipe_read.reset();
  REQUIRE(write(pipe_write.get(), "hello", 5) == 5);
  const int child_socket = pair->second.get();
  const int code = in_child([child_socket, sent] {
    ipc_descriptor got;
    auto fd = receive_fd(child_socket, &got, ipc_descriptor::size);
    if (!fd) return 1;
    if (!(got == sent)) return 2;
    if ((fcntl(fd->get(), F_GETFD) & FD_CLOEXEC) == 0) return 3;  // received close-on-exec
    char text[6] = {};
    if (read(fd->get(), text, 5) != 5 || std::string(text) != "hello") return 4;  // the pipe itself came
    if (!send_value(child_socket, std::uint64_t{0xfeedface})) return 5;  // and a value back
    return 0;
  });
  CHECK(code == 0);
  auto answer = receive_value<std::uint64_t>(pair->first.get());
  REQUIRE(answer);
  CHECK(*answer == 0xfeedface);
}

TEST_CASE("fd passing: the descriptor is received in the child before the parent writes", "[ipc][fd]") {
  // The same as above, with the order a real producer has: the child blocks in receive_fd, the parent sends later.
  auto pair = make_socket_pair();
  REQUIRE(pair);
  int pipe_ends[2];
  REQUIRE(pipe2(pipe_ends, O_CLOEXEC) == 0);
  unique_fd pipe_read(pipe_ends[0]), pipe_write(pipe_ends[1]);
  const int parent_socket = pair->first.get(), child_socket = pair->second.get();
  const pid_t pid = fork();
  if (pid == 0) {
    pair->first.reset();
    pipe_read.reset(), pipe_write.reset();
    auto fd = receive_fd(child_socket);  // no payload: the single byte send_fd adds
    if (!fd) _exit(1);
    char text[4] = {};
    if (read(fd->get(), text, 3) != 3 || std::string(text) != "abc") _exit(2);
    auto value = receive_value<std::uint64_t>(child_socket);
    if (!value || *value != 42) _exit(3);
    if (!send_value(child_socket, std::uint64_t{43})) _exit(4);
    _exit(0);
  }
  pair->second.reset();
  REQUIRE(send_fd(parent_socket, pipe_read.get()));
  pipe_read.reset();  // the child's copy keeps the pipe open
  REQUIRE(write(pipe_write.get(), "abc", 3) == 3);
  REQUIRE(send_value(parent_socket, std::uint64_t{42}));
  auto answer = receive_value<std::uint64_t>(parent_socket);
  REQUIRE(answer);
  CHECK(*answer == 43);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("fd passing: misuse and a closed peer are clear errors, never a signal", "[ipc][fd]") {
  auto pair = make_socket_pair();
  REQUIRE(pair);
  // Bytes without a descriptor, received as a descriptor: refused, the bytes consumed.
  REQUIRE(send_value(pair->first.get(), std::uint32_t{7}));
  std::uint32_t four = 0;
  auto no_fd = receive_fd(pair->second.get(), &four, sizeof four);
  REQUIRE_FALSE(no_fd);
  CHECK(no_fd.error() == errc::invalid_argument);
  CHECK(std::string(no_fd.error().message()) == "receive_fd: no file descriptor came with the 4-byte message");
  // A descriptor that comes where only bytes are expected is closed, not leaked.
  int pipe_ends[2];
  REQUIRE(pipe2(pipe_ends, O_CLOEXEC) == 0);
  unique_fd pipe_read(pipe_ends[0]), pipe_write(pipe_ends[1]);
  REQUIRE(send_fd(pair->first.get(), pipe_read.get(), &four, sizeof four));
  REQUIRE(receive_bytes(pair->second.get(), &four, sizeof four));
  pipe_read.reset();
  // No reader is left (the received copy was closed): writing to the pipe fails with EPIPE (SIGPIPE ignored here).
  struct sigaction ignore{}, previous{};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &ignore, &previous);
  CHECK(write(pipe_write.get(), "x", 1) == -1);
  CHECK(errno == EPIPE);
  sigaction(SIGPIPE, &previous, nullptr);

  CHECK(send_fd(pair->first.get(), -1).error() == errc::invalid_argument);
  CHECK(send_bytes(-1, &four, 4).error() == errc::invalid_argument);
  CHECK(receive_bytes(pair->second.get(), nullptr, 4).error() == errc::invalid_argument);
  // The peer goes: a read says how far it came, a write is EPIPE (and no SIGPIPE ends this process).
  REQUIRE(send_bytes(pair->first.get(), "ab", 2));
  pair->first.reset();
  std::uint64_t eight = 0;
  const status early = receive_bytes(pair->second.get(), &eight, sizeof eight);
  REQUIRE_FALSE(early);
  CHECK(std::string(early.error().message()) == "receive_bytes: the peer closed the socket after 2 of 8 bytes");
  const status broken = send_bytes(pair->second.get(), &eight, sizeof eight);
  REQUIRE_FALSE(broken);
  CHECK(broken.error() == errc::system);
  CHECK(broken.error().domain() == error_domain::system);
  CHECK(broken.error().native_code() == EPIPE);
  CHECK(std::string(broken.error().message()).find("send_bytes: sendmsg") == 0);
  CHECK(std::string(to_string(errc::system)) == "system");
  CHECK(std::string(to_string(error_domain::system)) == "system");
}

TEST_CASE("fd passing: a named socket joins unrelated processes", "[ipc][fd]") {
  SECTION("a path in the file system") {
    const std::string path = "/tmp/cudamem-fd-test-" + std::to_string(getpid()) + ".sock";
    unlink(path.c_str());
    auto listener = listen_socket(path.c_str());
    REQUIRE(listener);
    // The path is taken now: a second listener is told so.
    auto second = listen_socket(path.c_str());
    REQUIRE_FALSE(second);
    CHECK(second.error().native_code() == EADDRINUSE);
    CHECK(std::string(second.error().message()).find("listen_socket: bind") == 0);
    const int code = in_child([&path] {
      auto client = connect_socket(path.c_str(), 5000);
      if (!client) return 1;
      int pipe_ends[2];
      if (pipe(pipe_ends) != 0) return 2;
      if (!send_fd(client->get(), pipe_ends[0])) return 3;
      close(pipe_ends[0]);
      if (write(pipe_ends[1], "named", 5) != 5) return 4;
      close(pipe_ends[1]);
      return 0;
    });
    auto connection = accept_connection(listener->get());
    REQUIRE(connection);
    auto fd = receive_fd(connection->get());
    REQUIRE(fd);
    char text[6] = {};
    CHECK(read(fd->get(), text, 5) == 5);
    CHECK(std::string(text) == "named");
    CHECK(code == 0);
    unlink(path.c_str());
  }
  SECTION("Linux's abstract namespace, the client starting first") {
    const std::string name = "@cudamem-fd-test-" + std::to_string(getpid());
    const pid_t pid = fork();
    if (pid == 0) {
      auto client = connect_socket(name.c_str(), 5000);  // retries until the parent listens
      if (!client) _exit(1);
      _exit(send_value(client->get(), std::uint32_t{0xabcd}) ? 0 : 2);
    }
    usleep(50 * 1000);
    auto listener = listen_socket(name.c_str());
    REQUIRE(listener);
    auto connection = accept_connection(listener->get());
    REQUIRE(connection);
    auto value = receive_value<std::uint32_t>(connection->get());
    REQUIRE(value);
    CHECK(*value == 0xabcd);
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    CHECK(WEXITSTATUS(status) == 0);
  }
  SECTION("errors") {
    CHECK(listen_socket("").error() == errc::invalid_argument);
    CHECK(listen_socket(nullptr).error() == errc::invalid_argument);
    const std::string too_long(200, 'x');
    auto long_path = listen_socket(too_long.c_str());
    REQUIRE_FALSE(long_path);
    CHECK(std::string(long_path.error().message()).find("at most 107 fit") != std::string::npos);
    auto nobody = connect_socket("/tmp/cudamem-no-such-socket-here");
    REQUIRE_FALSE(nobody);
    CHECK(nobody.error() == errc::system);
    CHECK(nobody.error().native_code() == ENOENT);
    CHECK(accept_connection(-1).error() == errc::invalid_argument);
  }
}
