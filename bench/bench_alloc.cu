// SPDX-License-Identifier: MIT
// bench_alloc: allocation from a caching pool registered on the stream against the raw stream-ordered calls, in the
// same run. Prints a table (and JSON with --json FILE); ratio = cudamem / raw:
//   1 MiB pair      one allocate + free of 1 MiB through device_buffer::allocate(n, s) (the registry lookup
//                   included) vs cudaMallocAsync + cudaFreeAsync, ns per pair (lower is better; target <= 0.1)
//   statistics on   the 1 MiB pair on the same stream with a statistics_resource over the same pool registered (a
//                   ledger counting per device, stream and source) vs the pool registered, ns per pair (lower is
//                   better; target <= 1.05); then both called directly, no registry or buffer (context, no target)
//   mixed trace     256 B to 64 MiB, log-uniform, over 4 streams with 16 blocks live, ns per pair (lower is better;
//                   target <= 0.25)
//   registry lookup allocator_for(s) on a registered stream against a budget of 20 ns (the raw column is the
//                   budget; lower is better; target <= 1)
//   8 threads       pairs per second, 8 threads with their own streams (one pool) vs 1 thread (higher is better;
//                   target >= 4)
//   thrust::sort    10^7 ints on one stream, temporaries from the registered pool vs Thrust's own allocation, ms per
//                   sort (lower is better; target <= 1)
// The raw side draws from the device's default memory pool with its release threshold raised, its best case.
// Exits 77 when there is no CUDA device.

#include "harness.hpp"

#include <cudamem/interop/thrust.hpp>
#include <cudamem/statistics.hpp>

#include <thrust/sort.h>

#include <atomic>
#include <cmath>
#include <thread>

