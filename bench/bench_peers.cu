// SPDX-License-Identifier: MIT
// bench_peers: cudamem beside the libraries a user would pick instead, in one run, doing the same work:
//   RMM 26.10 (pool_memory_resource, arena_memory_resource, cuda_async_memory_resource, device_buffer),
//   CCCL 3.3 or newer (cuda::device_memory_pool, cuda::buffer, cuda::copy_bytes / fill_bytes),
//   PyTorch's CUDACachingAllocator from C++ (raw_alloc_with_stream / raw_delete; bench_peers_torch.cpp),
//   Thrust (device_vector, thrust::copy / fill), and the raw runtime calls.
// Each peer is built in only where it was found (bench/CMakeLists.txt says which); the table says which ran.
//
// Sections (medians of interleaved blocks, the order of the libraries rotating from block to block; spread is half
// the interquartile range over the median):
//   alloc     ns per allocate+free pair: 1 MiB repeated; RMM's random-allocations trace (1000 allocations of up to
//             1 MiB, uniform and normal sizes, random free order); a mixed trace of 256 B to 64 MiB (log-uniform).
//             On 8 threads with a stream each (one physical core each where sysfs says which), pairs per second:
//             every trace, and RMM's uniform one also on one thread for the scaling.
//             Memory held (device memory in use, from cudaMemGetInfo, over the allocator's fresh start, with every
//             process-wide cache emptied first) at the end of a trace and at its peak, each allocator measured
//             alone. Where cudamem's time and memory go, as context rows: the two capture-status queries of its
//             pair, timed alone (also on 8 threads), and the pool without them; arithmetic alone on 1 and 8
//             threads, the host's own scaling; the trace's own peak of live bytes, the caching pool's peaks in use
//             (rounded to size classes) and reserved (with cache), and the same pool over cudaMalloc.
//   buffer    create + destroy of a 1 MiB device buffer on a stream (thrust::device_vector with its default
//             allocator and on Thrust's pool).
//   copy      host cost of a 4-byte stream-ordered device-to-device copy, fill and copy into a new buffer
//             (allocate, copy, free: RMM's device_buffer copy) in ns per call, and bandwidth of each at 1 GiB (GB/s,
//             CUDA events); whether each captured into a CUDA graph replays with the right data, and, for a copy
//             into a new buffer, whether the resource hands the graph's block to its next caller.
// The default memory pool keeps its memory across synchronizations (release threshold raised), the raw calls'
// best case and what cudamem::set_pool_release_threshold does. Exits 77 without a CUDA device.

#include "harness.hpp"

#include <cudamem/interop/thrust.hpp>

#include <thrust/copy.h>
#include <thrust/device_vector.h>
#include <thrust/fill.h>
#include <thrust/mr/allocator.h>
#include <thrust/mr/device_memory_resource.h>
#include <thrust/mr/disjoint_pool.h>
#include <thrust/mr/new.h>

#if defined(CUDAMEM_BENCH_RMM)
#include <rmm/device_buffer.hpp>
#include <rmm/mr/arena_memory_resource.hpp>
#include <rmm/mr/cuda_async_memory_resource.hpp>
#include <rmm/mr/cuda_memory_resource.hpp>
#include <rmm/mr/pool_memory_resource.hpp>
#endif
#if defined(CUDAMEM_BENCH_CCCL)
#include <cuda/algorithm>
#include <cuda/buffer>
#include <cuda/devices>
#include <cuda/memory_pool>
#include <cuda/stream_ref>
#endif

#include <atomic>
#include <cmath>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#if defined(CUDAMEM_BENCH_TORCH)
// bench_peers_torch.cpp: PyTorch's caching allocator, compiled apart from CCCL's and RMM's headers.
void* torch_allocate(std::size_t bytes, cudaStream_t stream);
void torch_deallocate(void* p);
void torch_init(int devices);
void torch_empty_cache();
const char* torch_version();
#endif

