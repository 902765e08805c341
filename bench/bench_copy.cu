// SPDX-License-Identifier: MIT
// bench_copy: cudamem's copies and fills against the raw CUDA runtime calls, measured in the same
// run on the same stream and the same memory. Prints a table (and JSON with --json FILE):
//   host cost  time to enqueue a 4-byte stream-ordered copy or fill, ns per call (lower is better)
//   bandwidth  1 GiB stream-ordered copies and fills timed with events, GB/s (higher is better)
//   pageable   synchronous copy from pageable host memory, GB/s, for context (no target)
//   sync       synchronous copies and fills (no stream) against cudaMemcpy / cudaMemset: time per
//              4-byte call (lower is better) and 1 GiB bandwidth (higher is better). Where
//              cudaMemcpy returns before the bytes have landed (pageable H2D, D2D, memset), the raw
//              side also synchronizes, since cudamem's synchronous forms complete before they
//              return; a context row shows the bare call too.
// Every row warms up first, then runs raw and cudamem trials interleaved (A B A B ...) so that
// clock and thermal drift falls on both alike, and compares the medians. See bench/README.md.
// Exits 77 when there is no CUDA device.

#include <cudamem/cudamem.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace {

// ---------------------------------------------------------------------------------------------
// Options

struct options {
  std::size_t bytes = std::size_t{1} << 30;           // bandwidth rows
  std::size_t pageable_bytes = std::size_t{256} << 20;  // the synchronous pageable row
  int reps = 21;      // timed trials per side, bandwidth rows (odd: the median is one trial)
  int batches = 51;   // timed batches per side, host-cost rows
  int calls = 1000;   // enqueues per batch; the stream is synchronized after each batch
  int warmups = 3;    // untimed trials per side before the timed ones
  const char* json_path = nullptr;
};

void print_usage(std::FILE* out) {
  std::fprintf(out,
               "usage: bench_copy [--bytes N] [--pageable-bytes N] [--reps N] [--batches N] [--calls N]\n"
               "                  [--warmups N] [--quick] [--json FILE]\n"
               "  --bytes N           size of the bandwidth rows (default 1G = 1<<30; suffixes K, M, G are binary)\n"
               "  --pageable-bytes N  size of the pageable synchronous row (default 256M)\n"
               "  --reps N            timed trials per side of each bandwidth row (default 21)\n"
               "  --batches N         timed batches per side of each host-cost row (default 51)\n"
               "  --calls N           calls per host-cost batch (default 1000)\n"
               "  --warmups N         untimed trials per side before timing (default 3)\n"
               "  --quick             small sizes and few trials, for a smoke run (explicit options win)\n"
               "  --json FILE         also write the rows as a JSON array to FILE\n");
}

[[noreturn]] void usage_error(const char* problem, const char* arg) {
  std::fprintf(stderr, "bench_copy: %s: %s\n", problem, arg);
  print_usage(stderr);
  std::exit(2);
}

// A byte count: digits with an optional binary suffix K, M or G.
std::size_t parse_size(const char* text) {
  if (*text < '0' || *text > '9') usage_error("not a size", text);  // strtoull would take "-1"
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text, &end, 10);
  unsigned shift = 0;
  switch (*end) {
    case '\0': break;
    case 'K':
    case 'k':
      shift = 10;
      ++end;
      break;
    case 'M':
    case 'm':
      shift = 20;
      ++end;
      break;
    case 'G':
    case 'g':
      shift = 30;
      ++end;
      break;
    default: usage_error("not a size", text);
  }
  if (*end != '\0' || value == 0 || value > (~0ull >> shift)) usage_error("not a size", text);
  return static_cast<std::size_t>(value << shift);
}

int parse_count(const char* text) {
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || value < 1 || value > 1000000) usage_error("not a count from 1 to 1000000", text);
  return static_cast<int>(value);
}