namespace {
using namespace cudamem;
using pool_type = caching_pool<device_pool_resource>;

// Time per pair: `calls` pairs timed on the host, the streams drained after each batch.
template <class RawPair, class LibPair>
row pair_cost(std::string name, const options& opt, std::optional<double> target,
              const std::vector<stream_ref>& streams, RawPair raw_pair, LibPair lib_pair) {
  auto batch = [&](auto& pair) {
    const auto start = wall_clock::now();
    for (int i = 0; i < opt.calls; ++i) pair(i);
    const auto stop = wall_clock::now();
    for (stream_ref s : streams) check(s.synchronize(), "stream::synchronize");
    return seconds_between(start, stop) * 1e9 / opt.calls;
  };
  auto [raw, lib] =
      interleaved(opt.warmups, opt.batches, [&] { return batch(raw_pair); }, [&] { return batch(lib_pair); });
  return {std::move(name), "ns/pair", raw, lib, better::lower, target};
}

void one_size_row(std::vector<row>& rows, const options& opt, stream_ref s) {
  constexpr std::size_t bytes = std::size_t{1} << 20;
  rows.push_back(pair_cost(
      "alloc+free 1 MiB, registered pool", opt, 0.1, {s},
      [&](int) {
        void* p = nullptr;
        check(cudaMallocAsync(&p, bytes, s.get()), "cudaMallocAsync");
        check(cudaFreeAsync(p, s.get()), "cudaFreeAsync");
      },
      [&](int) { (void)take(device_buffer<std::byte>::allocate(bytes, s), "device_buffer::allocate"); }));
}

// The same pair on the same stream with statistics off (the pool registered) and on (a ledger's adaptor over the pool
// registered in its place before each of its batches): the same registry slot, the same per-stream state of the pool.
// Then the same two resources called directly, the adaptor's own cost with no registry and no buffer (context).
void statistics_rows(std::vector<row>& rows, const options& opt, stream_ref s, registration& registered,
                     pool_type& pool, statistics_resource<pool_type>& counted) {
  constexpr std::size_t bytes = std::size_t{1} << 20;
  auto batch = [&](resource_ref<device> r) {
    registered.reset();
    registered = take(register_allocator(s, r), "register_allocator");
    const auto start = wall_clock::now();
    for (int i = 0; i < opt.calls; ++i)
      (void)take(device_buffer<std::byte>::allocate(bytes, s), "device_buffer::allocate");
    const auto stop = wall_clock::now();
    check(s.synchronize(), "stream::synchronize");
    registered.reset();
    registered = take(register_allocator(s, pool), "register_allocator");
    return seconds_between(start, stop) * 1e9 / opt.calls;
  };
  auto [off, on] = interleaved(opt.warmups, opt.batches, [&] { return batch(pool); }, [&] { return batch(counted); });
  rows.push_back({"alloc+free 1 MiB, statistics on vs off", "ns/pair", off, on, better::lower, 1.05});
  rows.push_back(pair_cost(
      "direct calls, statistics on vs off", opt, std::nullopt, {s},
      [&](int) {
        void* p = take(pool.allocate(s, bytes, 256), "caching_pool::allocate");
        pool.deallocate(s, p, bytes, 256);
      },
      [&](int) {
        void* p = take(counted.allocate(s, bytes, 256), "statistics_resource::allocate");
        counted.deallocate(s, p, bytes, 256);
      }));
}

void mixed_trace_row(std::vector<row>& rows, const options& opt, const std::vector<stream_ref>& streams) {
  constexpr std::size_t live = 16;
  std::vector<std::size_t> sizes(4096);
  std::uint64_t state = 7;
  for (std::size_t& size : sizes) {  // log-uniform from 2^8 to 2^26 bytes
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    size = static_cast<std::size_t>(std::exp2(8.0 + 18.0 * static_cast<double>(state >> 11) / 9007199254740992.0));
  }
  struct raw_block {
    void* p = nullptr;
    cudaStream_t s = nullptr;
  };
  std::vector<raw_block> raw_ring(live);
  std::vector<device_buffer<std::byte>> lib_ring(live);
  rows.push_back(pair_cost(
      "alloc+free mixed 256 B-64 MiB, 4 streams", opt, 0.25, streams,
      [&](int i) {
        raw_block& slot = raw_ring[static_cast<std::size_t>(i) % live];
        if (slot.p != nullptr) check(cudaFreeAsync(slot.p, slot.s), "cudaFreeAsync");
        slot.s = streams[static_cast<std::size_t>(i) % streams.size()].get();
        check(cudaMallocAsync(&slot.p, sizes[static_cast<std::size_t>(i) % sizes.size()], slot.s), "cudaMallocAsync");
      },
      [&](int i) {
        lib_ring[static_cast<std::size_t>(i) % live] =
            take(device_buffer<std::byte>::allocate(sizes[static_cast<std::size_t>(i) % sizes.size()],
                                                    streams[static_cast<std::size_t>(i) % streams.size()]),
                 "device_buffer::allocate");
      }));
  for (raw_block& slot : raw_ring)
    if (slot.p != nullptr) check(cudaFreeAsync(slot.p, slot.s), "cudaFreeAsync");
  lib_ring.clear();
}

void lookup_row(std::vector<row>& rows, const options& opt, stream_ref s) {
  constexpr int calls = 1'000'000;
  std::vector<double> samples;
  std::atomic<std::uintptr_t> sink{0};
  for (int b = 0; b < opt.batches; ++b) {
    const auto start = wall_clock::now();
    for (int i = 0; i < calls; ++i) {
      const resource_ref<device> r = allocator_for(s);
      std::uintptr_t word = 0;
      std::memcpy(&word, &r, sizeof word);
      sink.fetch_xor(word, std::memory_order_relaxed);
    }
    samples.push_back(seconds_between(start, wall_clock::now()) * 1e9 / calls);
  }
  const stats budget{20.0, 20.0, 20.0};
  rows.push_back({"registry lookup vs 20 ns budget", "ns/lookup", budget, summarize(samples), better::lower, 1.0});
}

// Pairs per second over all threads: each thread has its own stream and registration on the shared pool.
double throughput(pool_type& pool, int threads, int pairs) {
  std::vector<std::thread> workers;
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<double> seconds(static_cast<std::size_t>(threads));
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      const auto s = take(stream::create(), "stream::create");
      const auto registered = take(register_allocator(s, pool), "register_allocator");
      (void)take(device_buffer<std::byte>::allocate(std::size_t{1} << 20, s), "warm-up");
      ++ready;
      while (!go.load()) {}
      const auto start = wall_clock::now();
      for (int i = 0; i < pairs; ++i)
        (void)take(device_buffer<std::byte>::allocate(std::size_t{1} << 20, s), "device_buffer::allocate");
      seconds[static_cast<std::size_t>(t)] = seconds_between(start, wall_clock::now());
      check(s.synchronize(), "stream::synchronize");
    });
  }
  while (ready.load() < threads) {}
  go = true;
  for (auto& w : workers) w.join();
  return threads * pairs / *std::max_element(seconds.begin(), seconds.end());
}

