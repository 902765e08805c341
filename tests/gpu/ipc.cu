// SPDX-License-Identifier: MIT
// Memory and events shared between two processes on one GPU: cudaMalloc memory, an exportable pool's memory, an
// interprocess event ordering them, forged and stale descriptors, and an exporter that dies first. This process has
// initialised CUDA (the runner counted devices), so a forked child could not use it: each test starts this binary
// again (posix_spawn of /proc/self/exe) running the hidden test "ipc child process", whose role and socket come in the
// environment. Under compute-sanitizer, pass --target-processes all so that the children are checked too.
#include <cudamem/fd_passing.hpp>
#include <cudamem/ipc.hpp>

#include "common.cuh"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

extern char** environ;

using namespace cudamem;

namespace {

constexpr std::size_t element_count = (1u << 20) + 3;  // not a whole number of pages: the count must travel

struct setup_message {  // what a parent and child tell each other besides descriptors
  std::uint64_t seed;
  std::uint64_t count;
};

__global__ void negate(device_span<int> values) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < values.size(); i += gridDim.x * blockDim.x)
    values[i] = -values[i];
}

std::vector<int> negated(std::vector<int> values) {
  for (int& v : values) v = -v;
  return values;
}

/// A child process running this binary's hidden test in a role, connected by a socket.
struct child_process {
  pid_t pid = -1;
  unique_fd socket;
  /// Waits for the child; its exit status (-1: killed by a signal).
  int wait() {
    if (pid < 0) return -1;
    socket.reset();  // a child still reading sees the end of the stream
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    pid = -1;
    if (WIFSIGNALED(status)) {
      UNSCOPED_INFO("the child died of signal " << WTERMSIG(status));
      return -1;
    }
    return WEXITSTATUS(status);
  }
  child_process() = default;
  child_process(child_process&& other) noexcept : pid(std::exchange(other.pid, -1)), socket(std::move(other.socket)) {}
  ~child_process() {
    if (pid >= 0) {
      kill(pid, SIGKILL);
      (void)wait();
    }
  }
};

child_process spawn_child(const char* role) {
  auto pair = test::take(make_socket_pair(true));
  // The parent's end must not stay open in the child, or the child would never see the parent close it.
  REQUIRE(fcntl(pair.first.get(), F_SETFD, FD_CLOEXEC) == 0);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e)
    if (std::string(*e).rfind("CUDAMEM_IPC_", 0) != 0) env_strings.emplace_back(*e);
  env_strings.push_back(std::string("CUDAMEM_IPC_ROLE=") + role);
  env_strings.push_back("CUDAMEM_IPC_SOCKET=" + std::to_string(pair.second.get()));
  std::vector<char*> env;
  for (std::string& s : env_strings) env.push_back(s.data());
  env.push_back(nullptr);
  std::string self = "/proc/self/exe", name = "ipc child process";
  char* argv[] = {self.data(), name.data(), nullptr};
  child_process child;
  REQUIRE(posix_spawn(&child.pid, "/proc/self/exe", nullptr, nullptr, argv, env.data()) == 0);
  child.socket = std::move(pair.first);
  return child;  // the child's end closes here, in this process
}

void signal_peer(int socket, char byte) { REQUIRE_OK(send_value(socket, byte)); }
char wait_peer(int socket) { return test::take(receive_value<char>(socket)); }

int release_failures = 0;
void count_release_failure(const error& e) noexcept {
  ++release_failures;
  std::fprintf(stderr, "release failure: %s\n", e.message());
}

bool contains(const error& e, const char* text) { return std::string(e.message()).find(text) != std::string::npos; }

// Whether `address` is mapped in this process (the runtime's own answer: an unmapped address is unregistered).
bool mapped(const void* address) {
  cudaPointerAttributes attributes{};
  const cudaError_t code = cudaPointerGetAttributes(&attributes, address);
  (void)cudaGetLastError();
  return code == cudaSuccess && attributes.type == cudaMemoryTypeDevice;
}

// ---- the children's sides ----

