// SPDX-License-Identifier: MIT
// A shared library that hands cudamem device memory to Python as DLPack tensors and reads tensors Python hands back,
// for tests/interop/cupy_dlpack.py (loaded there with ctypes). Every function returns 0 on success, or 1 with the
// library's message in cudamem_test_last_error(). Exported buffers come from a resource that counts its frees, so
// the script can see the tensor's deleter free each one exactly once.
#include <cudamem/cudamem.hpp>
#include <cudamem/interop/dlpack.hpp>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <utility>
#include <vector>

using namespace cudamem;

namespace {
char last_error[error::max_message + 1] = "";

int fail(const error& failure) {
  std::snprintf(last_error, sizeof last_error, "%s", failure.message());
  return 1;
}

struct counting_device_resource {
  using kind = device;
  std::atomic<int> frees{0};
  result<void*> allocate(stream_ref s, std::size_t bytes, std::size_t alignment) noexcept {
    return inner.allocate(s, bytes, alignment);
  }
  void deallocate(stream_ref s, void* p, std::size_t bytes, std::size_t alignment) noexcept {
    inner.deallocate(s, p, bytes, alignment);
    ++frees;
  }
  device_malloc_resource inner;
};
counting_device_resource counted;
}  // namespace

extern "C" {

/// The message of the last failure.
__attribute__((visibility("default"))) const char* cudamem_test_last_error() { return last_error; }

/// How many exported buffers their tensors' deleters have freed so far.
__attribute__((visibility("default"))) int cudamem_test_freed() { return counted.frees.load(); }

/// `count` floats on the current device, element i holding i * 0.5 - 3, handed over as a tensor the caller owns.
__attribute__((visibility("default"))) int cudamem_test_export_floats(std::int64_t count, DLManagedTensor** out) {
  std::vector<float> values(static_cast<std::size_t>(count));
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.5f - 3.0f;
  auto owner = device_buffer<float>::allocate(values.size(), stream_ref::legacy(), counted);
  if (!owner) return fail(owner.error());
  if (auto copied = copy(*owner, span(values)); !copied) return fail(copied.error());
  auto tensor = to_dlpack(std::move(*owner));
  if (!tensor) return fail(tensor.error());
  *out = tensor->release();
  return 0;
}

/// `height` pitched rows of `width` int32 on the current device, element (r, c) holding r * 1000 + c, handed over as
/// a tensor the caller owns (its row stride is the pitch in elements).
__attribute__((visibility("default"))) int cudamem_test_export_rows(std::int64_t width, std::int64_t height,
                                                                    DLManagedTensor** out) {
  const auto w = static_cast<std::size_t>(width), h = static_cast<std::size_t>(height);
  std::vector<std::int32_t> values(w * h);
  for (std::size_t r = 0; r < h; ++r)
    for (std::size_t c = 0; c < w; ++c) values[r * w + c] = static_cast<std::int32_t>(r * 1000 + c);
  auto owner = device_pitched_buffer<std::int32_t>::allocate(w, h, stream_ref::legacy(), counted);
  if (!owner) return fail(owner.error());
  if (auto copied = copy(*owner, span(values)); !copied) return fail(copied.error());
  auto tensor = to_dlpack(std::move(*owner));
  if (!tensor) return fail(tensor.error());
  *out = tensor->release();
  return 0;
}

/// Takes ownership of a 1D float32 CUDA tensor (its deleter is called before returning), views it as a device span
/// and copies its elements into `out` (room for `capacity`); `count` receives their number.
__attribute__((visibility("default"))) int cudamem_test_import_floats(DLManagedTensor* handed, float* out,
                                                                      std::int64_t capacity, std::int64_t* count) {
  const auto tensor = dlpack_tensor::adopt(handed);
  auto view = span_from_dlpack<const float, device>(tensor.get());
  if (!view) return fail(view.error());
  *count = static_cast<std::int64_t>(view->size());
  if (auto copied = host_span<float>(host_ptr<float>(out), static_cast<std::size_t>(capacity))
                        .first(view->size())
                        .and_then([&](host_span<float> into) { return copy(into, *view); });
      !copied)
    return fail(copied.error());
  return 0;
}

/// Takes ownership of a 2D int32 CUDA tensor, views it as pitched device rows and copies them into `out` row after
/// row (room for `capacity`); `shape` receives {width, height, pitch in bytes}.
__attribute__((visibility("default"))) int cudamem_test_import_rows(DLManagedTensor* handed, std::int32_t* out,
                                                                    std::int64_t capacity, std::int64_t* shape) {
  const auto tensor = dlpack_tensor::adopt(handed);
  auto rows = pitched_from_dlpack<const std::int32_t, device>(tensor.get());
  if (!rows) return fail(rows.error());
  shape[0] = static_cast<std::int64_t>(rows->width());
  shape[1] = static_cast<std::int64_t>(rows->height());
  shape[2] = static_cast<std::int64_t>(rows->pitch_bytes());
  if (auto copied = host_span<std::int32_t>(host_ptr<std::int32_t>(out), static_cast<std::size_t>(capacity))
                        .first(rows->size())
                        .and_then([&](host_span<std::int32_t> into) { return copy(into, *rows); });
      !copied)
    return fail(copied.error());
  return 0;
}

}  // extern "C"