options parse_options(int argc, char** argv) {
  // Explicit options override --quick wherever they stand on the command line.
  std::optional<std::size_t> bytes, pageable_bytes;
  std::optional<int> reps, batches, calls, warmups;
  bool quick = false;
  options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) usage_error("missing the value of", argv[i]);
      return argv[++i];
    };
    if (arg == "--bytes") bytes = parse_size(value());
    else if (arg == "--pageable-bytes") pageable_bytes = parse_size(value());
    else if (arg == "--reps") reps = parse_count(value());
    else if (arg == "--batches") batches = parse_count(value());
    else if (arg == "--calls") calls = parse_count(value());
    else if (arg == "--warmups") warmups = parse_count(value());
    else if (arg == "--quick") quick = true;
    else if (arg == "--json") opt.json_path = value();
    else if (arg == "--help" || arg == "-h") {
      print_usage(stdout);
      std::exit(0);
    } else {
      usage_error("unknown option", argv[i]);
    }
  }
  if (quick) {
    opt.bytes = opt.pageable_bytes = std::size_t{16} << 20;
    opt.reps = 5;
    opt.batches = 5;
    opt.calls = 100;
    opt.warmups = 1;
  }
  opt.bytes = bytes.value_or(opt.bytes);
  opt.pageable_bytes = pageable_bytes.value_or(opt.pageable_bytes);
  opt.reps = reps.value_or(opt.reps);
  opt.batches = batches.value_or(opt.batches);
  opt.calls = calls.value_or(opt.calls);
  opt.warmups = warmups.value_or(opt.warmups);
  return opt;
}

// ---------------------------------------------------------------------------------------------
// Checks. Both sides of every row check what they call, so that both do the same work: the raw
// side compares the cudaError_t, the cudamem side tests the status. The failure path is cold and
// out of line, so that it costs the timed loops one predictable branch each.

[[noreturn, gnu::cold, gnu::noinline]] void fail(const char* what, const char* why) {
  std::fprintf(stderr, "bench_copy: %s: %s\n", what, why);
  std::exit(1);
}

inline void check(cudaError_t code, const char* what) {
  if (code != cudaSuccess) [[unlikely]]
    fail(what, cudaGetErrorString(code));
}

inline void check(const cudamem::status& status, const char* what) {
  if (!status) [[unlikely]]
    fail(what, status.error().message());
}

template <class T>
T take(cudamem::result<T>&& made, const char* what) {
  if (!made) fail(what, made.error().message());
  return std::move(*made);
}

// ---------------------------------------------------------------------------------------------
// Statistics and rows

struct stats {
  double median = 0, q1 = 0, q3 = 0;
};

// Quartiles by linear interpolation between order statistics.
stats summarize(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  auto quantile = [&](double q) {
    const double position = q * static_cast<double>(samples.size() - 1);
    const auto below = static_cast<std::size_t>(position);
    const std::size_t above = std::min(below + 1, samples.size() - 1);
    const double fraction = position - static_cast<double>(below);
    return samples[below] + fraction * (samples[above] - samples[below]);
  };
  return {quantile(0.5), quantile(0.25), quantile(0.75)};
}

enum class better { lower, higher };

struct row {
  std::string name;
  std::string unit;
  stats raw;
  stats lib;
  better direction = better::lower;
  std::optional<double> target;  // on the ratio cudamem / raw; none for context rows

  double ratio() const { return lib.median / raw.median; }
  bool passed() const {
    if (!target) return true;
    return direction == better::lower ? ratio() <= *target : ratio() >= *target;
  }
  // Half the interquartile range relative to the median, the larger of the two sides: a ratio
  // this close to its target is within the noise of the run.
  double spread() const {
    auto relative = [](const stats& s) { return (s.q3 - s.q1) / 2 / s.median; };
    return std::max(relative(raw), relative(lib));
  }
};

// Runs `warmups` untimed trials of each side, then `count` timed trials interleaved raw, cudamem,
// raw, cudamem, ... Each trial returns the value the row reports.
template <class RawTrial, class LibTrial>
std::pair<stats, stats> interleaved(int warmups, int count, RawTrial&& raw_trial, LibTrial&& lib_trial) {
  for (int i = 0; i < warmups; ++i) {
    (void)raw_trial();
    (void)lib_trial();
  }
  std::vector<double> raw, lib;
  raw.reserve(static_cast<std::size_t>(count));
  lib.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    raw.push_back(raw_trial());
    lib.push_back(lib_trial());
  }
  return {summarize(std::move(raw)), summarize(std::move(lib))};
}

using wall_clock = std::chrono::steady_clock;

double seconds_between(wall_clock::time_point start, wall_clock::time_point stop) {
  return std::chrono::duration<double>(stop - start).count();
}

