// SPDX-License-Identifier: MIT
// compile_time.sh, "sketch" row: roughly what a user's translation unit would compile if cudamem had a separately
// compiled core. It stands in for <cudamem/cudamem.hpp> when bench/compile_time/sketch comes first on the include path,
// so that cudamem_program.cu compiles unchanged against it. It keeps the real view layer, result<T> and error and the
// kinds, writes small versions of the buffers, copy and fill with only what that program calls (a typed fill's kernel
// template, size and alignment checks), and only declares the core: streams, resources, the caching pool's core,
// allocation, the copy engine, which are defined nowhere; the file is compiled, never linked or run. It is a lower
// bound: the real headers' compile-time checks and the rest of the umbrella are left out. device_id(0) in the
// conversions and stream_ref's unused members are placeholders. It measures a design the library does not have (see
// "Compile time" in docs/performance.md); it is not an API.
#pragma once

#include <cudamem/detail/arith.hpp>
#include <cudamem/error.hpp>
#include <cudamem/kind.hpp>
#include <cudamem/pitched_span.hpp>
#include <cudamem/ptr.hpp>
#include <cudamem/span.hpp>

#include <cuda_runtime.h>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace cudamem {

class stream_ref {
 public:
  stream_ref() noexcept = default;
  [[nodiscard]] static stream_ref from_native_handle(cudaStream_t handle, device_id id) noexcept {
    stream_ref s;
    s.handle_ = handle;
    s.device_ = id.get();
    return s;
  }
  [[nodiscard]] cudaStream_t get() const noexcept { return handle_; }
  [[nodiscard]] status synchronize() const noexcept;

 private:
  cudaStream_t handle_ = cudaStreamLegacy;
  unsigned long long id_ = 0;
  int device_ = -1;
};

class stream {
 public:
  [[nodiscard]] static result<stream> create() noexcept;
  stream(stream&& other) noexcept : ref_(std::exchange(other.ref_, stream_ref{})) {}
  stream& operator=(stream&& other) noexcept;
  ~stream();
  [[nodiscard]] cudaStream_t get() const noexcept { return ref_.get(); }
  operator stream_ref() const noexcept { return ref_; }
  [[nodiscard]] status synchronize() const noexcept { return ref_.synchronize(); }

 private:
  stream() = default;
  stream_ref ref_;
};

namespace detail {
struct resource_table {
  result<void*> (*allocate)(void*, stream_ref, std::size_t, std::size_t) noexcept;
  void (*deallocate)(void*, stream_ref, void*, std::size_t, std::size_t) noexcept;
};
}  // namespace detail

template <class Kind>
class resource_ref {
 public:
  template <class R>
    requires requires(R& r, stream_ref s, void* p) {
      { r.allocate(s, std::size_t{}, std::size_t{}) } -> std::same_as<result<void*>>;
      r.deallocate(s, p, std::size_t{}, std::size_t{});
    }
  resource_ref(R& r) noexcept : object_(&r), table_(&table_for<R>) {}
  [[nodiscard]] result<void*> allocate(stream_ref s, std::size_t bytes, std::size_t alignment) const noexcept {
    return table_->allocate(object_, s, bytes, alignment);
  }
  void deallocate(stream_ref s, void* p, std::size_t bytes, std::size_t alignment) const noexcept {
    table_->deallocate(object_, s, p, bytes, alignment);
  }
  [[nodiscard]] void* object() const noexcept { return object_; }
  [[nodiscard]] const detail::resource_table* table() const noexcept { return table_; }

 private:
  template <class R>
  static constexpr detail::resource_table table_for{
      [](void* o, stream_ref s, std::size_t b, std::size_t a) noexcept {
        return static_cast<R*>(o)->allocate(s, b, a);
      },
      [](void* o, stream_ref s, void* p, std::size_t b, std::size_t a) noexcept {
        static_cast<R*>(o)->deallocate(s, p, b, a);
      }};
  void* object_;
  const detail::resource_table* table_;
};

class device_pool_resource {
 public:
  [[nodiscard]] result<void*> allocate(stream_ref, std::size_t bytes, std::size_t alignment) noexcept;
  void deallocate(stream_ref, void*, std::size_t bytes, std::size_t alignment) noexcept;
};