// Imports what the parent exported (kind `pool`: from an ipc_pool), waits for its event, checks the data, negates it
// and tells the parent.
void consume(int socket, bool pool) {
  const auto setup = test::take(receive_value<setup_message>(socket));
  imported_pool from;
  if (pool) {
    ipc_descriptor pool_descriptor;
    unique_fd fd = test::take(receive_fd(socket, &pool_descriptor, ipc_descriptor::size));
    from = test::take(imported_pool::import(pool_descriptor, fd.get()));
  }
  const auto memory_descriptor = test::take(receive_value<ipc_descriptor>(socket));
  const auto event_descriptor = test::take(receive_value<ipc_descriptor>(socket));
  REQUIRE(memory_descriptor.count() == setup.count);
  auto memory =
      pool ? test::take(from.import_memory<int>(memory_descriptor)) : test::take(import_ipc<int>(memory_descriptor));
  REQUIRE(memory.size() == setup.count);
  CHECK(memory.handle_kind() == (pool ? ipc_kind::pool_memory : ipc_kind::device_memory));
  auto ready = test::take(ipc_event::open(event_descriptor));
  auto s = test::take(stream::create());
  REQUIRE(wait_peer(socket) == 'R');  // the producer recorded the event after its writes
  REQUIRE_OK(s.wait(ready));
  auto seen = test::take(pinned_buffer<int>::allocate(setup.count));
  REQUIRE_OK(copy(seen.view(), memory.view(), s));
  REQUIRE_OK(s.synchronize());
  CHECK(std::vector<int>(seen.begin(), seen.end()) == test::random_vector<int>(setup.count, setup.seed));
  // A second import of the same descriptor shares the first's mapping; it stays until the last one goes.
  {
    auto again =
        pool ? test::take(from.import_memory<int>(memory_descriptor)) : test::take(import_ipc<int>(memory_descriptor));
    CHECK(again.data() == memory.data());
    const void* base = again.data().get();
    CHECK(detail::ipc_mapping_owners(base) == 2);
    again.reset();
    CHECK(detail::ipc_mapping_owners(base) == 1);
    CHECK(mapped(base));
  }
  negate<<<64, 256, 0, s.get()>>>(memory.view());
  REQUIRE_OK(check_launch("negate"));
  REQUIRE_OK(s.synchronize());
  const void* base = memory.data().get();
  memory.reset();
  CHECK(detail::ipc_mapping_owners(base) == 0);
  if (!pool) CHECK_FALSE(mapped(base));  // closed (a pool import is freed: the address may stay the pool's)
  signal_peer(socket, 'D');
}

