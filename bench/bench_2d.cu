// SPDX-License-Identifier: MIT
// bench_2d: cudamem's stream-ordered 2D copies against cudaMemcpy2DAsync, in the same run, on the
// same stream and memory, timed with events (GB/s of payload copied, higher is better). Device-to-
// device copies on one device run cudamem's 2D copy kernel in nvcc builds; host-device copies from
// pinned memory go through cudaMemcpy2DAsync on both sides. Every destination is poisoned before
// the row and checked against the source after it. Exits 77 when there is no CUDA device.
#include "harness.hpp"

namespace {

using namespace cudamem;

struct shape {
  const char* what;      // element type, for the row name
  std::size_t elem;      // its size in bytes
  std::size_t width;     // elements per row
  std::size_t height;    // rows
  std::size_t dpitch;    // bytes
  std::size_t spitch;    // bytes
  std::size_t offset;    // bytes into each row where the view starts (a sub-view), both sides
  double target;         // on cudamem / cudaMemcpy2DAsync
};

std::string name_of(const shape& s, const char* direction) {
  char text[160];
  std::snprintf(text, sizeof text, "%s %zu x %zu B %s (pitch %zu/%zu%s)", direction, s.height, s.width * s.elem, s.what,
                s.dpitch, s.spitch, s.offset != 0 ? ", sub-view" : "");
  return text;
}

struct rgb {  // a 12-byte element
  float r, g, b;
};

// The view cudamem copies: rows of `width` elements of T from byte `offset` of each row, `pitch`
// bytes apart.
template <class T, class K>
pitched_span<T, K> rows_of(unsigned char* first, const shape& s, std::size_t pitch) {
  const device_id where = std::is_same_v<K, device> ? device_id(0) : device_id::host();
  return take(make_pitched(ptr<T, K>(reinterpret_cast<T*>(first + s.offset), where), s.width, s.height, pitch),
              "make_pitched");
}

// Bytes [offset, offset + width * elem) of each row of `got` and `want` are equal, and (dst) the
// bytes outside them still hold `poison`.
void expect_rows(const std::vector<unsigned char>& got, std::size_t gpitch, const std::vector<unsigned char>& want,
                 std::size_t wpitch, const shape& s, unsigned char poison, const char* what) {
  const std::size_t row = s.width * s.elem;
  for (std::size_t r = 0; r < s.height; ++r) {
    const unsigned char* g = got.data() + r * gpitch;
    if (std::memcmp(g + s.offset, want.data() + r * wpitch + s.offset, row) != 0)
      fail(what, "the copied rows differ from the source");
    for (std::size_t b = 0; b < gpitch; ++b)
      if ((b < s.offset || b >= s.offset + row) && g[b] != poison) fail(what, "a byte outside the copied rows changed");
  }
}

std::vector<unsigned char> read_device(const void* p, std::size_t bytes) {
  std::vector<unsigned char> out(bytes);
  check(cudaMemcpy(out.data(), p, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
  return out;
}

template <class T>
void device_row(std::vector<row>& rows, const options& opt, const shape& s, stream_ref st, const event& start,
                const event& stop) {
  const std::size_t dbytes = s.dpitch * s.height, sbytes = s.spitch * s.height;
  auto dst = take(device_buffer<unsigned char>::allocate(dbytes), "device_buffer::allocate");
  auto src = take(device_buffer<unsigned char>::allocate(sbytes), "device_buffer::allocate");
  std::vector<unsigned char> pattern(sbytes);
  write_pattern(reinterpret_cast<std::byte*>(pattern.data()), sbytes, s.width * 31 + s.height);
  check(copy(src, span(pattern)), "copy");
  constexpr unsigned char poison = 0xa5;
  check(fill_bytes(dst, poison), "fill_bytes");
  const auto d = rows_of<T, device>(dst.data().get(), s, s.dpitch);
  const pitched_span<const T, device> sr = rows_of<T, device>(src.data().get(), s, s.spitch);
  const std::size_t row_bytes = s.width * s.elem;
  void* const raw_dst = d.data().get();
  const void* const raw_src = sr.data().get();
  const cudaStream_t raw_stream = st.get();
  // cudamem's copy first, checked; then both sides timed; then the raw side's result checked too.
  check(copy(d, sr, st), "copy");
  check(st.synchronize(), "stream::synchronize");
  expect_rows(read_device(dst.data().get(), dbytes), s.dpitch, pattern, s.spitch, s, poison, "cudamem 2D copy");
  // A small copy is over in a few microseconds, about the resolution of the events: each trial
  // then times a run of copies, as many as make 64 MiB.
  const std::size_t repeat = std::max<std::size_t>(1, (std::size_t{64} << 20) / (row_bytes * s.height));
  rows.push_back(bandwidth(
      name_of(s, "D2D"), "GB/s", row_bytes * s.height * repeat, opt, st, start, stop,
      [=] {
        for (std::size_t i = 0; i < repeat; ++i)
          check(cudaMemcpy2DAsync(raw_dst, s.dpitch, raw_src, s.spitch, row_bytes, s.height, cudaMemcpyDeviceToDevice,
                                  raw_stream),
                "cudaMemcpy2DAsync");
      },
      [=] {
        for (std::size_t i = 0; i < repeat; ++i) check(copy(d, sr, st), "copy");
      }));
  rows.back().target = s.target;
  check(fill_bytes(dst, poison), "fill_bytes");
  check(cudaMemcpy2DAsync(raw_dst, s.dpitch, raw_src, s.spitch, row_bytes, s.height, cudaMemcpyDeviceToDevice,
                          raw_stream),
        "cudaMemcpy2DAsync");
  check(st.synchronize(), "stream::synchronize");
  expect_rows(read_device(dst.data().get(), dbytes), s.dpitch, pattern, s.spitch, s, poison, "cudaMemcpy2DAsync");
}

// Host cost of enqueuing a small 2D device-to-device copy (the kernel's path, with its check that both footprints lie
// in their allocations) against cudaMemcpy2DAsync; then the check alone (one driver lookup per operand), printed.
void host_cost_2d(std::vector<row>& rows, const options& opt, stream_ref st) {
  constexpr std::size_t pitch = 512, width = 256, height = 64;
  auto dst = take(device_buffer<unsigned char>::allocate(pitch * height), "device_buffer::allocate");
  auto src = take(device_buffer<unsigned char>::allocate(pitch * height), "device_buffer::allocate");
  check(fill_bytes(src, 1), "fill_bytes");
  const auto d = take(make_pitched(dst.data(), width, height, pitch), "make_pitched");
  const pitched_span<const unsigned char, device> sr =
      take(make_pitched(src.data(), width, height, pitch), "make_pitched");
  unsigned char* const raw_dst = dst.data().get();
  const unsigned char* const raw_src = src.data().get();
  const cudaStream_t raw_stream = st.get();
  row cost = host_cost(
      "host cost: copy D2D 2D 64 x 256 B (kernel, range check)", opt, st,
      [=] {
        check(cudaMemcpy2DAsync(raw_dst, pitch, raw_src, pitch, width, height, cudaMemcpyDeviceToDevice, raw_stream),
              "cudaMemcpy2DAsync");
      },
      [=] { check(copy(d, sr, st), "copy"); });
  cost.target = std::nullopt;  // a kernel launch against a copy call: context for the line below
  rows.push_back(std::move(cost));
  const detail::region regions[] = {
      {raw_dst, width, height, pitch, pitch * (height - 1) + width, device_id(0), detail::kind_id::device},
      {const_cast<unsigned char*>(raw_src), width, height, pitch, pitch * (height - 1) + width, device_id(0),
       detail::kind_id::device}};
  constexpr int lookups = 100'000;
  int inside = 0;
  const auto start = wall_clock::now();
  for (int i = 0; i < lookups; ++i)
    for (const detail::region& r : regions)
      inside += detail::fit_in_allocation(r).where == detail::allocation_fit::inside;
  const double ns = seconds_between(start, wall_clock::now()) * 1e9 / lookups;
  if (inside != 2 * lookups) fail("range check", "a footprint inside its allocation was not found inside it");
  std::printf("the 2D kernel's range check (cuMemGetAddressRange on dst and src): %.0f ns per copy\n\n", ns);
}

// Pinned host to device and back, 2D, both sides through cudaMemcpy2DAsync.
void host_rows(std::vector<row>& rows, const options& opt, const shape& s, stream_ref st, const event& start,
               const event& stop) {
  const std::size_t bytes = s.dpitch * s.height, row_bytes = s.width * s.elem;
  auto host = take(pinned_buffer<unsigned char>::allocate(bytes), "pinned_buffer::allocate");
  auto dev = take(device_buffer<unsigned char>::allocate(bytes), "device_buffer::allocate");
  write_pattern(reinterpret_cast<std::byte*>(host.data().get()), bytes, 7);
  const std::vector<unsigned char> pattern(host.data().get(), host.data().get() + bytes);
  constexpr unsigned char poison = 0x3c;
  check(fill_bytes(dev, poison), "fill_bytes");
  const auto h = rows_of<unsigned char, pinned>(host.data().get(), s, s.dpitch);
  const auto d = rows_of<unsigned char, device>(dev.data().get(), s, s.dpitch);
  unsigned char* const raw_host = host.data().get();
  unsigned char* const raw_dev = dev.data().get();
  const cudaStream_t raw_stream = st.get();
  const std::size_t pitch = s.dpitch, height = s.height;
  rows.push_back(bandwidth(
      name_of(s, "H2D"), "GB/s", row_bytes * height, opt, st, start, stop,
      [=] {
        check(cudaMemcpy2DAsync(raw_dev, pitch, raw_host, pitch, row_bytes, height, cudaMemcpyHostToDevice, raw_stream),
              "cudaMemcpy2DAsync");
      },
      [=] { check(copy(d, h, st), "copy"); }));
  check(st.synchronize(), "stream::synchronize");
  expect_rows(read_device(raw_dev, bytes), pitch, pattern, pitch, s, poison, "2D H2D");
  std::memset(raw_host, poison, bytes);
  rows.push_back(bandwidth(
      name_of(s, "D2H"), "GB/s", row_bytes * height, opt, st, start, stop,
      [=] {
        check(cudaMemcpy2DAsync(raw_host, pitch, raw_dev, pitch, row_bytes, height, cudaMemcpyDeviceToHost, raw_stream),
              "cudaMemcpy2DAsync");
      },
      [=] { check(copy(h, d, st), "copy"); }));
  check(st.synchronize(), "stream::synchronize");
  expect_rows(std::vector<unsigned char>(raw_host, raw_host + bytes), pitch, pattern, pitch, s, poison, "2D D2H");
}

// A kernel that reads one pitched array and writes another, written twice: through pitched_span's
// v(row, col), and with the pitched pointer arithmetic a user would write by hand.
__global__ void scale_views(pitched_span<const float, device> in, pitched_span<float, device> out) {
  for (std::size_t r = blockIdx.y; r < in.height(); r += gridDim.y)
    for (std::size_t c = blockIdx.x * blockDim.x + threadIdx.x; c < in.width(); c += gridDim.x * blockDim.x)
      out(r, c) = 2.0f * in(r, c);
}
__global__ void scale_raw(const char* in, std::size_t in_pitch, char* out, std::size_t out_pitch, std::size_t width,
                          std::size_t height) {
  for (std::size_t r = blockIdx.y; r < height; r += gridDim.y)
    for (std::size_t c = blockIdx.x * blockDim.x + threadIdx.x; c < width; c += gridDim.x * blockDim.x)
      reinterpret_cast<float*>(out + r * out_pitch)[c] = 2.0f * reinterpret_cast<const float*>(in + r * in_pitch)[c];
}

void kernel_row(std::vector<row>& rows, const options& opt, stream_ref st, const event& start, const event& stop) {
  const std::size_t width = 16368, height = std::max<std::size_t>(1, opt.bytes / (16384 * sizeof(float)));
  auto in = take(device_pitched_buffer<float>::allocate(width, height), "pitched_buffer::allocate");
  auto out = take(device_pitched_buffer<float>::allocate(width, height), "pitched_buffer::allocate");
  std::vector<float> values(width * height);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 1000);
  check(copy(in, span(values)), "copy");
  check(fill_bytes(out, 0), "fill_bytes");
  const pitched_span<const float, device> iv = in.view();
  const pitched_span<float, device> ov = out.view();
  const dim3 grid(static_cast<unsigned>((width + 255) / 256),
                  static_cast<unsigned>(std::min<std::size_t>(height, 2048)));
  const cudaStream_t raw_stream = st.get();
  rows.push_back(bandwidth(
      "kernel over " + std::to_string(height) + " x " + std::to_string(width) + " floats, v(r, c) against raw",
      "GB/s (read + written)", 2 * width * height * sizeof(float), opt, st, start, stop,
      [=] {
        scale_raw<<<grid, 256, 0, raw_stream>>>(reinterpret_cast<const char*>(iv.data().get()), iv.pitch_bytes(),
                                                reinterpret_cast<char*>(ov.data().get()), ov.pitch_bytes(), width,
                                                height);
        check(cudaGetLastError(), "scale_raw");
      },
      [=] {
        scale_views<<<grid, 256, 0, raw_stream>>>(iv, ov);
        check(cudaGetLastError(), "scale_views");
      }));
  rows.back().target = 0.98;
  std::vector<float> back(width * height);
  check(copy(span(back), out), "copy");
  for (std::size_t i = 0; i < back.size(); i += 997)
    if (back[i] != 2.0f * values[i]) fail("pitched kernel", "a scaled element is wrong");
}

}  // namespace

int main(int argc, char** argv) {
  bench_name = "bench_2d";
  const options opt = parse_options(argc, argv);
  if (visible_devices() == 0) return 77;
  cudaDeviceProp properties{};
  check(cudaGetDeviceProperties(&properties, 0), "cudaGetDeviceProperties");
  std::printf("bench_2d: cudamem %d.%d.%d against cudaMemcpy2DAsync on %s; %d trials per side, medians\n\n",
              CUDAMEM_VERSION_MAJOR, CUDAMEM_VERSION_MINOR, CUDAMEM_VERSION_PATCH, properties.name, opt.reps);
  // Heights scale with --bytes (default 1 GiB of destination footprint), so --quick stays small.
  const std::size_t budget = opt.bytes;
  const auto rows_for = [&](std::size_t pitch) { return std::max<std::size_t>(1, budget / pitch); };
  const auto st = take(stream::create(), "stream::create");
  const auto start = take(event::create(), "event::create");
  const auto stop = take(event::create(), "event::create");
  std::vector<row> rows;
  device_row<char>(rows, opt, {"char", 1, 65520, rows_for(65536), 65536, 65536, 0, 2.2}, st, start, stop);
  device_row<float>(rows, opt, {"float", 4, 4092, rows_for(16384), 16384, 16384, 0, 1.1}, st, start, stop);
  device_row<double>(rows, opt, {"double", 8, 128, rows_for(2048), 1024, 2048, 0, 1.1}, st, start, stop);
  device_row<float>(rows, opt, {"float", 4, 28, rows_for(512), 512, 512, 0, 1.1}, st, start, stop);
  device_row<rgb>(rows, opt, {"rgb (12 B)", 12, 1365, rows_for(16384), 16384, 16384, 0, 1.1}, st, start, stop);
  device_row<double>(rows, opt, {"double", 8, 4096, rows_for(65536), 65536, 65536, 16384, 1.1}, st, start, stop);
  device_row<float>(rows, opt, {"float", 4, 60, 256, 512, 512, 0, 0.98}, st, start, stop);
  device_row<char>(rows, opt, {"char", 1, 1001, 4096, 1024, 1536, 0, 0.98}, st, start, stop);
  kernel_row(rows, opt, st, start, stop);
  host_cost_2d(rows, opt, st);
  const shape host_shapes[] = {
      {"char", 1, 65520, rows_for(65536) / 4, 65536, 65536, 0, 0.99},
      {"char", 1, 1000, rows_for(1024) / 4, 1024, 1024, 0, 0.99},
      {"char", 1, 64, rows_for(128) / 16, 128, 128, 0, 0.99},
  };
  for (const shape& s : host_shapes) host_rows(rows, opt, s, st, start, stop);
  report(rows, opt, properties.name);
  return 0;
}