namespace {
using namespace cudamem;

// ---------------------------------------------------------------------------------------------
// Streams: every library gets the same created stream; cudamem takes the stream object's ref (it carries the id).

struct bench_stream {
  cudamem::stream owner;
  [[nodiscard]] cudaStream_t raw() const noexcept { return owner.get(); }
  [[nodiscard]] stream_ref ref() const noexcept { return owner.ref(); }
};
std::vector<bench_stream> make_streams(int count) {
  std::vector<bench_stream> out;
  for (int i = 0; i < count; ++i) out.push_back({take(cudamem::stream::create(), "stream::create")});
  return out;
}

// ---------------------------------------------------------------------------------------------
// Allocators under test: allocate(bytes, stream) / deallocate(p, bytes, stream), failures end the run. Each is a
// concrete type, so that the timed loops call it directly (no virtual call, no std::function).

struct cuda_malloc {  // the synchronous runtime calls
  static constexpr const char* name = "cudaMalloc";
  void* allocate(std::size_t bytes, const bench_stream&) {
    void* p = nullptr;
    check(cudaMalloc(&p, bytes), "cudaMalloc");
    return p;
  }
  void deallocate(void* p, std::size_t, const bench_stream&) { check(cudaFree(p), "cudaFree"); }
};
struct cuda_malloc_async {  // the stream-ordered runtime calls on the default pool
  static constexpr const char* name = "cudaMallocAsync";
  void* allocate(std::size_t bytes, const bench_stream& s) {
    void* p = nullptr;
    check(cudaMallocAsync(&p, bytes, s.raw()), "cudaMallocAsync");
    return p;
  }
  void deallocate(void* p, std::size_t, const bench_stream& s) { check(cudaFreeAsync(p, s.raw()), "cudaFreeAsync"); }
};
// cudamem's caching pool over `Upstream`, with stream order `Order`: the row of each configuration below.
template <class Upstream, class Order = detail::cuda_stream_order>
struct cudamem_pool_of {
  Upstream upstream;
  caching_pool<Upstream, Order> pool{upstream};
  void* allocate(std::size_t bytes, const bench_stream& s) {
    return take(pool.allocate(s.ref(), bytes, 256), "caching_pool::allocate");
  }
  void deallocate(void* p, std::size_t bytes, const bench_stream& s) { pool.deallocate(s.ref(), p, bytes, 256); }
};
struct cudamem_caching_pool : cudamem_pool_of<device_pool_resource> {
  static constexpr const char* name = "cudamem caching_pool";
};
// Context rows, not libraries. The same pool with a stream order that skips the capture-status query of allocate and
// deallocate: the pool's own work on the 1 MiB pair, timed directly (it would serve a capturing stream: never do this).
struct order_without_capture_queries : detail::cuda_stream_order {
  status usable(stream_ref, const char*) const noexcept { return {}; }
};
struct cudamem_pool_alone : cudamem_pool_of<device_pool_resource, order_without_capture_queries> {
  static constexpr const char* name = "of cudamem's pair: the pool without its 2 queries";
};
// The same pool over cudaMalloc: for the memory rows, how much of what the pool holds is the upstream's granularity
// (the driver's stream-ordered pool maps memory in larger pieces than cudaMalloc does).
struct cudamem_pool_over_malloc : cudamem_pool_of<device_malloc_resource> {
  static constexpr const char* name = "cudamem: caching_pool over cudaMalloc";
};
#if defined(CUDAMEM_BENCH_RMM)
struct rmm_pool {
  static constexpr const char* name = "RMM pool_memory_resource";
  rmm::mr::cuda_memory_resource upstream;
  rmm::mr::pool_memory_resource pool{upstream, 0};  // grows on demand, as the caching pool does
  void* allocate(std::size_t bytes, const bench_stream& s) {
    return pool.allocate(cuda::stream_ref{s.raw()}, bytes, 256);
  }
  void deallocate(void* p, std::size_t bytes, const bench_stream& s) {
    pool.deallocate(cuda::stream_ref{s.raw()}, p, bytes, 256);
  }
};
struct rmm_arena {
  static constexpr const char* name = "RMM arena_memory_resource";
  rmm::mr::cuda_memory_resource upstream;
  rmm::mr::arena_memory_resource arena{upstream, std::size_t{4} << 30};  // its arena is taken whole, up front
  void* allocate(std::size_t bytes, const bench_stream& s) {
    return arena.allocate(cuda::stream_ref{s.raw()}, bytes, 256);
  }
  void deallocate(void* p, std::size_t bytes, const bench_stream& s) {
    arena.deallocate(cuda::stream_ref{s.raw()}, p, bytes, 256);
  }
};
struct rmm_async {
  static constexpr const char* name = "RMM cuda_async_memory_resource";
  rmm::mr::cuda_async_memory_resource async{std::nullopt, std::numeric_limits<std::size_t>::max()};
  void* allocate(std::size_t bytes, const bench_stream& s) {
    return async.allocate(cuda::stream_ref{s.raw()}, bytes, 256);
  }
  void deallocate(void* p, std::size_t bytes, const bench_stream& s) {
    async.deallocate(cuda::stream_ref{s.raw()}, p, bytes, 256);
  }
};
#endif
#if defined(CUDAMEM_BENCH_CCCL)
struct cccl_pool {
  static constexpr const char* name = "CCCL device_memory_pool";
  cuda::device_memory_pool pool{cuda::devices[0], make_properties()};
  static cuda::memory_pool_properties make_properties() {
    cuda::memory_pool_properties p{};
    p.release_threshold = std::numeric_limits<std::size_t>::max();
    return p;
  }
  void* allocate(std::size_t bytes, const bench_stream& s) {
    return pool.allocate(cuda::stream_ref{s.raw()}, bytes, 256);
  }
  void deallocate(void* p, std::size_t bytes, const bench_stream& s) {
    pool.deallocate(cuda::stream_ref{s.raw()}, p, bytes, 256);
  }
};
#endif
#if defined(CUDAMEM_BENCH_TORCH)
struct torch_caching {
  static constexpr const char* name = "PyTorch CUDACachingAllocator";
  void* allocate(std::size_t bytes, const bench_stream& s) { return torch_allocate(bytes, s.raw()); }
  void deallocate(void* p, std::size_t, const bench_stream&) { torch_deallocate(p); }
  torch_caching() { torch_empty_cache(); }  // its cache is process-wide: a fresh start gives the cached memory back
  ~torch_caching() { torch_empty_cache(); }
};
#endif

// ---------------------------------------------------------------------------------------------
// Traces: the same sequence of allocations and frees for every allocator.

struct op {
  bool allocate;
  std::size_t value;  // allocate: bytes; free: the index in the list of live blocks (the last moves there)
};
struct trace {
  std::string name;
  std::vector<op> ops;
  std::size_t allocations = 0;
};

// `count` allocations of sizes from `size`, each step allocating or freeing a random live block with even odds
// (allocating when none is live, freeing when `max_live` bytes would be passed), all freed at the end.
template <class SizeFn>
trace random_trace(std::string name, std::size_t count, std::size_t max_live, std::uint64_t seed, SizeFn size) {
  std::mt19937_64 rng(seed);
  trace t{std::move(name), {}, count};
  std::vector<std::size_t> live;
  std::size_t live_bytes = 0, made = 0;
  while (made < count || !live.empty()) {
    const bool can_allocate = made < count;
    const bool want_allocate = live.empty() || std::uniform_int_distribution<int>(0, 1)(rng) == 0;
    if (can_allocate && want_allocate) {
      const std::size_t bytes = size(rng);
      if (live_bytes + bytes <= max_live || live.empty()) {
        t.ops.push_back({true, bytes});
        live.push_back(bytes);
        live_bytes += bytes;
        ++made;
        continue;
      }
    }
    const std::size_t index = std::uniform_int_distribution<std::size_t>(0, live.size() - 1)(rng);
    t.ops.push_back({false, index});
    live_bytes -= live[index];
    live[index] = live.back();
    live.pop_back();
  }
  return t;
}
trace repeated_pair(std::size_t bytes, std::size_t count) {
  trace t{"1 MiB pair", {}, count};
  for (std::size_t i = 0; i < count; ++i) {
    t.ops.push_back({true, bytes});
    t.ops.push_back({false, 0});
  }
  return t;
}
std::vector<trace> make_traces() {
  constexpr std::size_t mib = std::size_t{1} << 20;
  std::vector<trace> out;
  out.push_back(repeated_pair(mib, 1000));
  // RMM's RANDOM_ALLOCATIONS_BENCH: 1000 allocations of up to 1 MiB.
  out.push_back(random_trace("random uniform", 1000, std::size_t{1} << 30, 1, [](std::mt19937_64& rng) {
    return std::uniform_int_distribution<std::size_t>(1, mib)(rng);
  }));
  out.push_back(random_trace("random normal", 1000, std::size_t{1} << 30, 2, [](std::mt19937_64& rng) {
    const double x = std::normal_distribution<double>(mib / 2.0, mib / 6.0)(rng);
    return static_cast<std::size_t>(std::clamp(x, 1.0, double(mib)));
  }));
  out.push_back(random_trace("mixed 256 B-64 MiB", 1000, std::size_t{2} << 30, 3, [](std::mt19937_64& rng) {
    const double log2_bytes = std::uniform_real_distribution<double>(8.0, 26.0)(rng);
    return static_cast<std::size_t>(std::exp2(log2_bytes));
  }));
  return out;
}

// Runs `t` once on `s`: ns per allocation (allocate + its free); the stream is drained afterwards, untimed.
template <class A>
double run_trace(A& a, const trace& t, const bench_stream& s, std::vector<std::pair<void*, std::size_t>>& live,
                 bool drain) {
  live.clear();
  const auto start = wall_clock::now();
  for (const op& o : t.ops) {
    if (o.allocate) {
      live.emplace_back(a.allocate(o.value, s), o.value);
    } else {
      const auto [p, bytes] = live[o.value];
      live[o.value] = live.back();
      live.pop_back();
      a.deallocate(p, bytes, s);
    }
  }
  const auto stop = wall_clock::now();
  if (drain) check(cudaStreamSynchronize(s.raw()), "cudaStreamSynchronize");
  return seconds_between(start, stop) * 1e9 / static_cast<double>(t.allocations);
}

std::size_t device_bytes_used() {
  std::size_t free_bytes = 0, total = 0;
  check(cudaMemGetInfo(&free_bytes, &total), "cudaMemGetInfo");
  return total - free_bytes;
}
// Gives back what process-wide caches hold, so that a memory measurement starts from what no allocator caches: the
// default memory pool's unused memory and PyTorch's cache (the timed rows filled it; emptied only after the base was
// read, it would be counted against PyTorch's own trace).
void release_process_caches() {
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
#if defined(CUDAMEM_BENCH_TORCH)
  torch_empty_cache();
#endif
  cudaMemPool_t pool = nullptr;
  check(cudaDeviceGetDefaultMemPool(&pool, 0), "cudaDeviceGetDefaultMemPool");
  check(cudaMemPoolTrimTo(pool, 0), "cudaMemPoolTrimTo");
}

// ---------------------------------------------------------------------------------------------
// Results: one row per (measurement, library).

struct result_row {
  std::string section, measurement, library, unit;
  stats value;
  better direction;
};
std::vector<result_row> results;
std::vector<std::pair<std::string, std::string>> captures;  // (operation | library, verdict)

double spread_of(const stats& s) { return relative_spread(s); }

const result_row* find_row(const std::string& measurement, const std::string& library) {
  for (const auto& r : results)
    if (r.measurement == measurement && r.library == library) return &r;
  return nullptr;
}

// Runs `blocks` rounds; in each, every entry once, starting at a rotating position. Entries return one sample.
void interleave(const std::string& section, const std::string& measurement, const std::string& unit, better direction,
                int warmups, int blocks, const std::vector<std::pair<std::string, std::function<double()>>>& entries) {
  // Whole rounds again, up to most_runs in all, while any entry's spread exceeds repeat_spread; each entry keeps its
  // run with the least spread.
  std::vector<stats> best(entries.size());
  for (int run = 1; run <= most_runs; ++run) {
    std::vector<std::vector<double>> samples(entries.size());
    for (int b = run == 1 ? -warmups : 0; b < blocks; ++b)
      for (std::size_t k = 0; k < entries.size(); ++k) {
        const std::size_t i = (k + static_cast<std::size_t>(b + warmups)) % entries.size();
        const double v = entries[i].second();
        if (b >= 0) samples[i].push_back(v);
      }
    bool calm = true;
    for (std::size_t i = 0; i < entries.size(); ++i) {
      stats now = summarize(std::move(samples[i]));
      if (run == 1 || relative_spread(now) < relative_spread(best[i])) best[i] = now;
      calm = calm && relative_spread(now) <= repeat_spread;
    }
    for (stats& b : best) b.runs = run;
    if (calm) break;
  }
  for (std::size_t i = 0; i < entries.size(); ++i)
    results.push_back({section, measurement, entries[i].first, unit, best[i], direction});
}

// ---------------------------------------------------------------------------------------------
// Allocation section. Every allocator is a factory (for the memory phase, which starts each afresh) and a long-lived
// instance (for the timed phase).

struct allocator_entry {
  std::string name;
  bool peer;  // a library other than cudamem, not the raw runtime
  // A pass of a trace on one stream: ns per pair, the work it queued drained after the clock stopped, else (false) left
  // to the caller.
  std::function<double(const trace&, const bench_stream&, bool drain)> run;
  std::function<std::pair<std::size_t, std::size_t>(const trace&, const bench_stream&)> memory;  // end, peak
};

// Where the caching pool's memory goes on a trace, read by the memory phase: the most bytes the trace itself had live
// (what any allocator must hold), the most the pool had in use (those bytes rounded up to its size classes), and the
// most it reserved (in use plus cached blocks of other classes, which it keeps until trim() or release()).
struct memory_parts_of_trace {
  std::size_t requested_peak = 0, in_use_peak = 0, reserved_peak = 0;
} memory_parts;

template <class A>
allocator_entry entry_for(bool peer) {
  auto instance = std::make_shared<A>();
  allocator_entry e;
  e.name = A::name;
  e.peer = peer;
  e.run = [instance](const trace& t, const bench_stream& s, bool drain) {
    thread_local std::vector<std::pair<void*, std::size_t>> live;  // each thread its own list of live blocks
    live.reserve(4096);
    return run_trace(*instance, t, s, live, drain);
  };
  e.memory = [](const trace& t, const bench_stream& s) {
    release_process_caches();
    const std::size_t base = device_bytes_used();
    std::size_t peak = 0, end = 0;
    {
      A fresh;
      std::vector<std::pair<void*, std::size_t>> blocks;
      std::size_t step = 0, live = 0;
      for (const op& o : t.ops) {
        if (o.allocate) {
          blocks.emplace_back(fresh.allocate(o.value, s), o.value);
          live += o.value;
          memory_parts.requested_peak = std::max(memory_parts.requested_peak, live);
          if constexpr (std::is_same_v<A, cudamem_caching_pool>)
            memory_parts.in_use_peak = std::max(memory_parts.in_use_peak, fresh.pool.statistics().bytes_in_use);
          if (++step % 4 == 0) peak = std::max(peak, device_bytes_used());
        } else {
          const auto [p, bytes] = blocks[o.value];
          blocks[o.value] = blocks.back();
          blocks.pop_back();
          live -= bytes;
          fresh.deallocate(p, bytes, s);
        }
      }
      check(cudaStreamSynchronize(s.raw()), "cudaStreamSynchronize");
      end = device_bytes_used();
      peak = std::max(peak, end);
      if constexpr (std::is_same_v<A, cudamem_caching_pool>)
        memory_parts.reserved_peak = fresh.pool.statistics().peak_bytes_reserved;
    }
    release_process_caches();
    auto over = [base](std::size_t v) { return v > base ? v - base : 0; };
    return std::pair{over(end), over(peak)};
  };
  return e;
}

std::vector<allocator_entry> allocators() {
  std::vector<allocator_entry> out;
  out.push_back(entry_for<cudamem_caching_pool>(false));
  out.push_back(entry_for<cuda_malloc_async>(false));
  out.push_back(entry_for<cuda_malloc>(false));
  out.push_back(entry_for<cudamem_pool_alone>(false));
  out.push_back(entry_for<cudamem_pool_over_malloc>(false));
#if defined(CUDAMEM_BENCH_RMM)
  out.push_back(entry_for<rmm_pool>(true));
  out.push_back(entry_for<rmm_arena>(true));
  out.push_back(entry_for<rmm_async>(true));
#endif
#if defined(CUDAMEM_BENCH_CCCL)
  out.push_back(entry_for<cccl_pool>(true));
#endif
#if defined(CUDAMEM_BENCH_TORCH)
  out.push_back(entry_for<torch_caching>(true));
#endif
  return out;
}

// One CPU per physical core (each core's first hardware thread, from sysfs), so that 8 threads run on 8 cores and not
// on two hardware threads of one; empty where the topology cannot be read.
std::vector<int> one_cpu_per_core() {
  std::vector<int> out;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    const std::string path = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/thread_siblings_list";
    std::FILE* f = std::fopen(path.c_str(), "r");
    if (f == nullptr) continue;
    int first = -1;
    if (std::fscanf(f, "%d", &first) == 1 && first == cpu) out.push_back(cpu);
    std::fclose(f);
  }
  return out;
}
// The cores for the threaded rows: one CPU per core, leaving out CPU 0 (where the kernel and a virtual machine's
// interrupts work most; the threaded section also runs one thread there, to measure it) and the timing thread's CPU,
// where 8 remain. First called from the timing thread once it is pinned.
const std::vector<int>& worker_cpus() {
  static const std::vector<int> cpus = [] {
    std::vector<int> all = one_cpu_per_core(), quiet;
    const int timing = sched_getcpu();
    for (int cpu : all)
      if (cpu != 0 && cpu != timing) quiet.push_back(cpu);
    return quiet.size() >= 8 ? quiet : all;
  }();
  return cpus;
}
// Worker `i` on a core of its own (round robin over the cores), or on `cpu` where given, else anywhere: the timing
// thread is pinned to one CPU, and its workers must not inherit that.
void pin_worker(int i, int cpu = -1) {
  cpu_set_t set;
  CPU_ZERO(&set);
  const auto& cpus = worker_cpus();
  if (cpu >= 0) CPU_SET(cpu, &set);
  else if (cpus.empty())
    for (int any = 0; any < CPU_SETSIZE; ++any) CPU_SET(any, &set);  // the kernel keeps the CPUs that exist
  else CPU_SET(cpus[static_cast<std::size_t>(i) % cpus.size()], &set);
  (void)sched_setaffinity(0, sizeof set, &set);
}