// Every kind of bad descriptor, against real ones the parent sent: each is refused, and the real ones still import.
void refuse_bad_descriptors(int socket) {
  ipc_descriptor pool_descriptor;
  unique_fd fd = test::take(receive_fd(socket, &pool_descriptor, ipc_descriptor::size));
  const auto real = test::take(receive_value<ipc_descriptor>(socket));       // 4096 ints of cudaMalloc memory
  const auto real_pool = test::take(receive_value<ipc_descriptor>(socket));  // 4096 ints of pool memory
  auto refused = [](const auto& outcome, errc code, const char* text) {
    REQUIRE_FALSE(outcome);
    INFO(outcome.error().message());
    CHECK(outcome.error().code() == code);
    CHECK(contains(outcome.error(), text));
    CHECK(cudaGetLastError() == cudaSuccess);  // nothing left in CUDA's error slot
  };
  auto resealed = [&real](auto change) {
    ipc_descriptor d = real;
    change(detail::fields_of(d));
    detail::seal(d);
    return d;
  };
  // Garbage bytes.
  std::vector<unsigned char> garbage(ipc_descriptor::size);
  test::random_bytes(garbage.data(), garbage.size(), test::fresh_seed());
  refused(ipc_descriptor::from_bytes(garbage.data(), garbage.size()), errc::invalid_argument, "not a cudamem");
  ipc_descriptor raw;
  std::memcpy(&raw, garbage.data(), garbage.size());
  refused(import_ipc<int>(raw), errc::invalid_argument, "not a cudamem");
  // Wrong magic, version, a corrupted byte.
  refused(import_ipc<int>(resealed([](auto& f) { f.magic ^= 1; })), errc::invalid_argument, "magic");
  refused(import_ipc<int>(resealed([](auto& f) { f.version = 2; })), errc::invalid_argument, "version 2");
  ipc_descriptor corrupted = real;
  detail::fields_of(corrupted).handle[10] ^= 0x40;
  refused(import_ipc<int>(corrupted), errc::invalid_argument, "corrupted");
  // The wrong element type.
  refused(import_ipc<double>(real), errc::invalid_argument, "4-byte elements");
  refused(import_ipc<float>(real), errc::invalid_argument, "floating-point");
  refused(import_ipc<unsigned>(real), errc::invalid_argument, "unsigned");
  // The wrong kind, or the wrong pool.
  refused(import_ipc<int>(real_pool), errc::invalid_argument, "imported_pool::import_memory");
  refused(import_ipc<int>(pool_descriptor), errc::invalid_argument, "imported_pool::import");
  refused(ipc_event::open(real), errc::invalid_argument, "import_ipc");
  // A device this process does not see.
  refused(import_ipc<int>(resealed([](auto& f) { f.uuid[3] ^= 0xFF; })), errc::invalid_argument, "does not see");
  // More elements than the allocation holds.
  refused(import_ipc<int>(resealed([](auto& f) { f.count = f.allocation_bytes / 4 + 1; })), errc::invalid_argument,
          "outside the exported allocation");
  // A forged handle, sealed: CUDA refuses it, and nothing stays mapped or in the table.
  const auto forged = resealed([](auto& f) { test::random_bytes(f.handle, sizeof f.handle, test::fresh_seed()); });
  auto forged_import = import_ipc<int>(forged);
  REQUIRE_FALSE(forged_import);
  CHECK(forged_import.error().code() == errc::cuda);
  CHECK(cudaGetLastError() == cudaSuccess);
  CHECK(detail::ipc_mappings().entries.size() == 0);
  // A descriptor that claims a larger allocation than the handle maps (a stale or forged one): refused after the
  // open, and the mapping is closed again.
  refused(import_ipc<int>(resealed([](auto& f) {
            f.allocation_bytes *= 4;
            f.offset_bytes = f.allocation_bytes - 16;
            f.count = 4;
          })),
          errc::invalid_argument, "stale or forged");
  CHECK(detail::ipc_mappings().entries.size() == 0);
  // Pools: a file descriptor that is no pool's, and memory of another pool.
  unique_fd not_a_pool(open("/dev/null", O_RDONLY | O_CLOEXEC));
  auto bad_pool = imported_pool::import(pool_descriptor, not_a_pool.get());
  REQUIRE_FALSE(bad_pool);
  CHECK(bad_pool.error().code() == errc::cuda);
  CHECK(cudaGetLastError() == cudaSuccess);
  refused(imported_pool::import(pool_descriptor, -1), errc::invalid_argument, "not a file descriptor");
  auto pool = test::take(imported_pool::import(pool_descriptor, fd.get()));
  ipc_descriptor other_pool = real_pool;
  detail::fields_of(other_pool).pool_id ^= 1;
  detail::seal(other_pool);
  refused(pool.import_memory<int>(other_pool), errc::invalid_argument, "belongs to pool");
  // The real ones still import, with the parent's data.
  const auto setup = test::take(receive_value<setup_message>(socket));
  auto memory = test::take(import_ipc<int>(real));
  auto pooled = test::take(pool.import_memory<int>(real_pool));
  CHECK(test::read_back(memory.view()) == test::random_vector<int>(setup.count, setup.seed));
  CHECK(test::read_back(pooled.view()) == negated(test::random_vector<int>(setup.count, setup.seed)));
  signal_peer(socket, 'D');
}

