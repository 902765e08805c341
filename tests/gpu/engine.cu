// SPDX-License-Identifier: MIT
// The transfer engine on real memory: 2D copies and fills in every direction, the typed fill's
// device rule, where buffers are freed, and ordering across two devices.
#include "common.cuh"
#include "engine.hpp"

#include <spawn.h>
#include <sys/wait.h>

extern char** environ;

using namespace cudamem;
using test::take;

namespace test {
/// A minimal pitched view of device memory, as a 2D view type plugs into copies and fills: it
/// names its kind, returns itself from view(), and gives the engine its operand.
template <class T>
struct rows_view {
  using element_type = T;
  using value_type = std::remove_cv_t<T>;
  using kind = device;
  T* first;
  std::size_t width, height, pitch;
  device_id where;
  rows_view view() const noexcept { return *this; }
  friend detail::operand operand_of(rows_view v) noexcept {
    return {v.first, v.width, v.height, v.pitch, v.where, detail::kind_id::device};
  }
};

/// A resource that records where and on which stream its memory was given back.
struct recording_resource {
  using kind = device;
  int freed_on = -1;
  cudaStream_t freed_stream = nullptr;
  result<void*> allocate(stream_ref s, std::size_t bytes, std::size_t alignment) noexcept {
    return device_malloc_resource().allocate(s, bytes, alignment);
  }
  void deallocate(stream_ref s, void* p, std::size_t bytes, std::size_t alignment) noexcept {
    (void)cudaGetDevice(&freed_on);
    freed_stream = s.get();
    device_malloc_resource().deallocate(s, p, bytes, alignment);
  }
};
static_assert(memory_resource_for<recording_resource, device>);

template <class T, class K>
__global__ void delay_then_fill(span<T, K> out, T value, unsigned long long cycles) {
  const unsigned long long start = clock64();
  while (static_cast<unsigned long long>(clock64()) - start < cycles) {}
  for (std::size_t i = threadIdx.x; i < out.size(); i += blockDim.x) out[i] = value;
}
}  // namespace test

TEST_CASE("2D copies move exactly the rows' widths, in every direction", "[copy][2d]") {
  constexpr std::size_t width = 37, height = 9, host_pitch = 50 * sizeof(int);
  auto s = take(stream::create());
  auto dev = take(device_buffer<int>::allocate(64 * height));
  auto pinned_rows = take(pinned_buffer<int>::allocate(50 * height));
  const auto source = test::random_vector<int>(50 * height, test::fresh_seed());
  std::vector<int> back(50 * height, -1);
  const auto op = [](auto* first, std::size_t pitch, detail::kind_id kind, device_id where) {
    return detail::operand{first, width, height, pitch, where, kind};
  };
  const auto host_side = [&](const int* p) { return op(p, host_pitch, detail::kind_id::host, device_id::host()); };
  const auto device_side = op(dev.data().get(), 64 * sizeof(int), detail::kind_id::device, device_id(0));
  REQUIRE_OK(fill_bytes(dev, 0));
  // pageable -> device, device -> pinned (stream-ordered), pinned -> pageable
  REQUIRE_OK(engine::copy_sync(device_side, host_side(source.data()), sizeof(int), cudaMemcpyHostToDevice, "copy"));
  const auto pinned_side = op(pinned_rows.data().get(), host_pitch, detail::kind_id::pinned, device_id::host());
  REQUIRE_OK(engine::copy_async(pinned_side, device_side, sizeof(int), cudaMemcpyDeviceToHost, s, "copy"));
  REQUIRE_OK(s.synchronize());
  REQUIRE_OK(engine::copy_sync(host_side(back.data()), pinned_side, sizeof(int), cudaMemcpyHostToHost, "copy"));
  for (std::size_t row = 0; row < height; ++row)
    for (std::size_t col = 0; col < 50; ++col)
      CHECK(back[row * 50 + col] == (col < width ? source[row * 50 + col] : -1));
  // The device rows' padding was never written.
  const auto device_rows = test::read_back(dev.view());
  CHECK(device_rows[40] == 0);
  CHECK(device_rows[64 + 36] == source[50 + 36]);

  // Device to device on one device, and a 2D memset.
  auto second = take(device_buffer<int>::allocate(40 * height));
  const auto second_side = op(second.data().get(), 40 * sizeof(int), detail::kind_id::device, device_id(0));
  REQUIRE_OK(fill_bytes(second, 0xff));
  REQUIRE_OK(engine::copy_sync(second_side, device_side, sizeof(int), cudaMemcpyDeviceToDevice, "copy"));
  // Rows 3 and 4, 37 elements each.
  const detail::operand two_rows{second.data().get() + 40 * 3, width, 2, 40 * sizeof(int), device_id(0),
                                 detail::kind_id::device};
  REQUIRE_OK(engine::fill_sync(two_rows, sizeof(int), 0, "fill_bytes"));
  const auto second_rows = test::read_back(second.view());
  CHECK(second_rows[5] == source[5]);
  CHECK(second_rows[39] == -1);
  CHECK(second_rows[40 * 3 + 5] == 0);   // a row inside the memset region
  CHECK(second_rows[40 * 4 + 36] == 0);
  CHECK(second_rows[40 * 3 + 38] == -1);  // its padding untouched
  CHECK(second_rows[40 * 5 + 5] == source[50 * 5 + 5]);  // the row after it untouched
}