void threads_row(std::vector<row>& rows, const options& opt, pool_type& pool) {
  const int pairs = opt.calls * 200;  // about 20 ms per thread: long enough that thread start-up skew does not count
  auto [one, eight] = interleaved(
      opt.warmups, std::max(3, opt.reps / 3), [&] { return throughput(pool, 1, pairs) / 1e6; },
      [&] { return throughput(pool, 8, pairs) / 1e6; });
  rows.push_back({"8 threads vs 1, own streams", "Mpairs/s", one, eight, better::higher, 4.0});
}

void thrust_row(std::vector<row>& rows, const options& opt, stream_ref s) {
  constexpr std::size_t count = 10'000'000;
  auto source = take(device_buffer<int>::allocate(count), "device_buffer::allocate");
  auto work = take(device_buffer<int>::allocate(count), "device_buffer::allocate");
  {
    auto host = take(pinned_buffer<int>::allocate(count), "pinned_buffer::allocate");
    write_pattern(reinterpret_cast<std::byte*>(host.data().get()), count * sizeof(int), 3);
    check(copy(source, host), "copy");
  }
  auto trial = [&](auto&& sort) {
    check(copy(work, source, s), "copy");
    check(s.synchronize(), "stream::synchronize");
    const auto start = wall_clock::now();
    sort();
    check(s.synchronize(), "stream::synchronize");
    return seconds_between(start, wall_clock::now()) * 1e3;
  };
  auto [raw, lib] = interleaved(
      opt.warmups, opt.reps,
      [&] {
        return trial(
            [&] { thrust::sort(thrust::cuda::par.on(s.get()), thrust_begin(work.view()), thrust_end(work.view())); });
      },
      [&] {
        return trial([&] { thrust::sort(thrust_policy(s), thrust_begin(work.view()), thrust_end(work.view())); });
      });
  rows.push_back({"thrust::sort 1e7 int, pooled temporaries", "ms/sort", raw, lib, better::lower, 1.0});
}
}  // namespace

int main(int argc, char** argv) {
  bench_name = "bench_alloc";
  const options opt = parse_options(argc, argv);
  int devices = 0;
  if (const cudaError_t code = cudaGetDeviceCount(&devices); code != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "no CUDA device (%s)\n",
                 code != cudaSuccess ? cudaGetErrorString(code) : "cudaGetDeviceCount returned 0");
    return 77;
  }
  const device_id here = take(current_device(), "current_device");
  cudaDeviceProp properties{};
  check(cudaGetDeviceProperties(&properties, here.get()), "cudaGetDeviceProperties");
  std::printf("bench_alloc: device %d: %s; %d batches of %d calls per side, %d warm-ups\n", here.get(), properties.name,
              opt.batches, opt.calls, opt.warmups);
  std::printf("values are medians; ratio = cudamem / raw; spread = half the interquartile range\n\n");
  check(set_pool_release_threshold(here), "set_pool_release_threshold");

  device_pool_resource upstream;
  pool_type pool(upstream);
  std::vector<stream> owned;
  std::vector<stream_ref> streams;
  std::vector<registration> registrations;
  for (int i = 0; i < 4; ++i) {
    owned.push_back(take(stream::create(), "stream::create"));
    streams.push_back(owned.back());
    registrations.push_back(take(register_allocator(owned.back(), pool), "register_allocator"));
  }
  ledger book;
  statistics_resource<pool_type> counted(pool, book, "bench");
  std::vector<row> rows;
  one_size_row(rows, opt, streams[0]);
  statistics_rows(rows, opt, streams[0], registrations[0], pool, counted);
  mixed_trace_row(rows, opt, streams);
  lookup_row(rows, opt, streams[0]);
  threads_row(rows, opt, pool);
  thrust_row(rows, opt, streams[0]);
  for (stream_ref s : streams) check(s.synchronize(), "stream::synchronize");
  if (!book.balanced()) std::fprintf(stderr, "bench_alloc: the ledger does not balance\n");
  const caching_statistics st = pool.statistics();
  std::printf("pool: %zu upstream allocations, %zu reuses (%zu across streams), %zu out-of-memory retries\n\n",
              st.upstream_allocations, st.reused, st.reused_across_streams, st.out_of_memory_retries);

  print_table(rows);
  std::printf("\n");
  print_summary(rows);
  if (opt.json_path != nullptr) {
    write_json(opt.json_path, rows, properties.name);
    std::printf("wrote %s\n", opt.json_path);
  }
  return 0;
}