namespace detail {
class pool_core;
[[nodiscard]] pool_core* make_pool_core(void* upstream, const resource_table*) noexcept;
void destroy_pool_core(pool_core*) noexcept;
[[nodiscard]] result<void*> pool_allocate(pool_core*, stream_ref, std::size_t, std::size_t) noexcept;
void pool_deallocate(pool_core*, stream_ref, void*, std::size_t, std::size_t) noexcept;
[[nodiscard]] resource_ref<device> default_resource(device) noexcept;
[[nodiscard]] resource_ref<pinned> default_resource(pinned) noexcept;
[[nodiscard]] result<void*> allocate_bytes(const char* api, resource_ref<device>, stream_ref, std::size_t bytes,
                                           std::size_t alignment) noexcept;
[[nodiscard]] result<void*> allocate_bytes(const char* api, resource_ref<pinned>, stream_ref, std::size_t bytes,
                                           std::size_t alignment) noexcept;
void free_bytes(resource_ref<device>, stream_ref, void*, std::size_t bytes, std::size_t alignment) noexcept;
void free_bytes(resource_ref<pinned>, stream_ref, void*, std::size_t bytes, std::size_t alignment) noexcept;
[[nodiscard]] result<void*> allocate_pitched(const char* api, stream_ref, std::size_t row_bytes, std::size_t height,
                                             std::size_t& pitch) noexcept;
struct plan {  // the engine's byte-level request, as the real engine takes one
  void* dst;
  const void* src;
  std::size_t dst_pitch, src_pitch, width_bytes, height;
  cudaMemcpyKind direction;
  int value;
  bool fill;
};
[[nodiscard]] status enqueue(const plan&, stream_ref, const char* api) noexcept;
[[nodiscard]] status launch(const void* kernel, void** args, std::size_t elements, stream_ref,
                            const char* api) noexcept;

template <class T>
__global__ void fill_kernel(pitched_span<T, device> view, T value) {
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  const std::size_t count = view.width() * view.height();
  for (std::size_t i = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < count; i += stride)
    view(i / view.width(), i % view.width()) = value;
}
}  // namespace detail

template <class Upstream>
class caching_pool {
 public:
  explicit caching_pool(Upstream& upstream) noexcept
      : core_(detail::make_pool_core(&upstream, resource_ref<device>(upstream).table())) {}
  caching_pool(const caching_pool&) = delete;
  caching_pool& operator=(const caching_pool&) = delete;
  ~caching_pool() { detail::destroy_pool_core(core_); }
  [[nodiscard]] result<void*> allocate(stream_ref s, std::size_t bytes, std::size_t alignment) noexcept {
    return detail::pool_allocate(core_, s, bytes, alignment);
  }
  void deallocate(stream_ref s, void* p, std::size_t bytes, std::size_t alignment) noexcept {
    detail::pool_deallocate(core_, s, p, bytes, alignment);
  }

 private:
  detail::pool_core* core_;
};

template <class T, class Kind>
class buffer {
 public:
  [[nodiscard]] static result<buffer> allocate(std::size_t count, stream_ref s, resource_ref<Kind> r) noexcept {
    auto bytes = detail::bytes_of(count, sizeof(T), "buffer::allocate");
    if (!bytes) return bytes.error();
    auto p = detail::allocate_bytes("buffer::allocate", r, s, *bytes, alignof(T));
    if (!p) return p.error();
    return buffer(static_cast<T*>(*p), count, s, r);
  }
  [[nodiscard]] static result<buffer> allocate(std::size_t count) noexcept {
    return allocate(count, stream_ref{}, detail::default_resource(Kind{}));
  }
  buffer(buffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)),
        count_(other.count_),
        stream_(other.stream_),
        resource_(other.resource_) {}
  ~buffer() {
    if (data_ != nullptr) detail::free_bytes(resource_, stream_, data_, count_ * sizeof(T), alignof(T));
  }
  operator span<T, Kind>() & noexcept { return span<T, Kind>(ptr<T, Kind>(data_, device_id(0)), count_); }
  operator span<const T, Kind>() const& noexcept {
    return span<const T, Kind>(ptr<const T, Kind>(data_, device_id(0)), count_);
  }

 private:
  buffer(T* data, std::size_t count, stream_ref s, resource_ref<Kind> r) noexcept
      : data_(data), count_(count), stream_(s), resource_(r) {}
  T* data_;
  std::size_t count_;
  stream_ref stream_;
  resource_ref<Kind> resource_;
};
template <class T>
using device_buffer = buffer<T, device>;
template <class T>
using pinned_buffer = buffer<T, pinned>;