TEST_CASE("device-to-device 2D copies match a reference on every path of the copy kernel", "[copy][2d]") {
  REQUIRE(detail::copy2d_kernel != nullptr);  // registered by this nvcc-compiled test program
  struct shape {
    std::size_t row_bytes, rows, dpitch, spitch, doffset, soffset;
  };
  // 16-, 8-, 4-byte accesses, rows with a tail, wide and narrow rows, sub-views, one row, and
  // 2-byte aligned offsets that take cudaMemcpy2DAsync.
  const shape shapes[] = {{4096, 33, 8192, 4608, 0, 0}, {16380, 7, 16384, 16384, 0, 0},  {112, 300, 512, 128, 0, 0},
                          {1001, 40, 1024, 1536, 0, 0}, {24, 1000, 32, 40, 8, 16},       {100, 64, 200, 104, 4, 4},
                          {5000, 3, 6000, 5008, 16, 0}, {7, 500, 16, 64, 0, 0},          {300, 20, 320, 304, 2, 6},
                          {64, 1, 128, 128, 16, 32},    {2048, 600, 2048, 4096, 0, 2048}};
  auto s = take(stream::create());
  for (const shape& sh : shapes) {
    INFO("rows of " << sh.row_bytes << " B x " << sh.rows << ", pitches " << sh.dpitch << "/" << sh.spitch
                    << ", offsets " << sh.doffset << "/" << sh.soffset);
    const std::size_t dbytes = sh.dpitch * sh.rows + 64, sbytes = sh.spitch * sh.rows + 64;
    auto dst = take(device_buffer<unsigned char>::allocate(dbytes));
    auto src = take(device_buffer<unsigned char>::allocate(sbytes));
    const auto pattern = test::random_vector<unsigned char>(sbytes, test::fresh_seed());
    REQUIRE_OK(copy(src, span(pattern)));
    const auto at = [](auto& b, std::size_t offset, std::size_t pitch, std::size_t width, std::size_t rows) {
      return detail::operand{b.data().get() + offset, width, rows, pitch, device_id(0), detail::kind_id::device};
    };
    const auto d = at(dst, sh.doffset, sh.dpitch, sh.row_bytes, sh.rows);
    const auto sr = at(src, sh.soffset, sh.spitch, sh.row_bytes, sh.rows);
    for (const bool ordered : {true, false}) {
      REQUIRE_OK(fill_bytes(dst, test::poison));
      if (ordered) {
        REQUIRE_OK(engine::copy_async(d, sr, 1, cudaMemcpyDeviceToDevice, s, "copy"));
        REQUIRE_OK(s.synchronize());
      } else {
        REQUIRE_OK(engine::copy_sync(d, sr, 1, cudaMemcpyDeviceToDevice, "copy"));
      }
      const auto got = test::read_back(dst.view());
      std::vector<unsigned char> want(dbytes, static_cast<unsigned char>(test::poison));
      for (std::size_t r = 0; r < sh.rows; ++r)
        std::memcpy(want.data() + sh.doffset + r * sh.dpitch, pattern.data() + sh.soffset + r * sh.spitch,
                    sh.row_bytes);
      CHECK(got == want);
    }
  }
}

