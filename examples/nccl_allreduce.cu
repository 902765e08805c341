// SPDX-License-Identifier: MIT
// nccl_allreduce: an all-reduce over cudamem buffers with one process per GPU, set up the way a multi-node job
// is. Run without arguments, it is its own launcher: it starts two ranks (this program again, with RANK,
// WORLD_SIZE and LOCAL_RANK in the environment, as mpirun or srun would set them), and rank 0 passes the NCCL
// unique id to rank 1 through a pipe, as a real job passes it through MPI_Bcast or a shared file. Each rank sums
// its buffer with the other's and checks the result. Exits 0 on success, 77 (skipped) with fewer than two GPUs.
// See docs/scaling.md.
#include <cudamem/cudamem.hpp>
#include <cudamem/interop/nccl.hpp>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

namespace {
constexpr int world_size = 2;
constexpr std::size_t count = std::size_t{1} << 24;  // floats per rank: 64 MiB

int fail(int rank, const char* what, const cudamem::error& e) {
  std::fprintf(stderr, "nccl_allreduce rank %d: %s: %s\n", rank, what, e.message());
  return 1;
}

// Rank r contributes r + 1 + (i % 7) at element i, so the sum is 3 + 2 * (i % 7).
__global__ void fill_pattern(cudamem::device_span<float> values, int rank) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < values.size();
       i += std::size_t{gridDim.x} * blockDim.x)
    values[i] = static_cast<float>(rank + 1 + static_cast<int>(i % 7));
}

// One rank: its device, the unique id from rank 0 (`id_fd`: rank 0 writes it, the others read it), the all-reduce.
int run_rank(int rank, int size, int local_rank, int id_fd) {
  using namespace cudamem;
  nccl::unique_id id;
  if (rank == 0) {
    auto made = nccl::unique_id::create();
    if (!made) return fail(rank, "unique_id::create", made.error());
    id = *made;
    for (int peer = 1; peer < size; ++peer)
      if (write(id_fd, &id.native, sizeof id.native) != static_cast<ssize_t>(sizeof id.native)) return 1;
  } else if (read(id_fd, &id.native, sizeof id.native) != static_cast<ssize_t>(sizeof id.native)) {
    std::fprintf(stderr, "nccl_allreduce rank %d: no unique id from rank 0\n", rank);
    return 1;
  }
  close(id_fd);

  const device_id device(local_rank);
  auto comm = nccl::communicator::init_rank(size, id, rank, device);
  if (!comm) return fail(rank, "communicator::init_rank", comm.error());
  auto s = stream::create(device);
  if (!s) return fail(rank, "stream::create", s.error());
  auto values = device_buffer<float>::allocate(count, *s);  // from the device's pool, ordered on s
  if (!values) return fail(rank, "allocate", values.error());
  fill_pattern<<<256, 256, 0, s->get()>>>(*values, rank);
  if (auto ok = check_launch("fill_pattern"); !ok) return fail(rank, "fill_pattern", ok.error());
  if (auto ok = nccl::all_reduce(*comm, *values, nccl::reduce_op::sum, *s); !ok)
    return fail(rank, "all_reduce", ok.error());
  auto staging = pinned_buffer<float>::allocate(count);
  if (!staging) return fail(rank, "allocate", staging.error());
  if (auto ok = copy(*staging, *values, *s); !ok) return fail(rank, "copy", ok.error());
  if (auto ok = s->synchronize(); !ok) return fail(rank, "synchronize", ok.error());
  for (std::size_t i = 0; i < count; ++i)
    if ((*staging)[i] != static_cast<float>(3 + 2 * static_cast<int>(i % 7))) {
      std::fprintf(stderr, "nccl_allreduce rank %d: element %zu is %g\n", rank, i, (*staging)[i]);
      return 1;
    }
  std::printf("nccl_allreduce rank %d of %d on device %d: %zu floats summed correctly\n", rank, size, local_rank,
              count);
  return 0;
}

int env_int(const char* name) {
  const char* text = std::getenv(name);
  return text != nullptr ? std::atoi(text) : -1;
}

// The launcher: starts every rank as this program with the job's environment, waits, and fails if one fails
// (stopping the others, which would wait for it forever) or if the job takes longer than two minutes.
int launch(const char* self) {
  int id_pipe[2];
  if (pipe(id_pipe) != 0) return 1;
  // Everything a rank needs is built before fork: between fork and exec only async-signal-safe calls are made.
  std::vector<std::string> settings[world_size];
  std::vector<char*> environments[world_size];
  for (int rank = 0; rank < world_size; ++rank) {
    const std::string text = std::to_string(rank);
    settings[rank] = {"RANK=" + text, "LOCAL_RANK=" + text, "WORLD_SIZE=" + std::to_string(world_size),
                      "NCCL_EXAMPLE_ID_FD=" + std::to_string(id_pipe[rank == 0 ? 1 : 0])};
    for (std::string& setting : settings[rank]) environments[rank].push_back(setting.data());
    for (char** inherited = environ; *inherited != nullptr; ++inherited) environments[rank].push_back(*inherited);
    environments[rank].push_back(nullptr);
  }
  char* const arguments[] = {const_cast<char*>(self), nullptr};
  pid_t ranks[world_size] = {};
  for (int rank = 0; rank < world_size; ++rank) {
    ranks[rank] = fork();
    if (ranks[rank] < 0) return 1;
    if (ranks[rank] == 0) {
      close(id_pipe[rank == 0 ? 0 : 1]);  // rank 0 writes the id, the others read it
      execve(self, arguments, environments[rank].data());
      _exit(127);
    }
  }
  close(id_pipe[0]);
  close(id_pipe[1]);
  int failed = 0, running = world_size;
  for (int waited_ms = 0; running > 0; waited_ms += 10) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid == 0 && waited_ms < 120'000) {
      usleep(10'000);
      continue;
    }
    if (pid <= 0) {
      std::fprintf(stderr, "nccl_allreduce: the ranks did not finish in two minutes\n");
      for (pid_t rank : ranks) kill(rank, SIGKILL);
      while (wait(nullptr) > 0) {}
      return 1;
    }
    --running;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      failed = 1;  // the other ranks would wait for this one forever
      for (pid_t rank : ranks)
        if (rank != pid) kill(rank, SIGKILL);
    }
  }
  return failed;
}
}  // namespace

int main() {
  if (const int rank = env_int("RANK"); rank >= 0)
    return run_rank(rank, env_int("WORLD_SIZE"), env_int("LOCAL_RANK"), env_int("NCCL_EXAMPLE_ID_FD"));
  // The launcher initializes CUDA only to count the GPUs: the ranks are new processes (exec), not forks of it.
  auto devices = cudamem::device_count();
  if (!devices || *devices < world_size) {
    std::printf("nccl_allreduce: skipped: needs %d GPUs, found %d\n", world_size, devices ? *devices : 0);
    return 77;
  }
  const int failed = launch("/proc/self/exe");
  if (failed == 0) std::printf("nccl_allreduce: both ranks agree\n");
  return failed;
}
