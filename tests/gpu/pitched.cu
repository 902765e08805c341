// SPDX-License-Identifier: MIT
// Pitched views and buffers on real memory: every copy direction with random data into poisoned
// destinations (the padding between rows must stay untouched), sub-views and distinct pitches,
// 1D <-> 2D, fills, kernels indexing a view, graph capture, copy_2d, and two devices.
#include "common.cuh"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>

using namespace cudamem;
using test::take;

namespace {
// The whole allocation under a buffer's view, rows and padding, as one contiguous view.
template <class T, class K>
pitched_span<T, K> with_padding(pitched_span<T, K> rows) {
  return take(make_pitched(rows.data(), rows.pitch_bytes() / sizeof(T), rows.height(), rows.pitch_bytes()));
}

// Every element of a buffer's allocation, padding included, read back to the host.
template <class T, class K>
std::vector<std::remove_cv_t<T>> read_all(pitched_span<T, K> rows) {
  const auto all = with_padding(rows);
  std::vector<std::remove_cv_t<T>> out(all.size());
  REQUIRE_OK(copy(span(out), all));
  return out;
}

template <class T>
bool is_poison(const T& value) {
  unsigned char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  return std::all_of(bytes, bytes + sizeof(T), [](unsigned char b) { return b == test::poison; });
}

// Checks `back` (a whole allocation `stride` elements per row) against `expected(r, c)` in the first
// `width` columns of `height` rows, and poison everywhere else.
template <class Expected>
void check_rows(const std::vector<int>& back, std::size_t stride, std::size_t width, std::size_t height,
                Expected&& expected) {
  std::size_t wrong = 0, padding_written = 0;
  for (std::size_t r = 0; r < back.size() / stride; ++r)
    for (std::size_t c = 0; c < stride; ++c) {
      const int value = back[r * stride + c];
      if (r < height && c < width) wrong += value != expected(r, c);
      else padding_written += !is_poison(value);
    }
  CHECK(wrong == 0);
  CHECK(padding_written == 0);
}

// A sub-view of a source of kind SK (offset by a row and a column) into a destination of kind DK
// with a wider pitch; synchronous, or ordered on `s` when both kinds allow it.
template <class DK, class SK>
void copy_rows_between(std::size_t width, const stream* s) {
  if constexpr (!stream_orderable<DK> || !stream_orderable<SK>)
    if (s != nullptr) return;
  INFO(SK::name << " -> " << DK::name << ", width " << width << (s != nullptr ? ", stream-ordered" : ""));
  constexpr std::size_t height = 5;
  auto src = take(pitched_buffer<int, SK>::allocate(width + 3, height + 1));
  auto dst = take(pitched_buffer<int, DK>::allocate(width + 200, height));
  const std::size_t src_stride = src.pitch_bytes() / sizeof(int), dst_stride = dst.pitch_bytes() / sizeof(int);
  REQUIRE(src_stride != dst_stride);
  const auto values = test::random_vector<int>(src_stride * (height + 1), test::fresh_seed());
  REQUIRE_OK(copy(with_padding(src.view()), span(values)));
  REQUIRE_OK(fill_bytes(with_padding(dst.view()), test::poison));
  const auto from = take(src.view().subspan(1, 1, height, width));
  const auto to = take(dst.view().subspan(0, 0, height, width));
  if constexpr (stream_orderable<DK> && stream_orderable<SK>) {
    if (s != nullptr) {
      REQUIRE_OK(copy(to, from, *s));
      REQUIRE_OK(s->synchronize());
    }
  }
  if (s == nullptr) REQUIRE_OK(copy(to, from));
  check_rows(read_all(dst.view()), dst_stride, width, height,
             [&](std::size_t r, std::size_t c) { return values[(r + 1) * src_stride + c + 1]; });
}

template <class DK>
void copy_from_every_kind(std::size_t width, const stream* s) {
  copy_rows_between<DK, host>(width, s);
  copy_rows_between<DK, pinned>(width, s);
  copy_rows_between<DK, device>(width, s);
  copy_rows_between<DK, managed>(width, s);
}

__global__ void label_cells(device_pitched_span<int> out, pinned_pitched_span<const int> offsets) {
  const std::size_t c = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  const std::size_t r = blockIdx.y;
  if (c < out.width() && r < out.height()) out(r, c) = static_cast<int>(r * 1000 + c) + offsets.row(r)[c];
}

__global__ void add_one_to_each_row(managed_pitched_span<int> rows) {
  const std::size_t r = threadIdx.x;
  if (r >= rows.height()) return;
  for (int& cell : rows.row(r)) cell += 1;
}

void end_and_replay(const stream& s, int replays, const std::function<void()>& between) {
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(s.get(), &graph) == cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  for (int i = 0; i < replays; ++i) {
    between();
    REQUIRE(cudaGraphLaunch(exec, s.get()) == cudaSuccess);
    REQUIRE_OK(s.synchronize());
  }
  CHECK(cudaGraphExecDestroy(exec) == cudaSuccess);
  CHECK(cudaGraphDestroy(graph) == cudaSuccess);
}
}  // namespace

