// SPDX-License-Identifier: MIT
// Streams, events and devices (docs/streams.md).
#include <cudamem/cudamem.hpp>

#include <vector>

namespace example {
using namespace cudamem;

__global__ void produce(device_span<int> out) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < out.size(); i += gridDim.x * blockDim.x)
    out[i] = static_cast<int>(i);
}

// [order]
status produce_then_consume(device_span<int> data, device_span<int> copy_of_data) {
  auto producer = stream::create();  // non-blocking by default
  if (!producer) return producer.error();
  auto consumer = stream::create(stream_options{.non_blocking = true, .priority = -1});
  if (!consumer) return consumer.error();
  auto produced = event::create(event_options{.timing = false});  // on the current device
  if (!produced) return produced.error();

  produce<<<64, 256, 0, producer->get()>>>(data);
  CUDAMEM_TRY(check_launch("produce"));
  CUDAMEM_TRY(produced->record(*producer));
  CUDAMEM_TRY(consumer->wait(*produced));  // consumer runs after the kernel
  CUDAMEM_TRY(copy(copy_of_data, data, *consumer));
  return consumer->synchronize();
}
// [/order]

// [sync]
status results_to_host(device_span<int> results, std::vector<int>& out) {
  auto s = stream::create();  // non-blocking: the legacy default stream does not wait for it
  if (!s) return s.error();
  produce<<<64, 256, 0, s->get()>>>(results);
  CUDAMEM_TRY(check_launch("produce"));
  // A synchronous copy runs on the legacy default stream, so it would not wait for the kernel on
  // `s`: finish the stream first (or copy on `s` into page-locked memory).
  CUDAMEM_TRY(s->synchronize());
  return copy(span(out), results);
}
// [/sync]

// [capture]
// A stream from elsewhere, captured into a graph. Named with its device, it is never asked for it:
// CUDA cannot say during a capture, and asking would invalidate the capture.
status capture_fill(cudaStream_t raw, device_id device, device_span<float> data, cudaGraph_t& graph) {
  const auto s = stream_ref::from_native_handle(raw, device);
  if (const cudaError_t began = cudaStreamBeginCapture(raw, cudaStreamCaptureModeGlobal); began != cudaSuccess)
    return error(began, "capture_fill", "cudaStreamBeginCapture");
  const status filled = fill(data, 1.0f, s);  // a kernel on the stream's device, captured
  const cudaError_t ended = cudaStreamEndCapture(raw, &graph);
  if (!filled) {
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
    return filled;
  }
  if (ended != cudaSuccess) return error(ended, "capture_fill", "cudaStreamEndCapture");
  return {};
}
// [/capture]

// [timing]
result<float> time_memset(device_span<char> target, stream_ref s) {
  auto start = event::create();
  auto stop = event::create();
  if (!start || !stop) return (!start ? start : stop).error();
  CUDAMEM_TRY(start->record(s));
  CUDAMEM_TRY(fill_bytes(target, 0, s));
  CUDAMEM_TRY(stop->record(s));
  CUDAMEM_TRY(stop->synchronize());
  return event::elapsed_ms(*start, *stop);
}
// [/timing]

// [devices]
status on_every_device() {
  auto count = device_count();
  if (!count) return count.error();
  for (int ordinal = 0; ordinal < *count; ++ordinal) {
    auto guard = device_guard::set(device_id(ordinal));  // restores the previous device at scope end
    if (!guard) return guard.error();
    auto scratch = device_buffer<int>::allocate(1024);  // on `ordinal`
    if (!scratch) return scratch.error();
    CUDAMEM_TRY(fill_bytes(*scratch, 0));
  }
  return {};
}
// [/devices]

bool replay_capture() {
  auto data = device_buffer<float>::allocate(4096);
  cudaStream_t raw = nullptr;
  if (!data || cudaStreamCreateWithFlags(&raw, cudaStreamNonBlocking) != cudaSuccess) return false;
  auto owner = stream::adopt(raw, device_id(0));  // destroys `raw` at the end
  cudaGraph_t graph = nullptr;
  if (!owner || !capture_fill(raw, device_id(0), *data, graph)) return false;
  cudaGraphExec_t exec = nullptr;
  const bool ran = cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess && cudaGraphLaunch(exec, raw) == cudaSuccess &&
                   cudaStreamSynchronize(raw) == cudaSuccess;
  if (exec != nullptr) (void)cudaGraphExecDestroy(exec);
  (void)cudaGraphDestroy(graph);
  std::vector<float> back(4096);
  if (!ran || !copy(span(back), *data)) return false;
  for (float value : back)
    if (value != 1.0f) return false;
  return true;
}
}  // namespace example

int main() {
  using namespace cudamem;
  if (auto count = device_count(); !count || *count == 0) return 77;  // no device: skipped
  if (!set_current_device(device_id(0))) return 1;
  auto a = device_buffer<int>::allocate(4096);
  auto b = device_buffer<int>::allocate(4096);
  auto bytes = device_buffer<char>::allocate(1 << 20);
  if (!a || !b || !bytes) return 1;
  if (!example::produce_then_consume(*a, *b)) return 1;
  std::vector<int> out(4096);
  if (!example::results_to_host(*a, out) || out[4095] != 4095) return 1;
  if (!example::replay_capture()) return 1;
  if (!example::on_every_device()) return 1;
  auto ms = example::time_memset(*bytes, stream_ref::legacy());
  return ms && *ms >= 0.0f ? 0 : 1;
}
