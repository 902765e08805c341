// SPDX-License-Identifier: MIT
// image2d: blur a grayscale image on the GPU with pitched 2D memory. The image lives in rows padded
// to the pitch each side wants (device: the device's row alignment; pinned host: 512 bytes); the
// copies move only the pixels, and the kernel indexes pixels as image(row, column).
#include <cudamem/cudamem.hpp>

#include <cstdint>
#include <cstdio>

// A 3 x 3 box blur; pixels at the border average the neighbours that exist.
__global__ void box_blur(cudamem::device_pitched_span<std::uint8_t> out,
                         cudamem::device_pitched_span<const std::uint8_t> in) {
  const std::size_t col = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  const std::size_t row = blockIdx.y * std::size_t{blockDim.y} + threadIdx.y;
  if (row >= in.height() || col >= in.width()) return;
  unsigned sum = 0, count = 0;
  for (std::size_t r = row > 0 ? row - 1 : 0; r <= row + 1 && r < in.height(); ++r)
    for (std::size_t c = col > 0 ? col - 1 : 0; c <= col + 1 && c < in.width(); ++c) {
      sum += in(r, c);
      ++count;
    }
  out(row, col) = static_cast<std::uint8_t>(sum / count);
}

namespace {
int report(const cudamem::error& e) {
  std::fprintf(stderr, "image2d: %s\n", e.message());
  return 1;
}

// The same blur on the host, for checking.
std::uint8_t blurred_at(cudamem::pinned_pitched_span<const std::uint8_t> in, std::size_t row, std::size_t col) {
  unsigned sum = 0, count = 0;
  for (std::size_t r = row > 0 ? row - 1 : 0; r <= row + 1 && r < in.height(); ++r)
    for (std::size_t c = col > 0 ? col - 1 : 0; c <= col + 1 && c < in.width(); ++c) {
      sum += in(r, c);
      ++count;
    }
  return static_cast<std::uint8_t>(sum / count);
}
}  // namespace

int main() {
  using namespace cudamem;
  constexpr std::size_t width = 641, height = 479;  // odd sizes: rows are padded on both sides

  if (auto devices = device_count(); !devices || *devices == 0) {
    std::fprintf(stderr, "image2d: no CUDA driver or no GPU (%s)\n",
                 devices ? "no device found" : devices.error().message());
    return 1;
  }
  auto s = stream::create();
  if (!s) return report(s.error());
  // Page-locked host rows, so that the copies can be ordered on the stream.
  auto host_in = pinned_pitched_buffer<std::uint8_t>::allocate(width, height);
  auto host_out = pinned_pitched_buffer<std::uint8_t>::allocate(width, height);
  auto device_in = device_pitched_buffer<std::uint8_t>::allocate(width, height, *s);
  auto device_out = device_pitched_buffer<std::uint8_t>::allocate(width, height, *s);
  if (!host_in) return report(host_in.error());
  if (!host_out) return report(host_out.error());
  if (!device_in) return report(device_in.error());
  if (!device_out) return report(device_out.error());
  std::printf("image2d: %zu x %zu pixels; rows %zu bytes apart on the host, %zu on the device\n", width, height,
              host_in->pitch_bytes(), device_in->pitch_bytes());

  // A test pattern: diagonal stripes.
  const auto pixels = host_in->view();
  for (std::size_t r = 0; r < height; ++r)
    for (std::size_t c = 0; c < width; ++c) pixels(r, c) = static_cast<std::uint8_t>((r + c) % 32 < 16 ? 240 : 10);

  if (auto ok = copy(*device_in, *host_in, *s); !ok) return report(ok.error());  // one cudaMemcpy2DAsync
  const dim3 threads(32, 8);
  const dim3 blocks(static_cast<unsigned>((width + threads.x - 1) / threads.x),
                    static_cast<unsigned>((height + threads.y - 1) / threads.y));
  box_blur<<<blocks, threads, 0, s->get()>>>(*device_out, *device_in);
  if (auto ok = check_launch("box_blur"); !ok) return report(ok.error());
  if (auto ok = copy(*host_out, *device_out, *s); !ok) return report(ok.error());
  if (auto ok = s->synchronize(); !ok) return report(ok.error());

  const pinned_pitched_span<const std::uint8_t> in = *host_in;
  const pinned_pitched_span<const std::uint8_t> out = *host_out;
  for (std::size_t r = 0; r < height; ++r)
    for (std::size_t c = 0; c < width; ++c)
      if (out(r, c) != blurred_at(in, r, c)) {
        std::fprintf(stderr, "image2d: wrong pixel at row %zu, column %zu\n", r, c);
        return 1;
      }
  std::printf("image2d: blurred %zu pixels, all correct\n", width * height);
  return 0;
}