TEST_CASE("2D copies between every pair of kinds move the rows and leave the padding", "[pitched][copy]") {
  auto s = take(stream::create());
  const stream* const synchronous_then_ordered[] = {nullptr, &s};
  for (std::size_t width : {1, 37, 130})
    for (const stream* ordered : synchronous_then_ordered) {
      copy_from_every_kind<host>(width, ordered);
      copy_from_every_kind<pinned>(width, ordered);
      copy_from_every_kind<device>(width, ordered);
      copy_from_every_kind<managed>(width, ordered);
    }
}

TEST_CASE("device pitched buffers take the pitch the device wants", "[pitched][buffer]") {
  int texture_alignment = 0, pitch_alignment = 0;
  REQUIRE(cudaDeviceGetAttribute(&texture_alignment, cudaDevAttrTextureAlignment, 0) == cudaSuccess);
  REQUIRE(cudaDeviceGetAttribute(&pitch_alignment, cudaDevAttrTexturePitchAlignment, 0) == cudaSuccess);
  auto s = take(stream::create());
  for (std::size_t width : {1, 3, 100, 128, 129, 1000, 4097}) {
    INFO("width " << width << " floats");
    const std::size_t row_bytes = width * sizeof(float);
    auto plain = take(device_pitched_buffer<float>::allocate(width, 3));
    void* reference = nullptr;
    std::size_t reference_pitch = 0;
    REQUIRE(cudaMallocPitch(&reference, &reference_pitch, row_bytes, 3) == cudaSuccess);
    REQUIRE(cudaFree(reference) == cudaSuccess);
    CHECK(plain.pitch_bytes() == reference_pitch);
    CHECK(plain.pitch_bytes() % static_cast<std::size_t>(texture_alignment) == 0);
    CHECK(reinterpret_cast<std::uintptr_t>(plain.data().get()) % 256 == 0);
    CHECK(plain.device() == device_id(0));

    auto ordered = take(device_pitched_buffer<float>::allocate(width, 3, s));
    CHECK(ordered.stream() == s.ref());
    CHECK(ordered.pitch_bytes() % static_cast<std::size_t>(pitch_alignment) == 0);
    CHECK(ordered.pitch_bytes() >= row_bytes);
    CHECK(ordered.pitch_bytes() < row_bytes + static_cast<std::size_t>(pitch_alignment));
    // The last row's last element is ours: a fill of every row completes without a fault.
    REQUIRE_OK(fill(ordered, 1.5f, s));
    REQUIRE_OK(s.synchronize());
    std::vector<float> first_row(width);
    REQUIRE_OK(copy(span(first_row), take(ordered.view().subspan(0, 0, 1, width))));
    CHECK(first_row == std::vector<float>(width, 1.5f));
  }
  auto on_device = take(device_pitched_buffer<double>::allocate(17, 4, device_id(0)));
  CHECK(on_device.pitch_bytes() % static_cast<std::size_t>(texture_alignment) == 0);
  auto empty = take(device_pitched_buffer<int>::allocate(5, 0, s));
  CHECK(empty.empty());
  CHECK(empty.data().get() == nullptr);
  REQUIRE_OK(fill(empty, 3, s));
}

