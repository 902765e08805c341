// SPDX-License-Identifier: MIT
// libFuzzer harness: the checks of the transfer engine (detail/transfer.hpp) against a model
// written out here, in 128-bit arithmetic. Operands are 1D or 2D (width, height, pitch) over one
// heap arena, so that they may overlap, be null, have a pitch shorter than a row, or, with made-up
// addresses and huge extents, overflow std::size_t or the address space. Overlap is decided by
// brute force: a byte map of the dst rows where the two footprints are small, else every pair of
// rows where there are few. Every copy and fill the engine accepts over the arena is run (run_sync,
// which hands pageable memory to the host) and compared byte for byte with the model's;
// AddressSanitizer reports any access outside the arena. Pageable host memory on both sides keeps
// CUDA out of it: no device is needed.
#include <cudamem/detail/transfer.hpp>

#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

namespace {
using namespace cudamem;
using detail::kind_id;
using detail::operand;
using wide = unsigned __int128;

#define EXPECT(condition)                                                                                 \
  do {                                                                                                    \
    if (!(condition)) {                                                                                   \
      std::fprintf(stderr, "transfer fuzzer: the model disagrees: %s (line %d)\n", #condition, __LINE__); \
      std::abort();                                                                                       \
    }                                                                                                     \
  } while (0)

constexpr wide size_max = std::numeric_limits<std::size_t>::max();
constexpr wide address_max = std::numeric_limits<std::uintptr_t>::max();

struct arena {
  std::size_t size;
  std::unique_ptr<unsigned char[]> bytes;
};

// A size: mostly small, sometimes extreme.
std::size_t pick(FuzzedDataProvider& in, std::size_t small) {
  switch (in.ConsumeIntegralInRange<int>(0, 5)) {
    case 0: return std::numeric_limits<std::size_t>::max() - in.ConsumeIntegralInRange<std::size_t>(0, 2);
    case 1: return in.ConsumeIntegral<std::size_t>();
    case 2:
      return (std::size_t{1} << in.ConsumeIntegralInRange<int>(0, 63)) + in.ConsumeIntegralInRange<std::size_t>(0, 1);
    default: return in.ConsumeIntegralInRange<std::size_t>(0, small);
  }
}

operand make_operand(FuzzedDataProvider& in, const arena& a) {
  operand o;
  o.width = pick(in, 24);
  o.height = in.ConsumeBool() ? 1 : pick(in, 12);
  o.pitch = in.ConsumeIntegralInRange<int>(0, 3) == 0 ? 0 : pick(in, 48);  // 0: a 1D span at one row
  o.kind = kind_id::host;
  o.device = device_id::host();
  switch (in.ConsumeIntegralInRange<int>(0, 5)) {
    case 0: o.addr = nullptr; break;
    case 1:
      o.addr = reinterpret_cast<const void*>(static_cast<std::uintptr_t>(pick(in, 1 << 20)) | 1);
      break;  // made up
    default: o.addr = a.bytes.get() + in.ConsumeIntegralInRange<std::size_t>(0, a.size); break;
  }
  return o;
}

// The model of check_operand: the operand's footprint, or the errc the engine must give. The pitch rule
// (docs/pitched.md): every row fits its pitch, at every height; pitch 0 at one row is a 1D span.
struct model_region {
  bool ok = false;
  errc code = errc::invalid_argument;
  bool empty = false;
  wide addr = 0, row_bytes = 0, rows = 0, pitch = 0, footprint = 0;
};

model_region model_operand(const operand& o, std::size_t elem_size) {
  model_region m;
  m.addr = reinterpret_cast<std::uintptr_t>(o.addr);
  m.row_bytes = wide{o.width} * elem_size;
  if (m.row_bytes > size_max) return m.code = errc::size_overflow, m;
  m.rows = o.height;
  m.pitch = o.height > 1 ? o.pitch : m.row_bytes;
  m.ok = true;
  if (m.row_bytes == 0 || m.rows == 0) return m.empty = true, m;
  const bool one_dimensional = m.rows == 1 && o.pitch == 0;
  if (m.addr == 0 || (!one_dimensional && o.pitch < m.row_bytes))
    return m.ok = false, m.code = errc::invalid_argument, m;
  m.footprint = m.pitch * (m.rows - 1) + m.row_bytes;
  if (m.footprint > size_max || m.addr + m.footprint > address_max)
    return m.ok = false, m.code = errc::size_overflow, m;
  return m;
}

bool inside(const model_region& m, const arena& a) {
  const wide begin = reinterpret_cast<std::uintptr_t>(a.bytes.get());
  return m.empty || (m.addr >= begin && m.addr + m.footprint <= begin + a.size);
}

// A one-row operand takes the shape of a 2D one of as many elements (read as contiguous rows); one with a
// pitch (2D) must first pass its own checks. Returns those checks' failure, if any.
model_region model_reshape(operand& flat, const operand& shaped, std::size_t elem_size) {
  if (flat.height == 1 && shaped.height > 1 && wide{shaped.width} * shaped.height == flat.width &&
      wide{shaped.width} * elem_size <= static_cast<wide>(std::numeric_limits<std::ptrdiff_t>::max())) {
    if (flat.pitch != 0) {
      const model_region checked = model_operand(flat, elem_size);
      if (!checked.ok) return checked;
    }
    flat = {flat.addr, shaped.width, shaped.height, shaped.width * elem_size, flat.device, flat.kind};
  }
  model_region fine;
  fine.ok = true;
  return fine;
}

// Whether a byte of a dst row is also a byte of a src row: a byte map over both footprints where they span at most
// 64 KiB, else every pair of rows where there are at most 128 of each; nothing where neither is affordable.
std::optional<bool> model_overlap(const model_region& d, const model_region& s) {
  const wide low = d.addr < s.addr ? d.addr : s.addr;
  const wide high = d.addr + d.footprint > s.addr + s.footprint ? d.addr + d.footprint : s.addr + s.footprint;
  if (high - low <= (wide{1} << 16)) {
    std::vector<bool> written(static_cast<std::size_t>(high - low));
    for (wide row = 0; row < d.rows; ++row)
      for (wide b = 0; b < d.row_bytes; ++b) written[static_cast<std::size_t>(d.addr - low + row * d.pitch + b)] = true;
    for (wide row = 0; row < s.rows; ++row)
      for (wide b = 0; b < s.row_bytes; ++b)
        if (written[static_cast<std::size_t>(s.addr - low + row * s.pitch + b)]) return true;
    return false;
  }
  if (d.rows <= 128 && s.rows <= 128) {
    for (wide i = 0; i < d.rows; ++i)
      for (wide j = 0; j < s.rows; ++j) {
        const wide at = d.addr + i * d.pitch, from = s.addr + j * s.pitch;
        if (at < from + s.row_bytes && from < at + d.row_bytes) return true;
      }
    return false;
  }
  return std::nullopt;
}

void check_copy(FuzzedDataProvider& in, const arena& a, std::size_t elem_size) {
  const operand dst = make_operand(in, a);
  // The source is its own operand, or the destination's shape a few bytes on (overlap, mostly), or near the
  // destination with a pitch close to its own (interleaved rows, equal or not).
  operand src = dst;
  switch (in.ConsumeIntegralInRange<int>(0, 2)) {
    case 0: src = make_operand(in, a); break;
    case 1:
      src.addr = reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(dst.addr) +
                                               in.ConsumeIntegralInRange<int>(0, 3));
      break;
    default:
      src.addr = reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(dst.addr) +
                                               static_cast<std::uintptr_t>(in.ConsumeIntegralInRange<int>(-64, 64)));
      if (in.ConsumeBool()) src.pitch = dst.pitch + static_cast<std::size_t>(in.ConsumeIntegralInRange<int>(-8, 8));
      break;
  }
  detail::plan p;
  const status planned = detail::plan_copy(p, dst, src, elem_size, cudaMemcpyHostToHost, "copy");