// Host cost of one enqueue: the time to issue `calls` calls, divided by `calls`. The stream is
// drained after every batch (untimed) so that its queue never fills and blocks the host.
template <class RawCall, class LibCall>
row host_cost(std::string name, const options& opt, cudamem::stream_ref s, RawCall raw_call, LibCall lib_call) {
  auto batch = [&](auto& call) {
    const auto start = wall_clock::now();
    for (int i = 0; i < opt.calls; ++i) call();
    const auto stop = wall_clock::now();
    check(s.synchronize(), "stream::synchronize");
    return seconds_between(start, stop) * 1e9 / opt.calls;
  };
  auto [raw, lib] =
      interleaved(opt.warmups, opt.batches, [&] { return batch(raw_call); }, [&] { return batch(lib_call); });
  return {std::move(name), "ns/call", raw, lib, better::lower, 1.03};
}

// Device bandwidth of one stream-ordered operation of `bytes`, timed by events around it on `s`.
template <class RawOp, class LibOp>
row bandwidth(std::string name, std::string unit, std::size_t bytes, const options& opt, cudamem::stream_ref s,
              const cudamem::event& start, const cudamem::event& stop, RawOp raw_op, LibOp lib_op) {
  auto trial = [&](auto& op) {
    check(start.record(s), "event::record");
    op();
    check(stop.record(s), "event::record");
    check(stop.synchronize(), "event::synchronize");
    const float ms = take(cudamem::event::elapsed_ms(start, stop), "event::elapsed_ms");
    return static_cast<double>(bytes) / (static_cast<double>(ms) * 1e-3) / 1e9;
  };
  auto [raw, lib] = interleaved(opt.warmups, opt.reps, [&] { return trial(raw_op); }, [&] { return trial(lib_op); });
  return {std::move(name), std::move(unit), raw, lib, better::higher, 0.99};
}

// Bandwidth of a synchronous operation of `bytes`, timed on the host around the call.
template <class RawOp, class LibOp>
row synchronous_bandwidth(std::string name, std::string unit, std::size_t bytes, const options& opt, RawOp raw_op,
                          LibOp lib_op, std::optional<double> target = std::nullopt) {
  auto trial = [&](auto& op) {
    const auto start = wall_clock::now();
    op();
    const auto stop = wall_clock::now();
    return static_cast<double>(bytes) / seconds_between(start, stop) / 1e9;
  };
  auto [raw, lib] = interleaved(opt.warmups, opt.reps, [&] { return trial(raw_op); }, [&] { return trial(lib_op); });
  return {std::move(name), std::move(unit), raw, lib, better::higher, target};
}

// Time per synchronous call: a batch of calls timed on the host, divided by the count.
template <class RawCall, class LibCall>
row sync_latency(std::string name, const options& opt, std::optional<double> target, RawCall raw_call,
                 LibCall lib_call) {
  const int calls = std::max(1, opt.calls / 10);
  auto batch = [&](auto& call) {
    const auto start = wall_clock::now();
    for (int i = 0; i < calls; ++i) call();
    return seconds_between(start, wall_clock::now()) * 1e9 / calls;
  };
  auto [raw, lib] =
      interleaved(opt.warmups, opt.batches, [&] { return batch(raw_call); }, [&] { return batch(lib_call); });
  return {std::move(name), "ns/call", raw, lib, better::lower, target};
}

// ---------------------------------------------------------------------------------------------
// Memory set-up