TEST_CASE("pitched views copy to and from spans of as many elements", "[pitched][copy]") {
  constexpr std::size_t width = 33, height = 7;
  auto s = take(stream::create());
  auto rows = take(device_pitched_buffer<std::uint16_t>::allocate(width, height, s));
  auto staging = take(pinned_buffer<std::uint16_t>::allocate(width * height));
  const auto values = test::random_vector<std::uint16_t>(width * height, test::fresh_seed());
  std::copy(values.begin(), values.end(), staging.begin());
  REQUIRE_OK(fill_bytes(with_padding(rows.view()), test::poison, s));
  REQUIRE_OK(copy(rows, staging, s));  // 1D -> 2D, stream-ordered
  auto flat = take(device_buffer<std::uint16_t>::allocate(width * height, s));
  REQUIRE_OK(copy(flat, rows, s));  // 2D -> 1D on the device
  REQUIRE_OK(s.synchronize());
  CHECK(test::read_back(flat.view()) == values);
  std::vector<std::uint16_t> by_rows(width * height);
  for (std::size_t r = 0; r < height; ++r)
    REQUIRE_OK(copy(take(span(by_rows).subspan(r * width, width)), take(rows.view().subspan(r, 0, 1, width))));
  CHECK(by_rows == values);
  // The padding stayed poisoned.
  const auto all = read_all(rows.view());
  const std::size_t stride = rows.pitch_bytes() / sizeof(std::uint16_t);
  std::size_t padding_written = 0;
  for (std::size_t i = 0; i < all.size(); ++i)
    if (i % stride >= width) padding_written += !is_poison(all[i]);
  CHECK(padding_written == 0);
  // A span of another count is refused.
  CHECK(copy(*flat.view().first(width * height - 1), rows.view(), s).error().code() == errc::extents_mismatch);
}

TEST_CASE("typed and byte fills of pitched views write the rows only", "[pitched][fill]") {
  constexpr std::size_t width = 21, height = 6;
  auto s = take(stream::create());
  auto rows = take(device_pitched_buffer<int>::allocate(width + 40, height + 2));
  const std::size_t stride = rows.pitch_bytes() / sizeof(int);
  REQUIRE_OK(fill_bytes(with_padding(rows.view()), test::poison));
  auto inner = take(rows.view().subspan(1, 2, height, width));
  REQUIRE_OK(fill(inner, 42, s));
  REQUIRE_OK(s.synchronize());
  // The sub-view starts at row 1, column 2: everything around it keeps the poison.
  const auto back = read_all(rows.view());
  std::size_t wrong = 0;
  for (std::size_t r = 0; r < height + 2; ++r)
    for (std::size_t c = 0; c < stride; ++c) {
      const bool inside = r >= 1 && r < 1 + height && c >= 2 && c < 2 + width;
      wrong += inside ? back[r * stride + c] != 42 : !is_poison(back[r * stride + c]);
    }
  CHECK(wrong == 0);

  auto pinned_rows = take(pinned_pitched_buffer<int>::allocate(width, height));
  REQUIRE_OK(fill_bytes(with_padding(pinned_rows.view()), test::poison));
  REQUIRE_OK(fill_bytes(pinned_rows, 0, s));
  REQUIRE_OK(s.synchronize());
  check_rows(read_all(pinned_rows.view()), pinned_rows.pitch_bytes() / sizeof(int), width, height,
             [](std::size_t, std::size_t) { return 0; });
}

