// SPDX-License-Identifier: MIT
// Errors and results (docs/errors.md). Plain C++: compiled by g++, linked with cudart.
#include <cudamem/cudamem.hpp>

#include <cstdio>
#include <utility>
#include <vector>

namespace example {
using namespace cudamem;

// [check]
int check_each_call() {
  auto buffer = device_buffer<float>::allocate(1 << 20);
  if (!buffer) {
    // "buffer::allocate: cudaMalloc: cudaErrorMemoryAllocation: out of memory", or no device.
    std::fprintf(stderr, "%s\n", buffer.error().message());
    return 1;
  }
  std::vector<float> host(buffer->size(), 1.0f);
  if (auto ok = copy(*buffer, span(host)); !ok) {
    std::fprintf(stderr, "%s\n", ok.error().message());
    return 1;
  }
  return 0;
}
// [/check]

// [propagate]
status upload(device_span<float> target, const std::vector<float>& values) {
  CUDAMEM_TRY(fill_bytes(target, 0));       // returns the error from upload() if it fails
  auto head = target.first(values.size());  // result<device_span<float>>: bounds-checked
  if (!head) return head.error();
  return copy(*head, span(values));
}

result<device_buffer<char>> zeroed(std::size_t count) {
  return device_buffer<char>::allocate(count).and_then([](device_buffer<char> b) -> result<device_buffer<char>> {
    CUDAMEM_TRY(fill_bytes(b, 0));
    return b;
  });
}
// [/propagate]

// [inspect]
void explain(const error& e) {
  if (e.code() == errc::cuda) {
    std::printf("CUDA said %d in %s%s\n", static_cast<int>(e.cuda_status()), e.call(),
                e.is_sticky() ? " (context lost: restart the process)" : "");
  } else {
    std::printf("cudamem refused it (%s): %s\n", to_string(e.code()), e.message());
  }
}
// [/inspect]

// [compare]
result<device_buffer<float>> scratch(std::size_t count) {
  auto made = device_buffer<float>::allocate(count);
  if (!made && made.error() == cudaErrorMemoryAllocation) made = device_buffer<float>::allocate(count / 2);
  // Name this function in the message instead of buffer::allocate.
  return std::move(made).transform_error([](const error& e) { return e.with_api("scratch"); });
}
// [/compare]

// [handler]
void quiet_releases() {
  // Destructors cannot return errors; a failed cudaFree/cudaStreamDestroy goes to this handler.
  set_release_handler([](const error& e) noexcept { std::fprintf(stderr, "[release] %s\n", e.message()); });
}
// [/handler]
}  // namespace example

int main() {
  example::quiet_releases();
  if (auto devices = cudamem::device_count(); !devices) {
    example::explain(devices.error());
    return 77;  // no device: skipped
  }
  if (example::check_each_call() != 0) return 1;
  auto d = cudamem::device_buffer<float>::allocate(10);
  std::vector<float> values(4, 1.0f);
  if (!d || !example::upload(*d, values)) return 1;
  auto z = example::zeroed(100);
  if (!z || z->size() != 100) return 1;
  auto s = example::scratch(1000);
  return s && s->size() >= 500 ? 0 : 1;
}