// Exports cudaMalloc and pool memory, and an event; waits until the parent has imported them, then dies without
// freeing anything (as a crash would).
void export_then_die(int socket) {
  const auto setup = test::take(receive_value<setup_message>(socket));
  const std::vector<int> values = test::random_vector<int>(setup.count, setup.seed);
  auto plain = test::take(device_buffer<int>::allocate(setup.count));
  REQUIRE_OK(copy(plain.view(), span(values)));
  auto pool = test::take(ipc_pool::create(device_id(0)));
  auto s = test::take(stream::create());
  auto pooled = test::take(device_buffer<int>::allocate(setup.count, s, pool));
  REQUIRE_OK(s.synchronize());  // the allocation is complete: the legacy stream's copy may write it
  REQUIRE_OK(copy(pooled.view(), span(values)));
  auto shared = test::take(pool.share());
  REQUIRE_OK(send_fd(socket, shared.fd.get(), &shared.descriptor, ipc_descriptor::size));
  REQUIRE_OK(send_value(socket, test::take(export_ipc(plain))));
  REQUIRE_OK(send_value(socket, test::take(pool.export_memory(pooled))));
  REQUIRE(wait_peer(socket) == 'I');
  std::_Exit(0);
}

// Exports cudaMalloc memory and exits at once, freeing nothing, before the parent imports it.
void export_and_exit(int socket) {
  const auto setup = test::take(receive_value<setup_message>(socket));
  auto plain = test::take(device_buffer<int>::allocate(setup.count));
  const std::vector<int> values = test::random_vector<int>(setup.count, setup.seed);
  REQUIRE_OK(copy(plain.view(), span(values)));
  REQUIRE_OK(send_value(socket, test::take(export_ipc(plain))));
  std::_Exit(0);
}

}  // namespace

TEST_CASE("ipc child process", "[.ipc_child]") {
  const char* role = std::getenv("CUDAMEM_IPC_ROLE");
  const char* socket_text = std::getenv("CUDAMEM_IPC_SOCKET");
  if (role == nullptr || socket_text == nullptr) CUDAMEM_SKIP("run by the [ipc] tests only");
  const unique_fd socket(std::atoi(socket_text));
  const std::string which = role;
  if (which == "consume_malloc") consume(socket.get(), false);
  else if (which == "consume_pool") consume(socket.get(), true);
  else if (which == "refuse_bad") refuse_bad_descriptors(socket.get());
  else if (which == "export_then_die") export_then_die(socket.get());
  else if (which == "export_and_exit") export_and_exit(socket.get());
  else FAIL("unknown role " << which);
}

// ---- the parents' sides ----

TEST_CASE("ipc: cudaMalloc memory read and written by another process, ordered by an ipc_event", "[ipc]") {
  const std::uint64_t seed = test::fresh_seed();
  const std::vector<int> values = test::random_vector<int>(element_count, seed);
  auto memory = test::take(device_buffer<int>::allocate(element_count));
  auto ready = test::take(ipc_event::create(device_id(0)));
  auto s = test::take(stream::create(device_id(0)));
  child_process child = spawn_child("consume_malloc");
  REQUIRE_OK(send_value(child.socket.get(), setup_message{seed, element_count}));
  REQUIRE_OK(send_value(child.socket.get(), test::take(export_ipc(memory))));
  REQUIRE_OK(send_value(child.socket.get(), test::take(ready.export_handle())));
  // The write is slow (a delay kernel first): the consumer sees the data only because it waits for the event.
  test::delay_then_write<<<1, 32, 0, s.get()>>>(memory.view(), 0, 50'000'000ull);
  REQUIRE_OK(check_launch("delay_then_write"));
  auto staged = test::take(pinned_buffer<int>::allocate(element_count));
  std::memcpy(staged.view().data().get(), values.data(), values.size() * sizeof(int));
  REQUIRE_OK(copy(memory.view(), staged.view(), s));
  REQUIRE_OK(ready.record(s));
  signal_peer(child.socket.get(), 'R');
  REQUIRE(wait_peer(child.socket.get()) == 'D');
  CHECK(child.wait() == 0);
  CHECK(test::read_back(memory.view()) == negated(values));
}