TEST_CASE("the typed fill writes the rows of a 2D view and not their padding", "[fill][2d]") {
  auto s = take(stream::create());
  auto dev = take(device_buffer<float>::allocate(32 * 5));
  REQUIRE_OK(fill_bytes(dev, 0));
  const test::rows_view<float> rows{dev.data().get(), 20, 5, 32 * sizeof(float), device_id(0)};
  REQUIRE_OK(fill(rows, 2.5f, s));
  REQUIRE_OK(s.synchronize());
  const auto values = test::read_back(dev.view());
  for (std::size_t i = 0; i < values.size(); ++i) CHECK(values[i] == (i % 32 < 20 ? 2.5f : 0.0f));
}

TEST_CASE("buffers are freed through their resource on the stream they were handed to", "[buffer]") {
  test::recording_resource recorder;
  auto s1 = take(stream::create());
  auto s2 = take(stream::create());
  {
    auto b = take(device_buffer<int>::allocate(100, s1, recorder));
    CHECK(b.resource() == resource_ref<device>(recorder));
    CHECK(b.stream() == s1.ref());
    b.set_stream(s2);
  }
  CHECK(recorder.freed_stream == s2.get());
  // A default stream means "the one current when used": the free goes to the legacy stream of the
  // buffer's device, which every blocking stream there (per-thread ones included) is ordered with.
  { auto b = take(device_buffer<int>::allocate(100, stream_ref::per_thread(), recorder)); }
  CHECK(recorder.freed_stream == cudaStreamLegacy);
  { auto b = take(device_buffer<int>::allocate(100, stream_ref(), recorder)); }
  CHECK(recorder.freed_stream == cudaStreamLegacy);
}

TEST_CASE("a buffer is freed with its own device current", "[buffer][multi_gpu]") {
  test::recording_resource recorder;
  {
    auto on1 = device_guard::set(device_id(1));
    REQUIRE(on1);
    auto b = take(device_buffer<int>::allocate(100, stream_ref(), recorder));
    CHECK(b.device() == device_id(1));
    REQUIRE_OK(set_current_device(device_id(0)));
    // b goes with device 0 current
  }
  CHECK(recorder.freed_on == 1);
  CHECK(take(current_device()) == device_id(0));
}

TEST_CASE("the typed fill refuses another device's memory before launching anything", "[fill][multi_gpu]") {
  auto on0 = take(device_buffer<int>::allocate(1024, device_id(0)));
  auto s1 = take(stream::create(device_id(1)));
  REQUIRE_OK(fill_bytes(on0, 0));
  auto refused = fill(on0, 7, s1);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code() == errc::invalid_argument);
  INFO(refused.error().message());
  CHECK(std::string(refused.error().message()).find("device 0") != std::string::npos);
  CHECK(std::string(refused.error().message()).find("device 1") != std::string::npos);
  // Nothing faulted: both contexts still work and the memory is untouched.
  REQUIRE_OK(s1.synchronize());
  CHECK(cudaGetLastError() == cudaSuccess);
  CHECK(test::read_back(on0.view()) == std::vector<int>(1024, 0));
  auto on1 = take(device_buffer<int>::allocate(1024, device_id(1)));
  REQUIRE_OK(fill(on1, 7, s1));
  REQUIRE_OK(s1.synchronize());
  CHECK(test::read_back(on1.view()) == std::vector<int>(1024, 7));
}

TEST_CASE("a synchronous copy across devices waits for pending work on both", "[copy][multi_gpu]") {
  constexpr std::size_t n = 4096;
  constexpr unsigned long long cycles = 50'000'000;  // tens of milliseconds
  auto src = take(device_buffer<int>::allocate(n, device_id(0)));
  auto dst = take(device_buffer<int>::allocate(n, device_id(1)));
  auto managed_src = take(managed_buffer<int>::allocate(n, device_id(0)));
  REQUIRE_OK(fill_bytes(src, 0));
  REQUIRE_OK(fill_bytes(dst, 0));
  REQUIRE_OK(fill_bytes(managed_src, 0));
  {
    auto on0 = take(device_guard::set(device_id(0)));
    test::delay_then_fill<<<1, 256, 0, cudaStreamLegacy>>>(src.view(), 5, cycles);
    REQUIRE(cudaGetLastError() == cudaSuccess);
  }
  REQUIRE_OK(set_current_device(device_id(1)));
  REQUIRE_OK(copy(dst, src));
  CHECK(test::read_back(dst.view()) == std::vector<int>(n, 5));

  {
    auto on0 = take(device_guard::set(device_id(0)));
    test::delay_then_fill<<<1, 256, 0, cudaStreamLegacy>>>(managed_src.view(), 6, cycles);
    REQUIRE(cudaGetLastError() == cudaSuccess);
  }
  REQUIRE_OK(copy(dst, managed_src));
  CHECK(test::read_back(dst.view()) == std::vector<int>(n, 6));
  REQUIRE_OK(set_current_device(device_id(0)));
}

