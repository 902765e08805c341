// SPDX-License-Identifier: MIT
// Two processes on one GPU share device memory: the producer allocates from an exportable pool and fills it with a
// kernel, the consumer imports it and reads it, ordered by an interprocess event. One program: run without arguments
// it is the producer, and starts itself again as the consumer (a new process, so CUDA starts fresh there: a fork()
// child of a process that has used CUDA cannot use it). They talk over a socketpair; the pool's file descriptor
// crosses it with SCM_RIGHTS (send_fd). Prints what it checked; exits 0 on success.
#include <cudamem/cudamem.hpp>
#include <cudamem/fd_passing.hpp>
#include <cudamem/ipc.hpp>

#include <spawn.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

extern char** environ;

using namespace cudamem;

namespace {

constexpr std::size_t count = 1 << 22;

struct report_message {  // what the consumer tells the producer
  std::uint64_t read;
  std::uint64_t wrong;
};

__global__ void fill_ramp(device_span<float> out) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < out.size(); i += gridDim.x * blockDim.x)
    out[i] = 0.5f * static_cast<float>(i % 1024);
}

int fail(const char* role, const error& e) {
  std::fprintf(stderr, "ipc_producer_consumer (%s): %s\n", role, e.message());
  return 1;
}
#define CHECK_OK(role, ...)                                                            \
  do {                                                                                 \
    if (auto checked_ = (__VA_ARGS__); !checked_) return fail(role, checked_.error()); \
  } while (0)

// The consumer: import the pool, the memory and the event; wait for the producer's event; read and check.
int consumer(int socket) {
  constexpr const char* role = "consumer";
  ipc_descriptor pool_descriptor;
  auto pool_fd = receive_fd(socket, &pool_descriptor, ipc_descriptor::size);  // the pool's fd and descriptor
  if (!pool_fd) return fail(role, pool_fd.error());
  auto pool = imported_pool::import(pool_descriptor, pool_fd->get());
  if (!pool) return fail(role, pool.error());
  auto memory_descriptor = receive_value<ipc_descriptor>(socket);
  auto event_descriptor = receive_value<ipc_descriptor>(socket);
  if (!memory_descriptor || !event_descriptor)
    return fail(role, (memory_descriptor ? event_descriptor.error() : memory_descriptor.error()));
  auto data = pool->import_memory<float>(*memory_descriptor);  // checks the element type and carries the count
  if (!data) return fail(role, data.error());
  auto written = ipc_event::open(*event_descriptor);
  if (!written) return fail(role, written.error());
  auto s = stream::create(data->device());
  if (!s) return fail(role, s.error());
  auto host = pinned_buffer<float>::allocate(data->size());
  if (!host) return fail(role, host.error());

  auto recorded = receive_value<char>(socket);  // the producer has recorded its event after the fill
  if (!recorded) return fail(role, recorded.error());
  CHECK_OK(role, s->wait(*written));            // this stream's work waits for the producer's kernel
  CHECK_OK(role, copy(*host, *data, *s));
  CHECK_OK(role, s->synchronize());
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < host->size(); ++i)
    if ((*host)[i] != 0.5f * static_cast<float>(i % 1024)) ++wrong;
  data->reset();  // let go before the producer frees: its free must come after every importer's
  CHECK_OK(role, send_value(socket, report_message{host->size(), wrong}));
  return wrong == 0 ? 0 : 1;
}

// The producer: start the consumer, export, fill, record, and wait for the consumer's report.
int producer(const char* self) {
  constexpr const char* role = "producer";
  if (auto devices = device_count(); !devices || *devices == 0) {
    std::fprintf(stderr, "ipc_producer_consumer: no CUDA driver or no GPU (%s)\n",
                 devices ? "no device found" : devices.error().message());
    return 1;
  }
  auto pool = ipc_pool::create(device_id(0));
  if (!pool) return fail(role, pool.error());
  auto s = stream::create(device_id(0));
  if (!s) return fail(role, s.error());
  auto data = device_buffer<float>::allocate(count, *s, *pool);
  if (!data) return fail(role, data.error());
  auto written = ipc_event::create(device_id(0));
  if (!written) return fail(role, written.error());
  CHECK_OK(role, s->synchronize());  // the allocation must be complete before another process imports it

  auto sockets = make_socket_pair(true);  // the consumer inherits its end across posix_spawn
  if (!sockets) return fail(role, sockets.error());
  const std::string socket_number = std::to_string(sockets->second.get());
  char* argv[] = {const_cast<char*>(self), const_cast<char*>("consumer"), const_cast<char*>(socket_number.c_str()),
                  nullptr};
  pid_t child = -1;
  if (posix_spawn(&child, "/proc/self/exe", nullptr, nullptr, argv, environ) != 0) {
    std::fprintf(stderr, "ipc_producer_consumer: posix_spawn failed\n");
    return 1;
  }
  sockets->second.reset();
  const int socket = sockets->first.get();
  auto wait_consumer = [child] {
    int status = 0;
    while (waitpid(child, &status, 0) < 0) {}
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  };

  auto shared = pool->share();  // the pool's file descriptor and its descriptor, sent together
  if (!shared) return fail(role, shared.error());
  CHECK_OK(role, send_fd(socket, shared->fd.get(), &shared->descriptor, ipc_descriptor::size));
  auto memory_descriptor = pool->export_memory(*data);
  auto event_descriptor = written->export_handle();
  if (!memory_descriptor || !event_descriptor)
    return fail(role, (memory_descriptor ? event_descriptor.error() : memory_descriptor.error()));
  CHECK_OK(role, send_value(socket, *memory_descriptor));
  CHECK_OK(role, send_value(socket, *event_descriptor));

  fill_ramp<<<256, 256, 0, s->get()>>>(*data);
  CHECK_OK(role, check_launch("fill_ramp"));
  CHECK_OK(role, written->record(*s));
  CHECK_OK(role, send_value(socket, 'R'));  // recorded: the consumer's wait now waits for the fill

  auto report = receive_value<report_message>(socket);
  if (!report) return fail(role, report.error());
  const int consumer_status = wait_consumer();
  std::printf("ipc_producer_consumer: the consumer read %llu floats the producer wrote, %llu wrong; exit %d\n",
              static_cast<unsigned long long>(report->read), static_cast<unsigned long long>(report->wrong),
              consumer_status);
  return report->read == count && report->wrong == 0 && consumer_status == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "consumer") return consumer(std::atoi(argv[2]));
  return producer(argv[0]);
}