TEST_CASE("ipc: memory of an exportable pool read and written by another process", "[ipc]") {
  const std::uint64_t seed = test::fresh_seed();
  const std::vector<int> values = test::random_vector<int>(element_count, seed);
  auto pool = test::take(ipc_pool::create(device_id(0)));
  auto s = test::take(stream::create(device_id(0)));
  auto memory = test::take(device_buffer<int>::allocate(element_count, s, pool));
  auto ready = test::take(ipc_event::create(device_id(0)));
  REQUIRE_OK(s.synchronize());  // the allocation itself must be complete before another process imports it
  child_process child = spawn_child("consume_pool");
  REQUIRE_OK(send_value(child.socket.get(), setup_message{seed, element_count}));
  {
    auto shared = test::take(pool.share());
    CHECK(shared.fd.valid());
    REQUIRE_OK(send_fd(child.socket.get(), shared.fd.get(), &shared.descriptor, ipc_descriptor::size));
  }
  REQUIRE_OK(send_value(child.socket.get(), test::take(pool.export_memory(memory))));
  REQUIRE_OK(send_value(child.socket.get(), test::take(ready.export_handle())));
  test::delay_then_write<<<1, 32, 0, s.get()>>>(memory.view(), 0, 50'000'000ull);
  REQUIRE_OK(check_launch("delay_then_write"));
  auto staged = test::take(pinned_buffer<int>::allocate(element_count));
  std::memcpy(staged.view().data().get(), values.data(), values.size() * sizeof(int));
  REQUIRE_OK(copy(memory.view(), staged.view(), s));
  REQUIRE_OK(ready.record(s));
  signal_peer(child.socket.get(), 'R');
  REQUIRE(wait_peer(child.socket.get()) == 'D');  // the child has freed its import: this side may free now
  CHECK(child.wait() == 0);
  CHECK(test::read_back(memory.view()) == negated(values));
}

TEST_CASE("ipc: a part of an allocation travels with its offset and count", "[ipc]") {
  auto memory = test::take(device_buffer<int>::allocate(1000));
  const auto part = test::take(memory.view().subspan(100, 50));
  const auto d = test::take(export_ipc(part));
  CHECK(d.count() == 50);
  CHECK(d.element_size() == sizeof(int));
  CHECK(detail::fields_of(d).offset_bytes == 400);
  CHECK(detail::fields_of(d).allocation_bytes >= 4000);
  CHECK(d.kind() == ipc_kind::device_memory);
  CHECK(d.exporter_pid() == static_cast<unsigned>(getpid()));
  CHECK(test::take(ipc_descriptor::from_bytes(d.data(), ipc_descriptor::size)) == d);
}

TEST_CASE("ipc: the exporting process cannot import its own descriptors; exports check their memory", "[ipc]") {
  auto memory = test::take(device_buffer<int>::allocate(256));
  const auto d = test::take(export_ipc(memory));
  auto own = import_ipc<int>(d);
  REQUIRE_FALSE(own);
  CHECK(own.error() == errc::invalid_argument);
  CHECK(contains(own.error(), "exported by this process"));
  auto ready = test::take(ipc_event::create());
  auto own_event = ipc_event::open(test::take(ready.export_handle()));
  REQUIRE_FALSE(own_event);
  CHECK(contains(own_event.error(), "exported by this process"));
  auto pool = test::take(ipc_pool::create(device_id(0)));
  auto own_pool = imported_pool::import(test::take(pool.share()).descriptor, 0);
  REQUIRE_FALSE(own_pool);
  CHECK(contains(own_pool.error(), "exported by this process"));

  // Memory of cudaMallocAsync's pool is not cudaIpcGetMemHandle's: CUDA refuses it, and the message says what to use.
  auto s = test::take(stream::create());
  auto async = test::take(device_buffer<int>::allocate(256, s));
  REQUIRE_OK(s.synchronize());
  auto refused = export_ipc(async);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code() == errc::cuda);
  CHECK(contains(refused.error(), "ipc_pool::export_memory"));
  CHECK(cudaGetLastError() == cudaSuccess);
  // cudaMalloc memory is no ipc_pool's.
  auto not_pooled = pool.export_memory(memory);
  REQUIRE_FALSE(not_pooled);
  CHECK(not_pooled.error().code() == errc::cuda);
  CHECK(cudaGetLastError() == cudaSuccess);
  // A span that says more than its allocation holds, a null one, and managed memory.
  auto too_long = export_ipc(make_span<device>(memory.view().data().get() + 200, 100, device_id(0)));
  REQUIRE_FALSE(too_long);
  CHECK(too_long.error() == errc::out_of_range);
  auto null = export_ipc(device_span<int>());
  REQUIRE_FALSE(null);
  CHECK(null.error() == errc::invalid_argument);
  auto managed_memory = test::take(managed_buffer<int>::allocate(256));
  auto not_device = export_ipc(make_span<device>(managed_memory.view().data().get(), 256, device_id(0)));
  REQUIRE_FALSE(not_device);
  CHECK(not_device.error() == errc::invalid_argument);
  CHECK(contains(not_device.error(), "not device memory"));
}