template <class T, class Kind>
class pitched_buffer {
 public:
  [[nodiscard]] static result<pitched_buffer> allocate(std::size_t width, std::size_t height, stream_ref s) noexcept {
    auto row = detail::bytes_of(width, sizeof(T), "pitched_buffer::allocate");
    if (!row) return row.error();
    std::size_t pitch = 0;
    auto p = detail::allocate_pitched("pitched_buffer::allocate", s, *row, height, pitch);
    if (!p) return p.error();
    if (pitch % alignof(T) != 0)
      return error(errc::invalid_argument, "pitched_buffer::allocate", "pitch %zu is not a multiple of %zu", pitch,
                   alignof(T));
    return pitched_buffer(static_cast<T*>(*p), width, height, pitch, s);
  }
  pitched_buffer(pitched_buffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)),
        width_(other.width_),
        height_(other.height_),
        pitch_(other.pitch_),
        stream_(other.stream_) {}
  ~pitched_buffer() {
    if (data_ != nullptr) detail::free_bytes(detail::default_resource(Kind{}), stream_, data_, pitch_ * height_, 1);
  }
  operator pitched_span<T, Kind>() & noexcept {
    return pitched_span<T, Kind>(ptr<T, Kind>(data_, device_id(0)), width_, height_, pitch_);
  }

 private:
  pitched_buffer(T* data, std::size_t width, std::size_t height, std::size_t pitch, stream_ref s) noexcept
      : data_(data), width_(width), height_(height), pitch_(pitch), stream_(s) {}
  T* data_;
  std::size_t width_, height_, pitch_;
  stream_ref stream_;
};
template <class T>
using device_pitched_buffer = pitched_buffer<T, device>;

template <class T, class Kind>
[[nodiscard]] status fill_bytes(buffer<T, Kind>& target, int value, stream_ref s) noexcept {
  const span<T, Kind> view = target;
  const detail::plan p{view.data().get(), nullptr, 0, 0, view.size() * sizeof(T), 1, cudaMemcpyDefault, value, true};
  return detail::enqueue(p, s, "fill_bytes");
}
template <class T, class Kind>
[[nodiscard]] status fill(pitched_buffer<T, Kind>& target, const T& value, stream_ref s) noexcept {
  pitched_span<T, Kind> view = target;
  if (reinterpret_cast<std::uintptr_t>(view.data().get()) % alignof(T) != 0 || view.pitch_bytes() % alignof(T) != 0)
    return error(errc::invalid_argument, "fill", "the view is not aligned to %zu bytes", alignof(T));
  T copy = value;
  void* args[] = {&view, &copy};
  return detail::launch(reinterpret_cast<const void*>(&detail::fill_kernel<T>), args, view.width() * view.height(), s,
                        "fill");
}
template <class T, class DstKind, class SrcKind>
[[nodiscard]] status copy(buffer<T, DstKind>& dst, const buffer<T, SrcKind>& src, stream_ref s) noexcept {
  const span<T, DstKind> d = dst;
  const span<const T, SrcKind> from = src;
  if (d.size() != from.size())
    return error(errc::invalid_argument, "copy", "the extents differ: %zu and %zu elements", d.size(), from.size());
  const detail::plan p{
      d.data().get(), from.data().get(), 0, 0, d.size() * sizeof(T), 1, copy_direction<DstKind, SrcKind>, 0, false};
  return detail::enqueue(p, s, "copy");
}
[[nodiscard]] status check_launch(const char* what) noexcept;

}  // namespace cudamem
