// SPDX-License-Identifier: MIT
// adopting: bring cudamem into code that already has raw CUDA memory and streams, and hand cudamem
// memory back to libraries that take raw pointers (Thrust here; cuBLAS and others the same way).
// docs/adopting.md walks through it.
#include <cudamem/cudamem.hpp>

#include <thrust/device_ptr.h>
#include <thrust/execution_policy.h>
#include <thrust/reduce.h>

#include <cstdio>
#include <vector>

namespace {

__global__ void add_one(cudamem::device_span<float> values) {
  const std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i < values.size()) values[i] += 1.0f;
}

// [wrap]
// Existing code owns a float* from cudaMalloc and a cudaStream_t. cudamem views them without
// taking ownership: the caller still frees them.
cudamem::status process(float* raw_values, std::size_t count, cudaStream_t raw_stream, int device) {
  using namespace cudamem;
  const device_span<float> values = make_span<cudamem::device>(raw_values, count, device_id(device));
  const stream_ref s = stream_ref::from_native_handle(raw_stream, device_id(device));

  auto staging = pinned_buffer<float>::allocate(count);  // page-locked, for stream-ordered copies
  if (!staging) return staging.error();
  for (std::size_t i = 0; i < count; ++i) (*staging)[i] = static_cast<float>(i);
  CUDAMEM_TRY(copy(values, *staging, s));  // checked: extents, direction, device

  add_one<<<(count + 255) / 256, 256, 0, s.get()>>>(values);
  CUDAMEM_TRY(check_launch("add_one"));
  return s.synchronize();
}
// [/wrap]

// [hand-out]
// cudamem memory handed to a library that takes raw pointers: .data().get() is the address, and
// the stream's get() is the cudaStream_t to order the library's work on.
cudamem::result<float> sum_with_thrust(cudamem::device_span<const float> values, cudamem::stream_ref s) {
  const float* first = values.data().get();
  const float total = thrust::reduce(thrust::cuda::par.on(s.get()), thrust::device_pointer_cast(first),
                                     thrust::device_pointer_cast(first + values.size()), 0.0f);
  return total;  // thrust::reduce synchronizes and reports failures by throwing (not cudamem's way)
}
// [/hand-out]

int fail(const char* what, const cudamem::error& e) {
  std::fprintf(stderr, "adopting: %s: %s\n", what, e.message());
  return 1;
}

}  // namespace

int main() {
  if (auto devices = cudamem::device_count(); !devices || *devices == 0) {
    std::fprintf(stderr, "adopting: no CUDA driver or no GPU (%s)\n",
                 devices ? "no device found" : devices.error().message());
    return 1;
  }
  // The "existing code": raw allocations and a raw stream.
  constexpr std::size_t count = 1000;
  int device = 0;
  float* raw_values = nullptr;
  cudaStream_t raw_stream = nullptr;
  if (cudaGetDevice(&device) != cudaSuccess || cudaMalloc(&raw_values, count * sizeof(float)) != cudaSuccess ||
      cudaStreamCreateWithFlags(&raw_stream, cudaStreamNonBlocking) != cudaSuccess) {
    std::fprintf(stderr, "adopting: raw CUDA set-up failed\n");
    return 1;
  }

  int rc = 0;
  if (auto ok = process(raw_values, count, raw_stream, device); !ok) {
    rc = fail("process", ok.error());
  } else {
    const auto values =
        cudamem::make_span<cudamem::device>(static_cast<const float*>(raw_values), count, cudamem::device_id(device));
    auto sum = sum_with_thrust(values, cudamem::stream_ref::from_native_handle(raw_stream, cudamem::device_id(device)));
    const float expected = count * (count - 1) / 2.0f + count;  // sum of i + 1
    if (!sum) {
      rc = fail("sum_with_thrust", sum.error());
    } else if (*sum != expected) {
      std::fprintf(stderr, "adopting: sum %f, expected %f\n", *sum, expected);
      rc = 1;
    } else {
      std::printf("adopting: %zu raw floats processed through cudamem views, Thrust sum %.0f, correct\n", count, *sum);
    }
  }
  cudaStreamDestroy(raw_stream);
  cudaFree(raw_values);
  return rc;
}