TEST_CASE("2D copies between two devices go through the peer path", "[copy][2d][multi_gpu]") {
  constexpr std::size_t width = 33, height = 7;
  auto on0 = take(device_buffer<int>::allocate(48 * height, device_id(0)));
  auto on1 = take(device_buffer<int>::allocate(40 * height, device_id(1)));
  const auto values = test::random_vector<int>(48 * height, test::fresh_seed());
  REQUIRE_OK(copy(on0, span(values)));
  REQUIRE_OK(fill_bytes(on1, 0));
  const detail::operand dst{on1.data().get(), width, height, 40 * sizeof(int), device_id(1), detail::kind_id::device};
  const detail::operand src{on0.data().get(), width, height, 48 * sizeof(int), device_id(0), detail::kind_id::device};
  REQUIRE_OK(engine::copy_sync(dst, src, sizeof(int), cudaMemcpyDeviceToDevice, "copy"));
  auto s1 = take(stream::create(device_id(1)));
  REQUIRE_OK(engine::copy_async(dst, src, sizeof(int), cudaMemcpyDeviceToDevice, s1, "copy"));
  REQUIRE_OK(s1.synchronize());
  const auto back = test::read_back(on1.view());
  for (std::size_t row = 0; row < height; ++row)
    for (std::size_t col = 0; col < 40; ++col)
      CHECK(back[row * 40 + col] == (col < width ? values[row * 48 + col] : 0));
}