// Writes a pseudo-random byte pattern (splitmix64), so that no copy is timed on
// zeros or on memory that was never touched.
void write_pattern(std::byte* first, std::size_t bytes, std::uint64_t seed) {
  std::uint64_t state = seed;
  auto next = [&] {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  std::size_t done = 0;
  for (; done + sizeof(std::uint64_t) <= bytes; done += sizeof(std::uint64_t)) {
    const std::uint64_t word = next();
    std::memcpy(first + done, &word, sizeof word);
  }
  if (done < bytes) {
    const std::uint64_t word = next();
    std::memcpy(first + done, &word, bytes - done);
  }
}

// Fails the run when the two host buffers differ: a benchmark of a copy that copied nothing is void.
void expect_equal(const std::byte* got, const std::byte* want, std::size_t bytes, const char* what) {
  if (std::memcmp(got, want, bytes) != 0) fail(what, "the copied bytes differ from the source");
}

// ---------------------------------------------------------------------------------------------
// Output

std::string format_ratio_target(const row& r) {
  if (!r.target) return "context";
  char text[32];
  std::snprintf(text, sizeof text, "%s %.2f", r.direction == better::lower ? "<=" : ">=", *r.target);
  return text;
}

void print_table(const std::vector<row>& rows) {
  std::printf("%-34s %-20s %12s %12s %7s %8s %-9s %s\n", "measurement", "unit", "raw", "cudamem", "ratio", "spread",
              "target", "result");
  for (const row& r : rows) {
    std::printf("%-34s %-20s %12.2f %12.2f %7.3f %7.1f%% %-9s %s\n", r.name.c_str(), r.unit.c_str(), r.raw.median,
                r.lib.median, r.ratio(), 100 * r.spread(), format_ratio_target(r).c_str(),
                r.target ? (r.passed() ? "PASS" : "FAIL") : "-");
  }
}

void print_summary(const std::vector<row>& rows) {
  int missed = 0, targets = 0;
  for (const row& r : rows) {
    if (!r.target) continue;
    ++targets;
    if (!r.passed()) ++missed;
    std::printf("%s ratio %.3f (target %s): %s\n", r.name.c_str(), r.ratio(), format_ratio_target(r).c_str(),
                r.passed() ? "PASS" : "FAIL");
  }
  std::printf("%d of %d targets met\n", targets - missed, targets);
}

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;  // none expected; never emit raw controls
    out += c;
  }
  return out + "\"";
}

void write_json(const char* path, const std::vector<row>& rows, const std::string& device_name) {
  std::FILE* out = std::fopen(path, "w");
  if (out == nullptr) fail(path, std::strerror(errno));
  std::fprintf(out, "[\n");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const row& r = rows[i];
    std::fprintf(out,
                 "  {\"name\": %s, \"unit\": %s, \"raw\": %.6g, \"cudamem\": %.6g, \"ratio\": %.6g, "
                 "\"better\": \"%s\", \"target\": ",
                 json_string(r.name).c_str(), json_string(r.unit).c_str(), r.raw.median, r.lib.median, r.ratio(),
                 r.direction == better::lower ? "lower" : "higher");
    if (r.target) std::fprintf(out, "%.6g, \"pass\": %s", *r.target, r.passed() ? "true" : "false");
    else std::fprintf(out, "null, \"pass\": null");
    std::fprintf(out,
                 ", \"raw_q1\": %.6g, \"raw_q3\": %.6g, \"cudamem_q1\": %.6g, \"cudamem_q3\": %.6g, "
                 "\"device\": %s}%s\n",
                 r.raw.q1, r.raw.q3, r.lib.q1, r.lib.q3, json_string(device_name).c_str(),
                 i + 1 < rows.size() ? "," : "");
  }
  std::fprintf(out, "]\n");
  if (std::fclose(out) != 0) fail(path, "write failed");
}

std::string size_text(std::size_t bytes) {
  char text[32];
  if (bytes % (std::size_t{1} << 30) == 0) std::snprintf(text, sizeof text, "%zu GiB", bytes >> 30);
  else if (bytes % (std::size_t{1} << 20) == 0) std::snprintf(text, sizeof text, "%zu MiB", bytes >> 20);
  else std::snprintf(text, sizeof text, "%zu B", bytes);
  return text;
}

// ---------------------------------------------------------------------------------------------
// The measurements

