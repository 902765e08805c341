// SPDX-License-Identifier: MIT
// pinned_streaming: process a large array in chunks on two streams, so that the H2D copy of one
// chunk, the kernel of another and the D2H copy of a third overlap. Stream-ordered copies need
// page-locked host memory: pinned_buffer gives it (a std::vector would not compile here).
#include <cudamem/cudamem.hpp>

#include <cstdio>
#include <utility>

__global__ void square(cudamem::device_span<float> values) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < values.size();
       i += std::size_t{gridDim.x} * blockDim.x)
    values[i] = values[i] * values[i];
}

namespace {
int report(const cudamem::error& e) {
  std::fprintf(stderr, "pinned_streaming: %s\n", e.message());
  return 1;
}
}  // namespace

int main() {
  using namespace cudamem;
  constexpr std::size_t total = std::size_t{64} << 20;  // 64 Mi floats, 256 MiB
  constexpr std::size_t chunk = std::size_t{4} << 20;
  constexpr int stream_count = 2;

  if (auto devices = device_count(); !devices || *devices == 0) {
    std::fprintf(stderr, "pinned_streaming: no CUDA driver or no GPU (%s)\n",
                 devices ? "no device found" : devices.error().message());
    return 1;
  }
  auto input = pinned_buffer<float>::allocate(total);
  if (!input) return report(input.error());
  auto output = pinned_buffer<float>::allocate(total);
  if (!output) return report(output.error());
  for (std::size_t i = 0; i < total; ++i) (*input)[i] = static_cast<float>(i % 1000) * 0.5f;

  auto stream0 = stream::create();
  if (!stream0) return report(stream0.error());
  auto stream1 = stream::create();
  if (!stream1) return report(stream1.error());
  stream streams[stream_count] = {std::move(*stream0), std::move(*stream1)};
  // One device scratch chunk per stream, allocated in that stream's order.
  auto scratch0 = device_buffer<float>::allocate(chunk, streams[0]);
  auto scratch1 = device_buffer<float>::allocate(chunk, streams[1]);
  if (!scratch0) return report(scratch0.error());
  if (!scratch1) return report(scratch1.error());
  device_buffer<float>* scratch[stream_count] = {&*scratch0, &*scratch1};

  for (std::size_t offset = 0, k = 0; offset < total; offset += chunk, ++k) {
    const stream& s = streams[k % stream_count];
    device_buffer<float>& work = *scratch[k % stream_count];
    auto in_chunk = input->view().subspan(offset, chunk);
    auto out_chunk = output->view().subspan(offset, chunk);
    if (!in_chunk) return report(in_chunk.error());
    if (!out_chunk) return report(out_chunk.error());
    if (auto ok = copy(work, *in_chunk, s); !ok) return report(ok.error());
    square<<<264, 256, 0, s.get()>>>(work);
    if (auto ok = check_launch("square"); !ok) return report(ok.error());
    if (auto ok = copy(*out_chunk, work, s); !ok) return report(ok.error());
  }
  for (const stream& s : streams)
    if (auto ok = s.synchronize(); !ok) return report(ok.error());

  for (std::size_t i = 0; i < total; ++i) {
    const float x = static_cast<float>(i % 1000) * 0.5f;
    if ((*output)[i] != x * x) {
      std::fprintf(stderr, "pinned_streaming: wrong value at %zu\n", i);
      return 1;
    }
  }
  std::printf("pinned_streaming: squared %zu floats in %zu chunks on %d streams, all correct\n", total, total / chunk,
              stream_count);
  return 0;
}