TEST_CASE("a 2D copy within one device, ordered on another device's stream, leaves the kernel out",
          "[copy][2d][multi_gpu]") {
  constexpr std::size_t width = 1000, height = 50;
  auto a = take(device_buffer<int>::allocate(1024 * height, device_id(0)));
  auto b = take(device_buffer<int>::allocate(1024 * height, device_id(0)));
  const auto values = test::random_vector<int>(1024 * height, test::fresh_seed());
  REQUIRE_OK(copy(a, span(values)));
  REQUIRE_OK(fill_bytes(b, 0));
  const detail::operand dst{b.data().get(), width, height, 1024 * sizeof(int), device_id(0), detail::kind_id::device};
  const detail::operand src{a.data().get(), width, height, 1024 * sizeof(int), device_id(0), detail::kind_id::device};
  // A kernel on device 1 could not reach device 0's memory; cudaMemcpy2DAsync on that stream can.
  auto s1 = take(stream::create(device_id(1)));
  REQUIRE_OK(engine::copy_async(dst, src, sizeof(int), cudaMemcpyDeviceToDevice, s1, "copy"));
  REQUIRE_OK(s1.synchronize());
  const auto back = test::read_back(b.view());
  for (std::size_t row = 0; row < height; row += 7)
    for (std::size_t col = 0; col < 1024; col += 3)
      CHECK(back[row * 1024 + col] == (col < width ? values[row * 1024 + col] : 0));
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("stream-ordered copies of another device's pool memory work whichever device is current",
          "[copy][multi_gpu]") {
  REQUIRE_OK(set_current_device(device_id(0)));
  auto s1 = take(stream::create(device_id(1)));
  auto pooled = take(device_buffer<int>::allocate(1000, s1));  // device 1's stream-ordered pool
  const auto values = test::random_vector<int>(1000, test::fresh_seed());
  auto in = take(pinned_buffer<int>::allocate(1000));
  auto out = take(pinned_buffer<int>::allocate(1000));
  std::copy(values.begin(), values.end(), in.data().get());
  REQUIRE_OK(fill_bytes(out, 0));
  REQUIRE_OK(copy(pooled, in, s1));
  REQUIRE_OK(copy(out, pooled, s1));
  REQUIRE_OK(s1.synchronize());
  CHECK(test::read_back(out.view()) == values);
  CHECK(take(current_device()) == device_id(0));  // the retry's device guard restored it
  CHECK(cudaGetLastError() == cudaSuccess);
}

namespace {
// One 2D device-to-device copy of 64 rows where one operand (dst or src; the other fits) has a cudaMalloc allocation
// of 4 rows: cudaMemcpy2DAsync's answer first, then cudamem's (the 2D kernel's path), which must agree and leave the
// context usable.
void refuse_past_the_end(bool dst_past) {
  constexpr std::size_t pitch = 4096, width = 1024, rows = 64, short_rows = 4;
  unsigned char *whole = nullptr, *short_side = nullptr;
  REQUIRE(cudaMalloc(&whole, pitch * rows) == cudaSuccess);
  REQUIRE(cudaMalloc(&short_side, pitch * (short_rows - 1) + width) == cudaSuccess);
  REQUIRE(cudaMemset(whole, 7, pitch * rows) == cudaSuccess);
  auto s = take(stream::create(device_id(0)));
  unsigned char* const dst = dst_past ? short_side : whole;
  unsigned char* const src = dst_past ? whole : short_side;
  const cudaError_t raw = cudaMemcpy2DAsync(dst, pitch, src, pitch, width, rows, cudaMemcpyDeviceToDevice, s.get());
  (void)cudaGetLastError();
  INFO("cudaMemcpy2DAsync: " << cudaGetErrorName(raw) << (dst_past ? ", dst" : ", src") << " past the end");
  REQUIRE(cudaStreamSynchronize(s.get()) == cudaSuccess);
  const auto ours = copy_2d(device_ptr<unsigned char>(dst, device_id(0)), pitch,
                            device_ptr<const unsigned char>(src, device_id(0)), pitch, width, rows, s);
  CHECK(ours.has_value() == (raw == cudaSuccess));
  if (raw == cudaSuccess) WARN("cudaMemcpy2DAsync took a copy past the end of an allocation: the refusal is untested");
  if (!ours) {
    INFO(ours.error().message());
    CHECK(ours.error().code() == errc::out_of_range);
    CHECK(std::string(ours.error().message())
              .starts_with(dst_past ? "copy_2d: dst (64 rows of 1024 bytes, 4096 apart) spans ["
                                    : "copy_2d: src (64 rows of 1024 bytes, 4096 apart) spans ["));
    CHECK(std::string(ours.error().message()).find("past the end of its allocation [") != std::string::npos);
    CHECK(cudaGetLastError() == cudaSuccess);  // the refusal is not left behind for the user
  }
  // The context still works: the stream drains, and a copy that fits moves its rows.
  CHECK(cudaStreamSynchronize(s.get()) == cudaSuccess);
  REQUIRE(cudaMemset(short_side, 0, pitch * (short_rows - 1) + width) == cudaSuccess);
  REQUIRE_OK(copy_2d(device_ptr<unsigned char>(short_side, device_id(0)), pitch,
                     device_ptr<const unsigned char>(whole, device_id(0)), pitch, width, short_rows, s));
  REQUIRE_OK(s.synchronize());
  std::vector<unsigned char> back(pitch * (short_rows - 1) + width);
  REQUIRE(cudaMemcpy(back.data(), short_side, back.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
  for (std::size_t i = 0; i < back.size(); ++i)
    if (back[i] != (i % pitch < width ? 7 : 0)) FAIL("byte " << i << " of the copy that fits is wrong");
  CHECK(cudaFree(whole) == cudaSuccess);
  CHECK(cudaFree(short_side) == cudaSuccess);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
}
}  // namespace

// Runs only when named: the child process of the next test, where a copy that faults cannot take down the tests.
TEST_CASE("child: 2D device-to-device copies past the end of an allocation", "[.copy2d_range_child]") {
  refuse_past_the_end(true);
  refuse_past_the_end(false);
}

TEST_CASE("a 2D device-to-device copy past the end of its allocation is refused as cudaMemcpy2DAsync refuses it",
          "[copy][2d]") {
  // In a fresh process (this one's CUDA context cannot be shared across fork): the test binary, run on the test above.
  char program[] = "/proc/self/exe", filter[] = "[.copy2d_range_child]";
  char* argv[] = {program, filter, nullptr};
  pid_t child = 0;
  REQUIRE(posix_spawn(&child, program, nullptr, nullptr, argv, environ) == 0);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  INFO("the child's output is above; status " << status);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