// Pairs per second of `threads` threads, each running `t` `repeats` times on its own stream, timed from a common
// start (repeated so that starting the threads, about as long as one pass of a fast allocator, is not what is timed) to
// the end of the last. Each thread drains its stream once, after its last pass: the work an allocator queued counts,
// and a synchronization after every pass, a driver call on every thread at once, is not timed with the allocator.
constexpr int trace_repeats = 50;
double throughput(allocator_entry& a, const trace& t, std::vector<bench_stream>& streams, int threads, int repeats,
                  int cpu = -1) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> workers;
  wall_clock::time_point start;
  for (int i = 0; i < threads; ++i)
    workers.emplace_back([&, i] {
      pin_worker(i, cpu);
      check(cudaSetDevice(0), "cudaSetDevice");
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) {}
      const bench_stream& s = streams[std::size_t(i)];
      for (int r = 0; r < repeats; ++r) (void)a.run(t, s, false);
      check(cudaStreamSynchronize(s.raw()), "cudaStreamSynchronize");
    });
  while (ready.load() < threads) {}
  start = wall_clock::now();
  go.store(true, std::memory_order_release);
  for (auto& w : workers) w.join();
  const double seconds = seconds_between(start, wall_clock::now());
  return static_cast<double>(threads) * repeats * static_cast<double>(t.allocations) / seconds;
}