  operand d = dst, s = src;
  for (auto [flat, shaped] : {std::pair{&d, &s}, std::pair{&s, &d}}) {
    const model_region reshaped = model_reshape(*flat, *shaped, elem_size);
    if (!reshaped.ok) {
      EXPECT(!planned && planned.error() == reshaped.code);
      return;
    }
  }
  if (d.width != s.width || d.height != s.height) {
    EXPECT(!planned && planned.error() == errc::extents_mismatch);
    return;
  }
  const model_region md = model_operand(d, elem_size);
  if (!md.ok) {
    EXPECT(!planned && planned.error() == md.code);
    return;
  }
  const model_region ms = model_operand(s, elem_size);
  if (!ms.ok) {
    EXPECT(!planned && planned.error() == ms.code);
    return;
  }
  const std::optional<bool> shared = md.empty ? std::optional<bool>(false) : model_overlap(md, ms);
  if (shared.value_or(false)) {
    EXPECT(!planned && planned.error() == errc::overlap);
    return;
  }
  if (!shared && !planned) {  // too large for the model to decide: overlap is the only refusal left
    EXPECT(planned.error() == errc::overlap);
    return;
  }
  EXPECT(planned.has_value());
  EXPECT(p.dst.empty() == md.empty && p.src.empty() == ms.empty);
  if (md.empty) return;
  EXPECT(p.dst.footprint == md.footprint && p.src.footprint == ms.footprint);
  EXPECT(p.dst.row_bytes == md.row_bytes && p.dst.rows == md.rows);
  if (!inside(md, a) || !inside(ms, a)) return;  // made-up addresses: checked, never run