TEST_CASE("kernels index pitched views of device, pinned and managed memory", "[pitched][kernel]") {
  constexpr std::size_t width = 300, height = 9;
  auto s = take(stream::create());
  auto out = take(device_pitched_buffer<int>::allocate(width, height, s));
  auto offsets = take(pinned_pitched_buffer<int>::allocate(width, height));
  auto offset_rows = offsets.view();
  for (std::size_t r = 0; r < height; ++r)
    for (std::size_t c = 0; c < width; ++c) offset_rows(r, c) = static_cast<int>(c % 7);
  REQUIRE_OK(fill_bytes(with_padding(out.view()), test::poison, s));
  label_cells<<<dim3(unsigned{(width + 127) / 128}, unsigned{height}), 128, 0, s.get()>>>(out, offsets);
  REQUIRE_OK(check_launch("label_cells"));
  auto shared_rows = take(managed_pitched_buffer<int>::allocate(width, height));
  REQUIRE_OK(copy(shared_rows, out, s));
  add_one_to_each_row<<<1, unsigned{height}, 0, s.get()>>>(shared_rows);
  REQUIRE_OK(check_launch("add_one_to_each_row"));
  REQUIRE_OK(s.synchronize());
  check_rows(read_all(out.view()), out.pitch_bytes() / sizeof(int), width, height,
             [](std::size_t r, std::size_t c) { return static_cast<int>(r * 1000 + c + c % 7); });
  std::size_t wrong = 0;
  const auto shared_view = shared_rows.view();
  for (std::size_t r = 0; r < height; ++r)
    for (std::size_t c = 0; c < width; ++c) wrong += shared_view(r, c) != static_cast<int>(r * 1000 + c + c % 7 + 1);
  CHECK(wrong == 0);
}

TEST_CASE("copy_2d moves bytes between typed pointers in every direction", "[pitched][copy]") {
  constexpr std::size_t width_bytes = 77, height = 6;
  auto s = take(stream::create());
  auto dev = take(device_pitched_buffer<unsigned char>::allocate(100, height));
  auto dev2 = take(device_pitched_buffer<unsigned char>::allocate(300, height));
  auto in = take(pinned_pitched_buffer<unsigned char>::allocate(90, height));
  auto out = take(pinned_pitched_buffer<unsigned char>::allocate(120, height));
  const auto values = test::random_vector<unsigned char>(in.pitch_bytes() * height, test::fresh_seed());
  REQUIRE_OK(copy(with_padding(in.view()), span(values)));
  REQUIRE_OK(fill_bytes(with_padding(out.view()), test::poison));
  REQUIRE_OK(copy_2d(dev.data(), dev.pitch_bytes(), in.data(), in.pitch_bytes(), width_bytes, height, s));
  REQUIRE_OK(copy_2d(dev2.data(), dev2.pitch_bytes(), dev.data(), dev.pitch_bytes(), width_bytes, height, s));
  REQUIRE_OK(copy_2d(out.data(), out.pitch_bytes(), dev2.data(), dev2.pitch_bytes(), width_bytes, height, s));
  REQUIRE_OK(s.synchronize());
  const auto back = read_all(out.view());
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < back.size(); ++i) {
    const std::size_t r = i / out.pitch_bytes(), c = i % out.pitch_bytes();
    wrong += back[i] != (c < width_bytes ? values[r * in.pitch_bytes() + c] : test::poison);
  }
  CHECK(wrong == 0);
  // Synchronous, from pageable memory, with a pitch shorter than the row refused before writing.
  std::vector<unsigned char> pageable(width_bytes * height, 9);
  REQUIRE_OK(copy_2d(dev.data(), dev.pitch_bytes(), host_ptr<const unsigned char>(pageable.data()), width_bytes,
                     width_bytes, height));
  auto refused = copy_2d(out.data(), width_bytes - 1, dev.data(), dev.pitch_bytes(), width_bytes, height);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code() == errc::invalid_argument);
  CHECK(read_all(out.view()) == back);
  // A pitch beyond the device's maximum (which the driver does not check) is refused before any call;
  // the destination is an address no allocation uses, never touched.
  const device_ptr<unsigned char> nowhere(reinterpret_cast<unsigned char*>(std::uintptr_t{0x10000}), device_id(0));
  auto too_wide =
      copy_2d(nowhere, take(max_pitch(device_id(0))) + 256, dev2.data(), dev2.pitch_bytes(), width_bytes, 2, s);
  REQUIRE_FALSE(too_wide);
  CHECK(std::string(too_wide.error().message()).find("exceeds the device's maximum") != std::string::npos);
}

