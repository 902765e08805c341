// Streams, events and devices (docs/streams.md).
#include <cudamem/cudamem.hpp>

#include <cstdio>

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
  auto produced = event::create(event_options{.timing = false});
  if (!produced) return produced.error();

  produce<<<64, 256, 0, producer->get()>>>(data);
  CUDAMEM_TRY(check_launch("produce"));             // no kernel image, bad configuration, ...
  CUDAMEM_TRY(produced->record(*producer));
  CUDAMEM_TRY(consumer->wait(*produced));          // consumer runs after the kernel
  CUDAMEM_TRY(copy(copy_of_data, data, *consumer));
  return consumer->synchronize();
}
// [/order]

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
    auto scratch = device_buffer<int>::allocate(1024);   // on `ordinal`
    if (!scratch) return scratch.error();
    CUDAMEM_TRY(scratch->memset(0));
  }
  return {};
}
// [/devices]
}  // namespace example

int main() {
  using namespace cudamem;
  if (auto count = device_count(); !count || *count == 0) return 77;  // no device: skipped
  auto a = device_buffer<int>::allocate(4096);
  auto b = device_buffer<int>::allocate(4096);
  auto bytes = device_buffer<char>::allocate(1 << 20);
  if (!a || !b || !bytes) return 1;
  if (!example::produce_then_consume(*a, *b)) return 1;
  if (!example::on_every_device()) return 1;
  auto ms = example::time_memset(*bytes, stream_ref::legacy());
  return ms && *ms >= 0.0f ? 0 : 1;
}