// a. Host cost of enqueuing a 4-byte copy or fill. dst and src are one-float spans; the raw side
// passes the same addresses and the same stream.
void host_cost_rows(std::vector<row>& rows, const options& opt, cudamem::stream_ref s) {
  using namespace cudamem;
  auto dst_owner = take(device_buffer<float>::allocate(1), "device_buffer::allocate");
  auto src_owner = take(device_buffer<float>::allocate(1), "device_buffer::allocate");
  auto pinned_owner = take(pinned_buffer<float>::allocate(1), "pinned_buffer::allocate");
  pinned_owner[0] = 1.5f;
  check(cudamem::fill_bytes(dst_owner, 0x3c), "fill_bytes");
  check(cudamem::copy(src_owner, pinned_owner), "copy");

  const device_span<float> dst = dst_owner.view();
  const device_span<float> src = src_owner.view();
  const pinned_span<float> pinned_side = pinned_owner.view();
  float* const raw_dst = dst.data().get();
  float* const raw_src = src.data().get();
  float* const raw_pinned = pinned_side.data().get();
  const cudaStream_t raw_stream = s.get();
  constexpr std::size_t bytes = sizeof(float);

  rows.push_back(host_cost(
      "host cost: copy D2D 4 B", opt, s,
      [=] { check(cudaMemcpyAsync(raw_dst, raw_src, bytes, cudaMemcpyDeviceToDevice, raw_stream), "cudaMemcpyAsync"); },
      [=] { check(cudamem::copy(dst, src, s), "cudamem::copy"); }));
  rows.push_back(host_cost(
      "host cost: copy H2D 4 B (pinned)", opt, s,
      [=] {
        check(cudaMemcpyAsync(raw_dst, raw_pinned, bytes, cudaMemcpyHostToDevice, raw_stream), "cudaMemcpyAsync");
      },
      [=] { check(cudamem::copy(dst, pinned_side, s), "cudamem::copy"); }));
  rows.push_back(host_cost(
      "host cost: copy D2H 4 B (pinned)", opt, s,
      [=] {
        check(cudaMemcpyAsync(raw_pinned, raw_src, bytes, cudaMemcpyDeviceToHost, raw_stream), "cudaMemcpyAsync");
      },
      [=] { check(cudamem::copy(pinned_side, src, s), "cudamem::copy"); }));
  rows.push_back(host_cost(
      "host cost: fill 4 B", opt, s, [=] { check(cudaMemsetAsync(raw_dst, 0, bytes, raw_stream), "cudaMemsetAsync"); },
      [=] { check(cudamem::fill_bytes(dst, 0, s), "cudamem::fill_bytes"); }));
  check(s.synchronize(), "stream::synchronize");
}

// b. Bandwidth of large stream-ordered copies and fills, and c. the synchronous pageable copy.
void bandwidth_rows(std::vector<row>& rows, const options& opt, cudamem::stream_ref s) {
  using namespace cudamem;
  const std::size_t n = opt.bytes;
  auto host_src = take(pinned_buffer<std::byte>::allocate(n), "pinned_buffer::allocate");
  auto host_dst = take(pinned_buffer<std::byte>::allocate(n), "pinned_buffer::allocate");
  auto device_a = take(device_buffer<std::byte>::allocate(n), "device_buffer::allocate");
  auto device_b = take(device_buffer<std::byte>::allocate(n), "device_buffer::allocate");
  const auto start = take(event::create(), "event::create");
  const auto stop = take(event::create(), "event::create");

  // Touch everything once: the sources get a pattern, the destinations something else.
  write_pattern(host_src.data().get(), n, 1);
  std::memset(host_dst.data().get(), 0xee, n);
  check(cudamem::copy(device_a, host_src), "copy");
  check(cudamem::fill_bytes(device_b, 0x11), "fill_bytes");

  std::byte* const raw_host_src = host_src.data().get();
  std::byte* const raw_host_dst = host_dst.data().get();
  std::byte* const raw_a = device_a.data().get();
  std::byte* const raw_b = device_b.data().get();
  const cudaStream_t raw_stream = s.get();
  const pinned_span<std::byte> host_src_view = host_src.view();
  const pinned_span<std::byte> host_dst_view = host_dst.view();
  const device_span<std::byte> a = device_a.view();
  const device_span<std::byte> b = device_b.view();
  const std::string size = size_text(n);

  rows.push_back(bandwidth(
      "copy H2D " + size + " (pinned)", "GB/s", n, opt, s, start, stop,
      [=] { check(cudaMemcpyAsync(raw_a, raw_host_src, n, cudaMemcpyHostToDevice, raw_stream), "cudaMemcpyAsync"); },
      [=] { check(cudamem::copy(a, host_src_view, s), "cudamem::copy"); }));
  rows.push_back(bandwidth(
      "copy D2H " + size + " (pinned)", "GB/s", n, opt, s, start, stop,
      [=] { check(cudaMemcpyAsync(raw_host_dst, raw_a, n, cudaMemcpyDeviceToHost, raw_stream), "cudaMemcpyAsync"); },
      [=] { check(cudamem::copy(host_dst_view, a, s), "cudamem::copy"); }));
  expect_equal(raw_host_dst, raw_host_src, n, "H2D then D2H");

  rows.push_back(bandwidth(
      "copy D2D " + size, "GB/s (bytes copied)", n, opt, s, start, stop,
      [=] { check(cudaMemcpyAsync(raw_b, raw_a, n, cudaMemcpyDeviceToDevice, raw_stream), "cudaMemcpyAsync"); },
      [=] { check(cudamem::copy(b, a, s), "cudamem::copy"); }));
  std::memset(raw_host_dst, 0xee, n);
  check(cudamem::copy(host_dst, device_b), "copy");
  expect_equal(raw_host_dst, raw_host_src, n, "D2D");

  constexpr unsigned char fill_value = 0x5a;
  rows.push_back(bandwidth(
      "fill " + size + " (memset)", "GB/s (bytes written)", n, opt, s, start, stop,
      [=] { check(cudaMemsetAsync(raw_b, fill_value, n, raw_stream), "cudaMemsetAsync"); },
      [=] { check(cudamem::fill_bytes(b, fill_value, s), "cudamem::fill_bytes"); }));
  check(s.synchronize(), "stream::synchronize");

  // c. Pageable host memory, synchronous copy: cudaMemcpy against cudamem::copy without a stream.
  const std::size_t pn = std::min(opt.pageable_bytes, n);
  auto pageable = take(host_buffer<std::byte>::allocate(pn), "host_buffer::allocate");
  write_pattern(pageable.data().get(), pn, 2);
  const std::byte* const raw_pageable = pageable.data().get();
  const host_span<std::byte> pageable_view = pageable.view();
  const device_span<std::byte> a_first = take(a.first(pn), "span::first");
  rows.push_back(synchronous_bandwidth(
      "copy H2D " + size_text(pn) + " (pageable, sync)", "GB/s", pn, opt,
      [=] { check(cudaMemcpy(raw_a, raw_pageable, pn, cudaMemcpyHostToDevice), "cudaMemcpy"); },
      [=] { check(cudamem::copy(a_first, pageable_view), "cudamem::copy"); }));
  check(cudamem::copy(take(host_dst_view.first(pn), "span::first"), a_first), "copy");
  expect_equal(raw_host_dst, raw_pageable, pn, "pageable H2D");
}