TEST_CASE("ipc: forged, corrupted and mistyped descriptors are refused in the importing process", "[ipc]") {
  const std::uint64_t seed = test::fresh_seed();
  const std::vector<int> values = test::random_vector<int>(4096, seed);
  auto memory = test::take(device_buffer<int>::allocate(values.size()));
  REQUIRE_OK(copy(memory.view(), span(values)));
  auto pool = test::take(ipc_pool::create(device_id(0)));
  auto s = test::take(stream::create());
  auto pooled = test::take(device_buffer<int>::allocate(values.size(), s, pool));
  REQUIRE_OK(s.synchronize());
  const std::vector<int> negated_values = negated(values);
  REQUIRE_OK(copy(pooled.view(), span(negated_values)));
  child_process child = spawn_child("refuse_bad");
  {
    auto shared = test::take(pool.share());
    REQUIRE_OK(send_fd(child.socket.get(), shared.fd.get(), &shared.descriptor, ipc_descriptor::size));
  }
  REQUIRE_OK(send_value(child.socket.get(), test::take(export_ipc(memory))));
  REQUIRE_OK(send_value(child.socket.get(), test::take(pool.export_memory(pooled))));
  REQUIRE_OK(send_value(child.socket.get(), setup_message{seed, values.size()}));
  REQUIRE(wait_peer(child.socket.get()) == 'D');
  CHECK(child.wait() == 0);
}

TEST_CASE("ipc: imports outlive an exporter that dies without freeing", "[ipc]") {
  const std::uint64_t seed = test::fresh_seed();
  release_failures = 0;
  const release_handler previous = set_release_handler(&count_release_failure);
  {
    child_process child = spawn_child("export_then_die");
    REQUIRE_OK(send_value(child.socket.get(), setup_message{seed, element_count}));
    ipc_descriptor pool_descriptor;
    unique_fd fd = test::take(receive_fd(child.socket.get(), &pool_descriptor, ipc_descriptor::size));
    const auto plain_descriptor = test::take(receive_value<ipc_descriptor>(child.socket.get()));
    const auto pooled_descriptor = test::take(receive_value<ipc_descriptor>(child.socket.get()));
    auto plain = test::take(import_ipc<int>(plain_descriptor));
    auto pool = test::take(imported_pool::import(pool_descriptor, fd.get()));
    auto pooled = test::take(pool.import_memory<int>(pooled_descriptor));
    signal_peer(child.socket.get(), 'I');
    CHECK(child.wait() == 0);  // gone, its memory never freed
    // The imports still hold the memory and its data; letting go of them is no failure.
    CHECK(test::read_back(plain.view()) == test::random_vector<int>(element_count, seed));
    CHECK(test::read_back(pooled.view()) == test::random_vector<int>(element_count, seed));
  }
  set_release_handler(previous);
  CHECK(release_failures == 0);
}

TEST_CASE("ipc: a descriptor whose exporter has exited before the import", "[ipc]") {
  const std::uint64_t seed = test::fresh_seed();
  child_process child = spawn_child("export_and_exit");
  REQUIRE_OK(send_value(child.socket.get(), setup_message{seed, 4096}));
  const auto d = test::take(receive_value<ipc_descriptor>(child.socket.get()));
  CHECK(child.wait() == 0);
  auto late = import_ipc<int>(d);
  INFO((late ? std::string("imported") : std::string(late.error().message())));
  REQUIRE_FALSE(late);
  CHECK(late.error().code() == errc::cuda);
  CHECK(contains(late.error(), "has exited"));
  CHECK(cudaGetLastError() == cudaSuccess);
  CHECK(detail::ipc_mappings().entries.size() == 0);
}