  // Run it, and compare with the model's copy of the same arena.
  std::vector<unsigned char> expected(a.bytes.get(), a.bytes.get() + a.size);
  const auto offset = [&](wide addr) {
    return static_cast<std::size_t>(addr - reinterpret_cast<std::uintptr_t>(a.bytes.get()));
  };
  for (wide row = 0; row < md.rows; ++row)
    std::memcpy(expected.data() + offset(md.addr + row * md.pitch), a.bytes.get() + offset(ms.addr + row * ms.pitch),
                static_cast<std::size_t>(md.row_bytes));
  EXPECT(detail::run_sync(p, "transfer fuzzer"));
  EXPECT(std::memcmp(expected.data(), a.bytes.get(), a.size) == 0);
}

void check_fill(FuzzedDataProvider& in, const arena& a, std::size_t elem_size) {
  const operand dst = make_operand(in, a);
  const unsigned char value = in.ConsumeIntegral<unsigned char>();
  detail::plan p;
  const status planned = detail::plan_fill(p, dst, elem_size, value, "fill_bytes");
  const model_region md = model_operand(dst, elem_size);
  if (!md.ok) {
    EXPECT(!planned && planned.error() == md.code);
    return;
  }
  EXPECT(planned.has_value());
  EXPECT(p.dst.empty() == md.empty);
  if (md.empty) return;
  EXPECT(p.dst.footprint == md.footprint);
  if (!inside(md, a)) return;
  std::vector<unsigned char> expected(a.bytes.get(), a.bytes.get() + a.size);
  const std::size_t first = static_cast<std::size_t>(md.addr - reinterpret_cast<std::uintptr_t>(a.bytes.get()));
  for (wide row = 0; row < md.rows; ++row)
    std::memset(expected.data() + first + static_cast<std::size_t>(row * md.pitch), value,
                static_cast<std::size_t>(md.row_bytes));
  EXPECT(detail::run_sync(p, "transfer fuzzer"));
  EXPECT(std::memcmp(expected.data(), a.bytes.get(), a.size) == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  arena a{in.ConsumeIntegralInRange<std::size_t>(1, 512), nullptr};
  a.bytes.reset(new unsigned char[a.size]);
  for (std::size_t i = 0; i < a.size; ++i) a.bytes[i] = static_cast<unsigned char>(i * 7 + 1);
  static constexpr std::size_t element_sizes[] = {1, 2, 3, 4, 8, 12, 16, 24};
  const std::size_t elem_size = element_sizes[in.ConsumeIntegralInRange<std::size_t>(0, 7)];
  for (int step = 0; step < 4 && in.remaining_bytes() > 0; ++step) {
    if (in.ConsumeBool()) check_copy(in, a, elem_size);
    else check_fill(in, a, elem_size);
  }
  return 0;
}