// d. Synchronous copies and fills: what a user writes without a stream, cudaMemcpy and cudaMemset,
// against cudamem's synchronous forms, per 4-byte call and at full size. `returns_early`: the
// direction in which cudaMemcpy may return before the bytes have landed, so the raw side also
// synchronizes the legacy stream (cudamem's synchronous forms complete before they return).
template <class Dst, class Src>
void sync_copy_rows(std::vector<row>& rows, const options& opt, const std::string& label, Dst dst, Src src,
                    cudaMemcpyKind kind, bool returns_early) {
  const auto dst4 = take(dst.first(4), "span::first");
  const auto src4 = take(src.first(4), "span::first");
  auto* const to = dst.data().get();
  const auto* const from = src.data().get();
  const std::size_t n = dst.size();
  const auto raw = [=](std::size_t bytes) {
    check(cudaMemcpy(to, from, bytes, kind), "cudaMemcpy");
    if (returns_early) check(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize");
  };
  if (returns_early)
    rows.push_back(sync_latency(
        "sync copy " + label + " 4 B, bare cudaMemcpy", opt, std::nullopt,
        [=] { check(cudaMemcpy(to, from, 4, kind), "cudaMemcpy"); },
        [=] { check(cudamem::copy(dst4, src4), "copy"); }));
  rows.push_back(sync_latency(
      "sync copy " + label + " 4 B", opt, 1.05, [=] { raw(4); }, [=] { check(cudamem::copy(dst4, src4), "copy"); }));
  rows.push_back(synchronous_bandwidth(
      "sync copy " + label + " " + size_text(n), "GB/s", n, opt, [=] { raw(n); },
      [=] { check(cudamem::copy(dst, src), "copy"); }, 0.99));
}

void synchronous_rows(std::vector<row>& rows, const options& opt) {
  using namespace cudamem;
  const std::size_t n = opt.bytes;
  auto pageable = take(host_buffer<std::byte>::allocate(n), "host_buffer::allocate");
  auto pinned_side = take(pinned_buffer<std::byte>::allocate(n), "pinned_buffer::allocate");
  auto device_a = take(device_buffer<std::byte>::allocate(n), "device_buffer::allocate");
  auto device_b = take(device_buffer<std::byte>::allocate(n), "device_buffer::allocate");
  write_pattern(pageable.data().get(), n, 3);
  std::memset(pinned_side.data().get(), 0x44, n);
  check(cudamem::copy(device_a, pageable), "copy");
  check(cudamem::fill_bytes(device_b, 0x22), "fill_bytes");

  sync_copy_rows(rows, opt, "D2H (pageable)", pageable.view(), device_a.view(), cudaMemcpyDeviceToHost, false);
  sync_copy_rows(rows, opt, "D2H (pinned)", pinned_side.view(), device_a.view(), cudaMemcpyDeviceToHost, false);
  expect_equal(pinned_side.data().get(), pageable.data().get(), n, "synchronous D2H");
  sync_copy_rows(rows, opt, "H2D (pageable)", device_b.view(), pageable.view(), cudaMemcpyHostToDevice, true);
  sync_copy_rows(rows, opt, "H2D (pinned)", device_b.view(), pinned_side.view(), cudaMemcpyHostToDevice, false);
  std::memset(pinned_side.data().get(), 0x55, n);
  check(cudamem::copy(pinned_side, device_b), "copy");
  expect_equal(pinned_side.data().get(), pageable.data().get(), n, "synchronous H2D");
  check(cudamem::fill_bytes(device_b, 0x22), "fill_bytes");
  sync_copy_rows(rows, opt, "D2D", device_b.view(), device_a.view(), cudaMemcpyDeviceToDevice, true);
  std::memset(pinned_side.data().get(), 0x55, n);
  check(cudamem::copy(pinned_side, device_b), "copy");
  expect_equal(pinned_side.data().get(), pageable.data().get(), n, "synchronous D2D");

  std::byte* const raw_b = device_b.data().get();
  const device_span<std::byte> b = device_b.view();
  const device_span<std::byte> b4 = take(b.first(4), "span::first");
  const auto raw_fill = [=](std::size_t bytes) {
    check(cudaMemset(raw_b, 0x33, bytes), "cudaMemset");
    check(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize");
  };
  rows.push_back(sync_latency(
      "sync fill 4 B", opt, 1.05, [=] { raw_fill(4); }, [=] { check(cudamem::fill_bytes(b4, 0x33), "fill_bytes"); }));
  rows.push_back(synchronous_bandwidth(
      "sync fill " + size_text(n), "GB/s (bytes written)", n, opt, [=] { raw_fill(n); },
      [=] { check(cudamem::fill_bytes(b, 0x33), "fill_bytes"); }, 0.99));
}
}  // namespace

int main(int argc, char** argv) {
  const options opt = parse_options(argc, argv);

  // No device (or no driver): skipped, not failed, as the tests do.
  int device_count = 0;
  if (const cudaError_t code = cudaGetDeviceCount(&device_count); code != cudaSuccess || device_count == 0) {
    std::fprintf(stderr, "no CUDA device (%s)\n",
                 code != cudaSuccess ? cudaGetErrorString(code) : "cudaGetDeviceCount returned 0");
    return 77;
  }

  const cudamem::device_id here = take(cudamem::current_device(), "current_device");
  cudaDeviceProp properties{};
  check(cudaGetDeviceProperties(&properties, here.get()), "cudaGetDeviceProperties");
  int driver = 0, runtime = 0;
  check(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
  check(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
  std::printf("bench_copy: cudamem %d.%d.%d against the CUDA runtime\n", CUDAMEM_VERSION_MAJOR, CUDAMEM_VERSION_MINOR,
              CUDAMEM_VERSION_PATCH);
  std::printf("device %d: %s (sm_%d%d), driver %d, runtime %d\n", here.get(), properties.name, properties.major,
              properties.minor, driver, runtime);
  std::printf("bandwidth: %s, %d trials per side; host cost: %d batches of %d calls per side; %d warm-ups\n",
              size_text(opt.bytes).c_str(), opt.reps, opt.batches, opt.calls, opt.warmups);
  std::printf("values are medians; ratio = cudamem / raw; spread = half the interquartile range\n\n");

  // One non-blocking stream for every stream-ordered row, raw and cudamem alike.
  const auto stream = take(cudamem::stream::create(), "stream::create");
  std::vector<row> rows;
  host_cost_rows(rows, opt, stream);
  bandwidth_rows(rows, opt, stream);
  synchronous_rows(rows, opt);

  print_table(rows);
  std::printf("\n");
  print_summary(rows);
  if (opt.json_path != nullptr) {
    write_json(opt.json_path, rows, properties.name);
    std::printf("wrote %s\n", opt.json_path);
  }
  return 0;
}