// The two capture-status queries the caching pool makes per allocate + free pair (the allocation's and the free's),
// alone, once per allocation of `t` on `s`: ns per pair. Every peer skips them: none refuses a capturing stream.
constexpr const char* capture_queries_name = "of cudamem's pair: 2 capture queries";
double capture_queries(const trace& t, const bench_stream& s, bool) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const auto start = wall_clock::now();
  for (std::size_t i = 0; i < t.allocations; ++i) {
    check(detail::stream_capture_status(s.raw(), &status), "cuStreamIsCapturing");
    check(detail::stream_capture_status(s.raw(), &status), "cuStreamIsCapturing");
  }
  return seconds_between(start, wall_clock::now()) * 1e9 / static_cast<double>(t.allocations);
}

// The two lock acquisitions the caching pool makes per pair (the allocation's and the free's, each an atomic exchange
// and a store), alone, on a lock of the thread's own: what thread safety costs the pair on this host, and how it
// scales.
constexpr const char* lock_pairs_name = "of cudamem's pair: its 2 lock acquisitions";
double lock_pairs(const trace& t, const bench_stream&, bool) {
  struct alignas(128) own_lock {  // a pair of cache lines of its own: x86's L2 prefetcher fetches lines in pairs
    detail::spin_lock lock;
  };
  thread_local own_lock mine;
  const auto start = wall_clock::now();
  for (std::size_t i = 0; i < 2 * t.allocations; ++i) {
    mine.lock.lock();
    asm volatile("" ::: "memory");
    mine.lock.unlock();
  }
  return seconds_between(start, wall_clock::now()) * 1e9 / static_cast<double>(t.allocations);
}

// The host's own scaling, for the threaded rows: a fixed amount of arithmetic per allocation of `t` (about as long as
// the caching pool's pair), touching no memory and calling no CUDA. What it loses on 8 threads (shared cores, a lower
// clock with more cores busy) no allocator can win back.
constexpr const char* cpu_work_name = "of the host: arithmetic alone (no memory, no CUDA)";
double cpu_work(const trace& t, const bench_stream&, bool) {
  std::uint64_t x = 0x9E3779B97F4A7C15ull;
  const auto start = wall_clock::now();
  for (std::size_t i = 0; i < t.allocations; ++i)
    for (int j = 0; j < 48; ++j) {  // xorshift: three dependent steps
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      asm volatile("" : "+r"(x));
    }
  return seconds_between(start, wall_clock::now()) * 1e9 / static_cast<double>(t.allocations);
}

void allocation_section(const options& opt, std::vector<bench_stream>& streams) {
  auto list = allocators();
  const auto traces = make_traces();
  const int blocks = std::max(15, opt.batches / 7);
  for (const trace& t : traces) {
    std::vector<std::pair<std::string, std::function<double()>>> entries;
    for (auto& a : list)
      if (a.name != std::string("cudaMalloc") || t.name == "1 MiB pair")  // cudaMalloc: one row, it is slow
        entries.emplace_back(a.name, [&a, &t, &streams] { return a.run(t, streams[0], true); });
    if (t.name == "1 MiB pair") {  // where cudamem's pair goes: the two capture checks no peer makes, and its locks
      entries.emplace_back(capture_queries_name, [&t, &streams] { return capture_queries(t, streams[0], true); });
      entries.emplace_back(lock_pairs_name, [&t, &streams] { return lock_pairs(t, streams[0], true); });
    }
    std::printf("alloc: %s, 1 stream\n", t.name.c_str());
    std::fflush(stdout);
    interleave("alloc", t.name + ", 1 stream", "ns/pair", better::lower, 2, blocks, entries);
  }
  // 8 threads, 8 streams: RMM's uniform trace. Beside the allocators, the two capture-status queries cudamem's pool
  // makes per pair, alone on each thread's stream: how far the driver lets them scale.
  const trace& uniform = traces[1];
  allocator_entry queries{capture_queries_name, false, capture_queries, {}};
  allocator_entry locks{lock_pairs_name, false, lock_pairs, {}};
  allocator_entry arithmetic{cpu_work_name, false, cpu_work, {}};
  std::vector<allocator_entry*> scaled;
  for (auto& a : list)  // cudaMalloc is slow; over cudaMalloc, the pool is the default one once warm
    if (a.name != std::string("cudaMalloc") && a.name != std::string(cudamem_pool_over_malloc::name))
      scaled.push_back(&a);
  scaled.push_back(&queries);
  scaled.push_back(&locks);
  scaled.push_back(&arithmetic);
  // Then every other trace on 8 threads, fewer repeats each (the slowest peers take seconds a block).
  struct threaded {
    const trace* t;
    int threads, repeats, cpu = -1;  // cpu: where the one thread runs (-1: on worker_cpus())
  };
  std::vector<threaded> runs{{&uniform, 1, trace_repeats}, {&uniform, 8, trace_repeats}};
  for (const trace& t : traces)
    if (&t != &uniform) runs.push_back({&t, 8, trace_repeats / 5});
  // The one-thread run again on CPU 0, which worker_cpus() leaves out: the measurement of why.
  if (!worker_cpus().empty() && worker_cpus()[0] != 0) runs.push_back({&uniform, 1, trace_repeats, 0});
  for (const threaded& run : runs) {
    std::vector<std::pair<std::string, std::function<double()>>> entries;
    for (allocator_entry* a : scaled)
      entries.emplace_back(a->name, [a, run, &streams] {
        return throughput(*a, *run.t, streams, run.threads, run.repeats, run.cpu) / 1e6;
      });
    const std::string name = run.t->name + ", " + std::to_string(run.threads) + " threads" +
                             (run.cpu >= 0 ? " on CPU " + std::to_string(run.cpu) : "");
    std::printf("alloc: %s\n", name.c_str());
    std::fflush(stdout);
    interleave("alloc", name, "M pairs/s", better::higher, 1, std::max(5, blocks / 3), entries);
  }
  // Memory held: each allocator alone, from a fresh start. The timed instances go first: a cache they kept in the
  // default memory pool would serve part of a fresh allocator's trace there, uncounted.
  list.clear();
  list = allocators();
  for (const trace& t : traces) {
    if (t.name == "1 MiB pair") continue;
    std::vector<result_row> ends, peaks;  // printed measurement by measurement
    const double mib = double(std::size_t{1} << 20);
    auto mib_row = [&](const std::string& library, std::size_t bytes) {
      return result_row{"memory",     t.name + ": peak held", library, "MiB", {bytes / mib, bytes / mib, bytes / mib},
                        better::lower};
    };
    memory_parts = {};
    for (auto& a : list) {
      if (a.name == std::string("cudaMalloc") || a.name == std::string(cudamem_pool_alone::name)) continue;
      const auto [end, peak] = a.memory(t, streams[0]);
      ends.push_back(
          {"memory", t.name + ": held at end", a.name, "MiB", {end / mib, end / mib, end / mib}, better::lower});
      peaks.push_back(mib_row(a.name, peak));
    }
    peaks.push_back(mib_row("the trace's own peak (bytes live)", memory_parts.requested_peak));
    peaks.push_back(mib_row("cudamem: peak in use (size classes)", memory_parts.in_use_peak));
    peaks.push_back(mib_row("cudamem: peak reserved (in use + cached)", memory_parts.reserved_peak));
    results.insert(results.end(), ends.begin(), ends.end());
    results.insert(results.end(), peaks.begin(), peaks.end());
  }
}

