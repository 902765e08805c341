// SPDX-License-Identifier: MIT
// memory_trace: count a small training-like loop's allocations in a ledger and record them as a Chrome trace /
// Perfetto JSON file (the path on the command line, else memory_trace.json), then print what the ledger saw.
// Draw the trace with: python3 tools/plot_memory.py memory_trace.json memory_trace.png
//
// Two sources report into one ledger: a caching pool registered on the compute and copy streams ("pool"), and the
// stream-ordered pool used directly on a third stream ("direct").
#include <cudamem/cudamem.hpp>
#include <cudamem/statistics.hpp>
#include <cudamem/trace.hpp>

#include <cstdio>
#include <utility>

__global__ void touch(cudamem::device_span<float> values, float value) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < values.size();
       i += std::size_t{gridDim.x} * blockDim.x)
    values[i] = values[i] * 0.5f + value;
}

namespace {
int report(const cudamem::error& e) {
  std::fprintf(stderr, "memory_trace: %s\n", e.message());
  return 1;
}
void print(const char* what, const cudamem::usage& u) {
  std::printf("%-24s in use %10lld B in %4lld blocks, peak %11llu B, %6llu allocations, cached %llu B\n", what,
              static_cast<long long>(u.bytes_in_use), static_cast<long long>(u.blocks_in_use),
              static_cast<unsigned long long>(u.peak_bytes), static_cast<unsigned long long>(u.allocations),
              static_cast<unsigned long long>(u.cached_bytes));
}
}  // namespace

int main(int argc, char** argv) {
  using namespace cudamem;
  const char* path = argc > 1 ? argv[1] : "memory_trace.json";
  if (auto devices = device_count(); !devices || *devices == 0) {
    std::fprintf(stderr, "memory_trace: no CUDA driver or no GPU (%s)\n",
                 devices ? "no device" : devices.error().message());
    return 1;
  }
  device_pool_resource upstream;
  caching_pool<device_pool_resource> pool(upstream);
  ledger book;
  statistics_resource<caching_pool<device_pool_resource>> pooled(pool, book, "pool");
  statistics_resource<device_pool_resource> direct(upstream, book, "direct");
  trace_recorder recorder;
  if (auto opened = recorder.open(path, book); !opened) return report(opened.error());

  auto compute = stream::create(), copies = stream::create(), side = stream::create();
  if (!compute || !copies || !side) return report(!compute ? compute.error() : !copies ? copies.error() : side.error());
  {
    auto on_compute = register_allocator(*compute, pooled), on_copies = register_allocator(*copies, pooled);
    if (!on_compute || !on_copies) return report(!on_compute ? on_compute.error() : on_copies.error());
    constexpr int steps = 12, layers = 8;
    for (int step = 0; step < steps; ++step) {
      // Forward: activations grow layer by layer and live until the backward pass.
      device_buffer<float> activations[layers];
      for (int layer = 0; layer < layers; ++layer) {
        const std::size_t count = (std::size_t{1} << 20) * std::size_t(1 + layer % 4) * std::size_t(1 + step % 3);
        auto made = device_buffer<float>::allocate(count, *compute);
        if (!made) return report(made.error());
        activations[layer] = *std::move(made);
        touch<<<256, 256, 0, compute->get()>>>(activations[layer].view(), float(layer));
        if (auto launched = check_launch("touch"); !launched) return report(launched.error());
      }
      // A staging buffer on the copy stream, and a scratch block from the direct source on the side stream.
      auto staging = device_buffer<float>::allocate(std::size_t{4} << 20, *copies);
      if (!staging) return report(staging.error());
      auto scratch = device_buffer<float>::allocate(std::size_t{2} << 20, *side, resource_ref<device>(direct));
      if (!scratch) return report(scratch.error());
      touch<<<256, 256, 0, side->get()>>>(scratch->view(), 1.0f);
      // Backward: activations go in reverse order.
      for (int layer = layers - 1; layer >= 0; --layer) {
        touch<<<256, 256, 0, compute->get()>>>(activations[layer].view(), -1.0f);
        activations[layer] = device_buffer<float>();
      }
      if (auto done = compute->synchronize(); !done) return report(done.error());
      if (auto done = side->synchronize(); !done) return report(done.error());
    }
  }
  if (auto done = copies->synchronize(); !done) return report(done.error());
  const std::size_t events = recorder.events();
  if (auto closed = recorder.close(); !closed) return report(closed.error());

  print("source pool", pooled.usage());
  print("source direct", direct.usage());
  print("device 0", book.device(device_id(0)));
  book.for_each_stream([](const ledger_row& row) {
    char label[64];
    std::snprintf(label, sizeof label, "  %s, stream %llu", row.source, static_cast<unsigned long long>(row.stream));
    print(label, row.usage);
  });
  std::printf("memory_trace: %zu events written to %s; balanced: %s\n", events, path, book.balanced() ? "yes" : "no");
  return book.balanced() ? 0 : 1;
}