TEST_CASE("a stream-ordered 2D copy is captured into a graph and replayed", "[pitched][graph]") {
  constexpr std::size_t width = 45, height = 8;
  auto s = take(stream::create());
  auto rows = take(device_pitched_buffer<float>::allocate(width, height, s));
  auto in = take(pinned_pitched_buffer<float>::allocate(width + 10, height));
  auto out = take(pinned_pitched_buffer<float>::allocate(width, height));
  REQUIRE_OK(fill_bytes(with_padding(out.view()), test::poison));
  REQUIRE_OK(s.synchronize());
  const auto from = take(in.view().subspan(0, 10, height, width));
  REQUIRE(cudaStreamBeginCapture(s.get(), cudaStreamCaptureModeGlobal) == cudaSuccess);
  REQUIRE_OK(copy(rows, from, s));
  REQUIRE_OK(fill(*rows.view().subspan(0, 0, 1, width), -1.0f, s));
  REQUIRE_OK(copy(out, rows, s));
  std::vector<float> values;
  end_and_replay(s, 2, [&] {
    // New input before each replay: the graph reads the memory, not what it held at capture.
    values = test::random_vector<float>(width * height, test::fresh_seed());
    for (std::size_t r = 0; r < height; ++r)
      for (std::size_t c = 0; c < width; ++c) in.view()(r, c + 10) = values[r * width + c];
  });
  const auto back = out.view();
  std::size_t wrong = 0;
  for (std::size_t r = 0; r < height; ++r)
    for (std::size_t c = 0; c < width; ++c) {
      const float expected = r == 0 ? -1.0f : values[r * width + c];
      wrong += std::memcmp(&back(r, c), &expected, sizeof(float)) != 0;
    }
  CHECK(wrong == 0);
  const auto all = read_all(out.view());
  std::size_t padding_written = 0;
  for (std::size_t i = 0; i < all.size(); ++i)
    if (i % (out.pitch_bytes() / sizeof(float)) >= width) padding_written += !is_poison(all[i]);
  CHECK(padding_written == 0);
}

TEST_CASE("2D copies between two devices go through the peer path and keep the padding", "[pitched][copy][multi_gpu]") {
  constexpr std::size_t width = 51, height = 6;
  auto on0 = take(device_pitched_buffer<int>::allocate(width + 7, height + 1, device_id(0)));
  auto on1 = take(device_pitched_buffer<int>::allocate(width + 300, height, device_id(1)));
  const std::size_t stride0 = on0.pitch_bytes() / sizeof(int), stride1 = on1.pitch_bytes() / sizeof(int);
  const auto values = test::random_vector<int>(stride0 * (height + 1), test::fresh_seed());
  REQUIRE_OK(copy(with_padding(on0.view()), span(values)));
  const auto from = take(on0.view().subspan(1, 3, height, width));
  const auto to = take(on1.view().subspan(0, 0, height, width));
  const auto expected = [&](std::size_t r, std::size_t c) { return values[(r + 1) * stride0 + c + 3]; };

  REQUIRE_OK(fill_bytes(with_padding(on1.view()), test::poison));
  REQUIRE_OK(copy(to, from));
  check_rows(read_all(on1.view()), stride1, width, height, expected);

  auto s1 = take(stream::create(device_id(1)));
  REQUIRE_OK(fill_bytes(with_padding(on1.view()), test::poison, s1));
  REQUIRE_OK(copy(to, from, s1));
  REQUIRE_OK(s1.synchronize());
  check_rows(read_all(on1.view()), stride1, width, height, expected);

  REQUIRE_OK(fill_bytes(with_padding(on1.view()), test::poison));
  REQUIRE_OK(copy_2d(on1.data(), on1.pitch_bytes(), on0.data() + static_cast<std::ptrdiff_t>(stride0 + 3),
                     on0.pitch_bytes(), width * sizeof(int), height, s1));
  REQUIRE_OK(s1.synchronize());
  check_rows(read_all(on1.view()), stride1, width, height, expected);
}