// ---------------------------------------------------------------------------------------------
// Buffers: create + destroy of 1 MiB on a stream, ns per buffer.

void buffer_section(const options& opt, std::vector<bench_stream>& streams) {
  constexpr std::size_t bytes = std::size_t{1} << 20;
  constexpr int per_block = 1000;
  const bench_stream& s = streams[0];
  const bench_stream& pooled = streams[1];
  device_pool_resource upstream;
  caching_pool<device_pool_resource> pool(upstream);
  auto registered = take(register_allocator(pooled.ref(), pool), "register_allocator");
  auto timed = [&](const bench_stream& on, auto&& body) {
    const auto start = wall_clock::now();
    for (int i = 0; i < per_block; ++i) body();
    const auto stop = wall_clock::now();
    check(cudaStreamSynchronize(on.raw()), "cudaStreamSynchronize");
    return seconds_between(start, stop) * 1e9 / per_block;
  };
  std::vector<std::pair<std::string, std::function<double()>>> entries;
  entries.emplace_back("cudamem device_buffer (default pool)", [&] {
    return timed(s, [&] { auto b = take(device_buffer<std::byte>::allocate(bytes, s.ref()), "allocate"); });
  });
  entries.emplace_back("cudamem device_buffer (caching_pool registered)", [&] {
    return timed(pooled, [&] { auto b = take(device_buffer<std::byte>::allocate(bytes, pooled.ref()), "allocate"); });
  });
  entries.emplace_back("cudaMallocAsync + cudaFreeAsync", [&] {
    return timed(s, [&] {
      void* p = nullptr;
      check(cudaMallocAsync(&p, bytes, s.raw()), "cudaMallocAsync");
      check(cudaFreeAsync(p, s.raw()), "cudaFreeAsync");
    });
  });
#if defined(CUDAMEM_BENCH_RMM)
  rmm::mr::cuda_async_memory_resource rmm_async_mr{std::nullopt, std::numeric_limits<std::size_t>::max()};
  rmm::mr::cuda_memory_resource rmm_cuda_mr;
  rmm::mr::pool_memory_resource rmm_pool_mr{rmm_cuda_mr, 0};
  entries.emplace_back("RMM device_buffer (cuda_async)", [&] {
    return timed(s, [&] { rmm::device_buffer b(bytes, cuda::stream_ref{s.raw()}, rmm_async_mr); });
  });
  entries.emplace_back("RMM device_buffer (pool)", [&] {
    return timed(s, [&] { rmm::device_buffer b(bytes, cuda::stream_ref{s.raw()}, rmm_pool_mr); });
  });
#endif
#if defined(CUDAMEM_BENCH_CCCL)
  entries.emplace_back("CCCL cuda::buffer (default pool)", [&] {
    return timed(s, [&] {
      cuda::buffer<std::byte, cuda::mr::device_accessible> b(
          cuda::stream_ref{s.raw()}, cuda::device_default_memory_pool(cuda::devices[0]), bytes, cuda::no_init);
    });
  });
#endif
  entries.emplace_back("thrust::device_vector (value-initialised)",
                       [&] { return timed(s, [&] { thrust::device_vector<unsigned char> v(bytes); }); });
  // Thrust's own pool (cudaMalloc memory kept in a free list) under the same device_vector: what a Thrust user writes
  // to take the allocation out of the loop. The vector still value-initialises its bytes, on the default stream.
  using thrust_pool = thrust::mr::disjoint_unsynchronized_pool_resource<thrust::device_memory_resource,
                                                                        thrust::mr::new_delete_resource>;
  thrust_pool pooled_thrust(thrust::mr::get_global_resource<thrust::device_memory_resource>(),
                            thrust::mr::get_global_resource<thrust::mr::new_delete_resource>());
  using thrust_pooled_allocator = thrust::mr::allocator<unsigned char, thrust_pool>;
  entries.emplace_back("thrust::device_vector (value-initialised, Thrust's pool)", [&] {
    return timed(s, [&] {
      thrust::device_vector<unsigned char, thrust_pooled_allocator> v(bytes, thrust_pooled_allocator(&pooled_thrust));
    });
  });
  interleave("buffer", "1 MiB create + destroy", "ns/buffer", better::lower, 2, std::max(15, opt.batches / 7), entries);
}

// ---------------------------------------------------------------------------------------------
// Copies and fills: host cost at 4 bytes, bandwidth at opt.bytes, and graph capture.

struct transfer_method {
  std::string name;
  std::function<void(cudaStream_t, std::byte*, const std::byte*, std::size_t)> run;  // fill: src unused
  // Copies into a new buffer only: allocates bytes from the resource `run` draws on and frees them again, returning
  // their address. The capture check asks with it whether the resource hands the captured graph's memory to the next
  // caller once the capture has ended.
  std::function<void*(cudaStream_t, std::size_t)> probe = {};
};

// Copies into a new buffer (RMM's device_buffer copy: allocate, copy, free when the buffer goes), the same work in
// every row. run(stream, d, src, n) allocates n bytes, copies src into them, copies them on into d when d is not null
// (the capture check reads d back) and frees them; the block's address is left in fresh_block.
void* fresh_block = nullptr;
constexpr const char* fresh_raw_name = "cudaMallocAsync + cudaMemcpyAsync + cudaFreeAsync";
constexpr const char* fresh_cudamem_name = "cudamem device_buffer + copy (caching_pool)";

// Runs `body` with failures thrown rather than ending the program; false, and what went wrong in `verdict`, when it
// failed: a library's error or exception inside a capture is that library's verdict.
template <class F>
bool attempt(std::string& verdict, F&& body) {
  struct throwing {
    throwing() { fail_throws = true; }
    ~throwing() { fail_throws = false; }
  } scope;
  try {
    body();
    return true;
  } catch (const bench_failure& e) {
    verdict = std::string("returned an error: ") + e.what();
  } catch (const std::exception& e) {
    verdict = std::string("threw: ") + e.what();
  } catch (...) {
    verdict = "threw something other than a std::exception";
  }
  return false;
}

void copy_section(const options& opt, std::vector<bench_stream>& streams) {
  const bench_stream& s = streams[0];
  const std::size_t bytes = opt.bytes;
  auto dst = take(device_buffer<std::byte>::allocate(bytes), "allocate");
  auto src = take(device_buffer<std::byte>::allocate(bytes), "allocate");
  {
    auto host = take(pinned_buffer<std::byte>::allocate(bytes), "allocate");
    write_pattern(host.view().data().get(), bytes, 7);
    check(copy(src, host), "copy");
  }
  // Every method takes raw pointers; cudamem's side builds its typed views from them, as a user's code would hold.
  auto view = [](std::byte* p, std::size_t n) {
    return device_span<std::byte>(device_ptr<std::byte>(p, device_id(0)), n);
  };
  auto cview = [](const std::byte* p, std::size_t n) {
    return device_span<const std::byte>(device_ptr<const std::byte>(p, device_id(0)), n);
  };
  const stream_ref sref = s.ref();
  std::vector<transfer_method> copies, fills;
  copies.push_back({"cudaMemcpyAsync", [](cudaStream_t st, std::byte* d, const std::byte* x, std::size_t n) {
                      check(cudaMemcpyAsync(d, x, n, cudaMemcpyDeviceToDevice, st), "cudaMemcpyAsync");
                    }});
  copies.push_back({"cudamem copy", [&](cudaStream_t, std::byte* d, const std::byte* x, std::size_t n) {
                      check(copy(view(d, n), cview(x, n), sref), "copy");
                    }});
#if defined(CUDAMEM_BENCH_CCCL)
  copies.push_back({"CCCL cuda::copy_bytes", [](cudaStream_t st, std::byte* d, const std::byte* x, std::size_t n) {
                      cuda::copy_bytes(cuda::stream_ref{st}, cuda::std::span<const std::byte>(x, n),
                                       cuda::std::span<std::byte>(d, n));
                    }});
#endif
  copies.push_back({"thrust::copy (par_nosync)", [](cudaStream_t st, std::byte* d, const std::byte* x, std::size_t n) {
                      auto in = thrust::device_pointer_cast(reinterpret_cast<const unsigned char*>(x));
                      thrust::copy(thrust::cuda::par_nosync.on(st), in, in + n,
                                   thrust::device_pointer_cast(reinterpret_cast<unsigned char*>(d)));
                    }});
  fills.push_back({"cudaMemsetAsync", [](cudaStream_t st, std::byte* d, const std::byte*, std::size_t n) {
                     check(cudaMemsetAsync(d, 0x5a, n, st), "cudaMemsetAsync");
                   }});
  fills.push_back({"cudamem fill_bytes", [&](cudaStream_t, std::byte* d, const std::byte*, std::size_t n) {
                     check(fill_bytes(view(d, n), 0x5a, sref), "fill_bytes");
                   }});
#if defined(CUDAMEM_BENCH_CCCL)
  fills.push_back({"CCCL cuda::fill_bytes", [](cudaStream_t st, std::byte* d, const std::byte*, std::size_t n) {
                     cuda::fill_bytes(cuda::stream_ref{st}, cuda::std::span<std::byte>(d, n), 0x5a);
                   }});
#endif
  fills.push_back({"thrust::fill (par_nosync)", [](cudaStream_t st, std::byte* d, const std::byte*, std::size_t n) {
                     auto out = thrust::device_pointer_cast(reinterpret_cast<unsigned char*>(d));
                     thrust::fill(thrust::cuda::par_nosync.on(st), out, out + n, static_cast<unsigned char>(0x5a));
                   }});

  std::vector<transfer_method> fresh;
  device_pool_resource default_pool;
  caching_pool<device_pool_resource> pool(default_pool);
  fresh.push_back({fresh_raw_name,
                   [](cudaStream_t st, std::byte* d, const std::byte* x, std::size_t n) {
                     void* b = nullptr;
                     check(cudaMallocAsync(&b, n, st), "cudaMallocAsync");
                     fresh_block = b;
                     check(cudaMemcpyAsync(b, x, n, cudaMemcpyDeviceToDevice, st), "cudaMemcpyAsync");
                     if (d != nullptr) check(cudaMemcpyAsync(d, b, n, cudaMemcpyDeviceToDevice, st), "cudaMemcpyAsync");
                     check(cudaFreeAsync(b, st), "cudaFreeAsync");
                   },
                   [](cudaStream_t st, std::size_t n) {
                     void* b = nullptr;
                     check(cudaMallocAsync(&b, n, st), "cudaMallocAsync");
                     check(cudaFreeAsync(b, st), "cudaFreeAsync");
                     return b;
                   }});
  // cudamem's buffer on a resource: the caching pool, and the default memory pool (cudaMallocAsync).
  auto cudamem_fresh = [&](auto& resource) {
    return [&resource, &view, &cview, sref](cudaStream_t, std::byte* d, const std::byte* x, std::size_t n) {
      auto b = take(device_buffer<std::byte>::allocate(n, sref, resource), "device_buffer::allocate");
      fresh_block = b.view().data().get();
      check(copy(b, cview(x, n), sref), "copy");
      if (d != nullptr) check(copy(view(d, n), b, sref), "copy");
    };
  };
  auto cudamem_probe = [&](auto& resource) {
    return [&resource, sref](cudaStream_t, std::size_t n) -> void* {
      auto b = take(device_buffer<std::byte>::allocate(n, sref, resource), "device_buffer::allocate");
      return b.view().data().get();
    };
  };
  fresh.push_back({fresh_cudamem_name, cudamem_fresh(pool), cudamem_probe(pool)});
  fresh.push_back(
      {"cudamem device_buffer + copy (default pool)", cudamem_fresh(default_pool), cudamem_probe(default_pool)});
#if defined(CUDAMEM_BENCH_RMM)
  rmm::mr::cuda_async_memory_resource rmm_async_mr{std::nullopt, std::numeric_limits<std::size_t>::max()};
  rmm::mr::cuda_memory_resource rmm_cuda_mr;
  rmm::mr::pool_memory_resource rmm_pool_mr{rmm_cuda_mr, 0};
  auto rmm_fresh = [](auto& mr) {
    return [&mr](cudaStream_t st, std::byte* d, const std::byte* x, std::size_t n) {
      rmm::device_buffer b(x, n, cuda::stream_ref{st}, mr);
      fresh_block = b.data();
      if (d != nullptr) check(cudaMemcpyAsync(d, b.data(), n, cudaMemcpyDeviceToDevice, st), "cudaMemcpyAsync");
    };
  };
  auto rmm_probe = [](auto& mr) {
    return [&mr](cudaStream_t st, std::size_t n) -> void* {
      rmm::device_buffer b(n, cuda::stream_ref{st}, mr);
      return b.data();
    };
  };
  fresh.push_back({"RMM device_buffer copy (pool)", rmm_fresh(rmm_pool_mr), rmm_probe(rmm_pool_mr)});
  fresh.push_back({"RMM device_buffer copy (cuda_async)", rmm_fresh(rmm_async_mr), rmm_probe(rmm_async_mr)});
#endif
  // What each group's rows are called: "4 B <what>, host cost", "<what> 1 GiB, bandwidth", "capture: <what> 1 MiB".
  auto group_name = [&](const std::vector<transfer_method>* group) {
    return group == &copies ? "copy" : group == &fills ? "fill" : "copy into a new buffer";
  };

  std::byte* const d = dst.view().data().get();
  const std::byte* const x = src.view().data().get();
  // Host cost: a batch of opt.calls 4-byte operations behind a kernel that holds the stream (harness.hpp's method).
  const unsigned long long hold_ns = 1'000'000ull + 20'000ull * static_cast<unsigned long long>(opt.calls);
  for (auto* group : {&copies, &fills, &fresh}) {
    std::vector<std::pair<std::string, std::function<double()>>> entries;
    std::byte* const to = group == &fresh ? nullptr : d;  // a new buffer is the copy's destination
    for (auto& m : *group)
      entries.emplace_back(m.name, [&m, &s, &opt, to, x, hold_ns] {
        hold_stream<<<1, 1, 0, s.raw()>>>(hold_ns);
        check(cudaGetLastError(), "hold_stream");
        const auto start = wall_clock::now();
        for (int i = 0; i < opt.calls; ++i) m.run(s.raw(), to, x, 4);
        const auto stop = wall_clock::now();
        check(cudaStreamSynchronize(s.raw()), "cudaStreamSynchronize");
        return seconds_between(start, stop) * 1e9 / opt.calls;
      });
    if (group == &fills)  // where cudamem's fill goes beside the driver call: its checks and plan, no CUDA call
      entries.emplace_back("of cudamem's fill: its checks alone", [&opt, &view, d] {
        const auto start = wall_clock::now();
        for (int i = 0; i < opt.calls; ++i) {
          detail::plan p;
          const bool planned = static_cast<bool>(detail::plan_fill(p, detail::operand_of(view(d, 4)), 1, 0x5a, "f"));
          asm volatile("" : : "r"(&p), "r"(planned) : "memory");  // the plan is made, not optimised away
        }
        return seconds_between(start, wall_clock::now()) * 1e9 / opt.calls;
      });
    interleave("copy", std::string("4 B ") + group_name(group) + ", host cost", "ns/call", better::lower, opt.warmups,
               std::max(15, opt.batches / 3), entries);
  }
  // Bandwidth, CUDA events around one operation of `bytes`.
  cudaEvent_t start = nullptr, stop = nullptr;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  for (auto* group : {&copies, &fills, &fresh}) {
    std::vector<std::pair<std::string, std::function<double()>>> entries;
    std::byte* const to = group == &fresh ? nullptr : d;
    for (auto& m : *group)
      entries.emplace_back(m.name, [&m, &s, to, x, bytes, start, stop] {
        check(cudaEventRecord(start, s.raw()), "cudaEventRecord");
        m.run(s.raw(), to, x, bytes);
        check(cudaEventRecord(stop, s.raw()), "cudaEventRecord");
        check(cudaEventSynchronize(stop), "cudaEventSynchronize");
        float ms = 0;
        check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
        // A copy reads and writes every byte; report the bytes moved once, as the raw call's figure is usually given.
        return static_cast<double>(bytes) / (ms * 1e-3) / 1e9;
      });
    interleave("copy", std::string(group_name(group)) + " " + size_text(bytes) + ", bandwidth", "GB/s", better::higher,
               opt.warmups, opt.reps, entries);
  }
  check(cudaEventDestroy(start), "cudaEventDestroy");
  check(cudaEventDestroy(stop), "cudaEventDestroy");

  // Graph capture: the operation captured on a created stream, the graph launched twice; the data read back must be
  // what the operation writes. 1 MiB, a pattern for copies, 0x5a for fills. A copy into a new buffer allocates and
  // frees inside the capture; between the capture and the replay the same resource is asked for as many bytes again:
  // a resource that hands out the block the graph writes has given the graph's memory to someone else.
  const std::size_t captured = std::min(bytes, std::size_t{1} << 20);
  std::vector<std::byte> want(captured), got(captured);
  check(cudaMemcpy(want.data(), x, captured, cudaMemcpyDeviceToHost), "cudaMemcpy");
  for (auto* group : {&copies, &fills, &fresh}) {
    const bool is_fill = group == &fills;
    for (auto& m : *group) {
      std::string verdict;
      check(cudaMemset(d, 0, captured), "cudaMemset");
      cudaGraph_t graph = nullptr;
      cudaGraphExec_t exec = nullptr;
      fresh_block = nullptr;
      cudaError_t code = cudaStreamBeginCapture(s.raw(), cudaStreamCaptureModeGlobal);
      bool failed = false;
      if (code == cudaSuccess) {
        failed = !attempt(verdict, [&] { m.run(s.raw(), d, x, captured); });
        code = cudaStreamEndCapture(s.raw(), &graph);
      }
      if (!failed && code != cudaSuccess) verdict = std::string("capture failed: ") + cudaGetErrorName(code);
      // Does the resource give the graph's block (any byte of it) to the next caller? Asked once, for as many bytes on
      // the same stream: a "no" here is what this resource did this time, not a proof.
      bool handed_out = false;
      if (!failed && code == cudaSuccess && m.probe && fresh_block != nullptr)
        failed = !attempt(verdict, [&] {
          const auto* mine = static_cast<const std::byte*>(fresh_block);
          const auto* next = static_cast<const std::byte*>(m.probe(s.raw(), captured));
          handed_out = next < mine + captured && mine < next + captured;
        });
      if (!failed && code == cudaSuccess) {
        code = cudaGraphInstantiate(&exec, graph, 0);
        if (code == cudaSuccess) code = cudaGraphLaunch(exec, s.raw());
        if (code == cudaSuccess) code = cudaGraphLaunch(exec, s.raw());
        if (code == cudaSuccess) code = cudaStreamSynchronize(s.raw());
        if (code != cudaSuccess) {
          verdict = std::string("replay failed: ") + cudaGetErrorName(code);
        } else {
          check(cudaMemcpy(got.data(), d, captured, cudaMemcpyDeviceToHost), "cudaMemcpy");
          bool right = true;
          for (std::size_t i = 0; i < captured && right; ++i) right = got[i] == (is_fill ? std::byte{0x5a} : want[i]);
          verdict = !right       ? "replay wrote wrong data"
                    : handed_out ? "replays the data, but after the capture the resource handed out the graph's block"
                                 : "replays correctly";
        }
      }
      (void)cudaGetLastError();
      if (exec != nullptr) check(cudaGraphExecDestroy(exec), "cudaGraphExecDestroy");
      if (graph != nullptr) check(cudaGraphDestroy(graph), "cudaGraphDestroy");
      const std::string what = group_name(group);
      std::printf("capture: %-26s %-44s %s\n", (what + " 1 MiB").c_str(), m.name.c_str(), verdict.c_str());
      captures.emplace_back(what + " | " + m.name, verdict);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Output

void print_results() {
  std::string measurement;
  for (const auto& r : results) {
    if (r.measurement != measurement) {
      measurement = r.measurement;
      std::printf("\n%s [%s, %s is better]\n", measurement.c_str(), r.unit.c_str(),
                  r.direction == better::lower ? "lower" : "higher");
    }
    // The ratio to cudamem's row of the same measurement (cudamem's first row where it has several).
    const result_row* ours = nullptr;
    for (const auto& o : results)
      if (o.measurement == r.measurement && o.library.rfind("cudamem", 0) == 0) {
        ours = &o;
        break;
      }
    std::printf("  %-48s %12.2f  spread %5.1f%%", r.library.c_str(), r.value.median, 100 * spread_of(r.value));
    if (r.value.runs > 1) std::printf(" (run %d times)", r.value.runs);
    if (ours != nullptr && ours->value.median != 0)
      std::printf("  x%.2f of cudamem", r.value.median / ours->value.median);
    std::printf("\n");
  }
}

// Targets: each compares cudamem with the best peer (peers: RMM, CCCL, PyTorch; not the raw runtime or Thrust).
struct target_line {
  std::string what;
  double value, limit;
  bool higher_is_better;
};
std::vector<target_line> targets;

bool is_peer(const std::string& library) {
  return library.rfind("RMM", 0) == 0 || library.rfind("CCCL", 0) == 0 || library.rfind("PyTorch", 0) == 0;
}
std::optional<double> best_peer(const std::string& measurement, better direction) {
  std::optional<double> best;
  for (const auto& r : results)
    if (r.measurement == measurement && is_peer(r.library))
      best = !best                        ? r.value.median
             : direction == better::lower ? std::min(*best, r.value.median)
                                          : std::max(*best, r.value.median);
  return best;
}
void ratio_target(const std::string& what, const std::string& measurement, const std::string& ours, double limit) {
  const result_row* mine = find_row(measurement, ours);
  const auto peer = best_peer(measurement, better::lower);
  if (mine == nullptr || !peer) return;
  targets.push_back({what + " (cudamem / fastest peer)", mine->value.median / *peer, limit, false});
}

void evaluate_targets() {
  const std::string pool = cudamem_caching_pool::name;
  ratio_target("1 MiB pair", "1 MiB pair, 1 stream", pool, 0.25);
  ratio_target("random uniform, 1 stream", "random uniform, 1 stream", pool, 0.5);
  ratio_target("random normal, 1 stream", "random normal, 1 stream", pool, 0.5);
  // 8 threads: pairs/s, higher is better: the fastest peer's time per pair over cudamem's.
  if (const result_row* mine = find_row("random uniform, 8 threads", pool)) {
    if (const auto peer = best_peer("random uniform, 8 threads", better::higher))
      targets.push_back(
          {"random uniform, 8 threads (fastest peer's time / cudamem's)", *peer / mine->value.median, 0.5, false});
    if (const result_row* one = find_row("random uniform, 1 threads", pool)) {
      const double scaling = mine->value.median / one->value.median;
      targets.push_back({"8 threads over 1 thread, cudamem", scaling, 4.0, true});
      double best_other = 0;
      for (const auto& r : results)
        if (r.measurement == "random uniform, 8 threads" && is_peer(r.library))
          if (const result_row* r1 = find_row("random uniform, 1 threads", r.library))
            best_other = std::max(best_other, r.value.median / r1->value.median);
      if (best_other > 0)
        targets.push_back({"8-thread scaling, cudamem over the best-scaling peer", scaling / best_other, 1.0, true});
    }
  }
  for (const char* t : {"random uniform", "random normal", "mixed 256 B-64 MiB"}) {
    const std::string m = std::string(t) + ": peak held";
    const result_row* mine = find_row(m, pool);
    std::optional<double> least;
    for (const auto& r : results)
      if (r.measurement == m && is_peer(r.library)) least = least ? std::min(*least, r.value.median) : r.value.median;
    if (mine != nullptr && least && *least > 0)
      targets.push_back({m + " (cudamem / least of the peers)", mine->value.median / *least, 1.1, false});
  }
  // Host cost <= 1.03x raw and <= every other library's (cudamem's own variants and context rows aside).
  struct transfer_target {
    const char* measurement;
    const char* ours;
    const char* raw;
  };
  for (const transfer_target& t :
       {transfer_target{"4 B copy, host cost", "cudamem copy", "cudaMemcpyAsync"},
        transfer_target{"4 B fill, host cost", "cudamem fill_bytes", "cudaMemsetAsync"},
        transfer_target{"4 B copy into a new buffer, host cost", fresh_cudamem_name, fresh_raw_name}}) {
    const std::string m = t.measurement;
    const result_row* mine = find_row(m, t.ours);
    const result_row* raw = find_row(m, t.raw);
    if (mine == nullptr || raw == nullptr) continue;
    targets.push_back({m + " (cudamem / raw)", mine->value.median / raw->value.median, 1.03, false});
    for (const auto& r : results)
      if (r.measurement == m && r.library != raw->library && r.library.rfind("of ", 0) != 0 &&
          r.library.rfind("cudamem", 0) != 0)
        targets.push_back({m + " (cudamem / " + r.library + ")", mine->value.median / r.value.median, 1.0, false});
  }
  for (const auto& r : results)
    if (r.measurement.find("bandwidth") != std::string::npos && r.library.rfind("cudamem", 0) == 0) {
      const bool fresh = r.measurement.find("new buffer") != std::string::npos;
      if (fresh && r.library != fresh_cudamem_name) continue;
      const result_row* raw = find_row(r.measurement, fresh                                 ? fresh_raw_name
                                                      : r.measurement.rfind("copy", 0) == 0 ? "cudaMemcpyAsync"
                                                                                            : "cudaMemsetAsync");
      if (raw != nullptr)
        targets.push_back({r.measurement + " (cudamem / raw)", r.value.median / raw->value.median, 0.99, true});
    }
}

void print_targets() {
  int met = 0;
  std::printf("\ntargets\n");
  for (const auto& t : targets) {
    const bool pass = t.higher_is_better ? t.value >= t.limit : t.value <= t.limit;
    met += pass;
    std::printf("  %-80s %7.3f  (target %s %.2f): %s\n", t.what.c_str(), t.value,
                t.higher_is_better ? ">=" : "<=", t.limit, pass ? "PASS" : "FAIL");
  }
  std::printf("%d of %zu targets met\n", met, targets.size());
}

void write_results_json(const char* path, const std::string& device, const std::string& versions) {
  std::FILE* out = std::fopen(path, "w");
  if (out == nullptr) fail(path, std::strerror(errno));
  std::fprintf(out, "{\"device\": %s, \"versions\": %s,\n \"rows\": [\n", json_string(device).c_str(),
               json_string(versions).c_str());
  for (std::size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    std::fprintf(out,
                 "  {\"section\": %s, \"measurement\": %s, \"library\": %s, \"unit\": %s, \"median\": %.6g, "
                 "\"q1\": %.6g, \"q3\": %.6g, \"runs\": %d, \"better\": \"%s\"}%s\n",
                 json_string(r.section).c_str(), json_string(r.measurement).c_str(), json_string(r.library).c_str(),
                 json_string(r.unit).c_str(), r.value.median, r.value.q1, r.value.q3, r.value.runs,
                 r.direction == better::lower ? "lower" : "higher", i + 1 < results.size() ? "," : "");
  }
  std::fprintf(out, " ],\n \"captures\": [\n");
  for (std::size_t i = 0; i < captures.size(); ++i)
    std::fprintf(out, "  {\"operation\": %s, \"verdict\": %s}%s\n", json_string(captures[i].first).c_str(),
                 json_string(captures[i].second).c_str(), i + 1 < captures.size() ? "," : "");
  std::fprintf(out, " ],\n \"targets\": [\n");
  for (std::size_t i = 0; i < targets.size(); ++i) {
    const auto& t = targets[i];
    const bool pass = t.higher_is_better ? t.value >= t.limit : t.value <= t.limit;
    std::fprintf(out, "  {\"target\": %s, \"value\": %.6g, \"limit\": %.6g, \"pass\": %s}%s\n",
                 json_string(t.what).c_str(), t.value, t.limit, pass ? "true" : "false",
                 i + 1 < targets.size() ? "," : "");
  }
  std::fprintf(out, " ]}\n");
  if (std::fclose(out) != 0) fail(path, "write failed");
}

}  // namespace

int main(int argc, char** argv) {
  bench_name = "bench_peers";
  const options opt = parse_options(argc, argv);
  if (visible_devices() == 0) return 77;
  try {
    check(cudaSetDevice(0), "cudaSetDevice");
    check(set_pool_release_threshold(device_id(0)), "set_pool_release_threshold");
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    int driver = 0, runtime = 0;
    check(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
    check(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
    std::string versions = "cudamem " + std::to_string(CUDAMEM_VERSION_MAJOR) + "." +
                           std::to_string(CUDAMEM_VERSION_MINOR) + "." + std::to_string(CUDAMEM_VERSION_PATCH) +
                           "; CUDA runtime " + std::to_string(runtime) + ", driver " + std::to_string(driver) +
                           "; Thrust " + std::to_string(THRUST_VERSION);
#if defined(CUDAMEM_BENCH_RMM)
    versions += "; RMM " CUDAMEM_BENCH_RMM_VERSION;
#else
    std::printf("RMM: not found (bench/README.md: tools/fetch-peers.sh)\n");
#endif
#if defined(CUDAMEM_BENCH_CCCL)
    versions += "; CCCL " + std::to_string(CCCL_MAJOR_VERSION) + "." + std::to_string(CCCL_MINOR_VERSION) + "." +
                std::to_string(CCCL_PATCH_VERSION);
#else
    std::printf("CCCL 3.3 or newer: not found (the toolkit's is older)\n");
#endif
#if defined(CUDAMEM_BENCH_TORCH)
    int devices = 0;
    check(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
    torch_init(devices);
    versions += std::string("; PyTorch ") + torch_version();
#else
    std::printf("PyTorch C++: not found\n");
#endif
    std::printf("bench_peers on %s: %s\n", prop.name, versions.c_str());
    auto streams = make_streams(8);
    pin_to_current_cpu();
    if (worker_cpus().empty()) std::printf("threaded rows: workers unpinned (no CPU topology)\n");
    else {
      std::printf("threaded rows: worker i on CPU");
      for (int cpu : worker_cpus()) std::printf(" %d", cpu);
      std::printf(" (one per physical core)\n");
    }
    allocation_section(opt, streams);
    buffer_section(opt, streams);
    copy_section(opt, streams);
    print_results();
    evaluate_targets();
    print_targets();
    if (opt.json_path != nullptr) {
      write_results_json(opt.json_path, prop.name, versions);
      std::printf("wrote %s\n", opt.json_path);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_peers: a peer threw: %s\n", e.what());
    return 1;
  }
  return 0;
}
