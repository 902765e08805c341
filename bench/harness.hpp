// SPDX-License-Identifier: MIT
// What every benchmark in bench/ shares: options, checks, interleaved trials and their medians, rows
// with a ratio and a target, the table, the summary and the JSON. Each benchmark is one translation
// unit that includes this once; `bench_name` is set by its main.
#pragma once

#include <cudamem/cudamem.hpp>

#include <sched.h>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

const char* bench_name = "bench";  // set by main, for messages

// ---------------------------------------------------------------------------------------------
// Options

struct options {
  std::size_t bytes = std::size_t{1} << 30;           // bandwidth rows
  std::size_t pageable_bytes = std::size_t{256} << 20;  // the synchronous pageable row
  int reps = 21;      // timed trials per side, bandwidth rows (odd: the median is one trial)
  int batches = 101;  // timed batches per side, host-cost rows
  int calls = 1000;   // enqueues per batch; the stream is synchronized after each batch
  int warmups = 3;    // untimed trials per side before the timed ones
  const char* json_path = nullptr;
};

void print_usage(std::FILE* out) {
  std::fprintf(out,
               "usage: %s [--bytes N] [--pageable-bytes N] [--reps N] [--batches N] [--calls N]\n"
               "                  [--warmups N] [--quick] [--json FILE]\n"
               "  --bytes N           size of the bandwidth rows (default 1G = 1<<30; suffixes K, M, G are binary)\n"
               "  --pageable-bytes N  size of the pageable synchronous row (default 256M)\n"
               "  --reps N            timed trials per side of each bandwidth row (default 21)\n"
               "  --batches N         timed batches per side of each host-cost row (default 101)\n"
               "  --calls N           calls per host-cost batch (default 1000)\n"
               "  --warmups N         untimed trials per side before timing (default 3)\n"
               "  --quick             small sizes and few trials, for a smoke run (explicit options win)\n"
               "  --json FILE         also write the rows as a JSON array to FILE\n",
               bench_name);
}

[[noreturn]] void usage_error(const char* problem, const char* arg) {
  std::fprintf(stderr, "%s: %s: %s\n", bench_name, problem, arg);
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

// A failure ends the program, except where a benchmark asks to see it (a graph-capture check reports what each
// library does on a capturing stream, a refusal included): then it throws a bench_failure.
struct bench_failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};
inline bool fail_throws = false;

[[noreturn, gnu::cold, gnu::noinline]] void fail(const char* what, const char* why) {
  if (fail_throws) throw bench_failure(std::string(what) + ": " + why);
  std::fprintf(stderr, "%s: %s: %s\n", bench_name, what, why);
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
  int runs = 1;  // how many times the measurement ran: one more each time its spread exceeded repeat_spread
};
// Half the interquartile range relative to the median.
inline double relative_spread(const stats& s) { return s.median == 0 ? 0 : (s.q3 - s.q1) / 2 / s.median; }
// A measurement whose spread exceeds this is run again, up to most_runs times in all; the run with the least spread
// is kept (its `runs` says how many there were).
inline constexpr double repeat_spread = 0.10;
inline constexpr int most_runs = 3;

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
  double spread() const { return std::max(relative_spread(raw), relative_spread(lib)); }
};

// Runs `warmups` untimed trials of each side, then `count` timed pairs, the order of each pair alternating (raw
// cudamem, cudamem raw, ...) so that neither side always runs first after the other. Each trial returns the value
// the row reports.
// A measurement whose spread exceeds repeat_spread on either side runs again (see most_runs).
template <class RawTrial, class LibTrial>
std::pair<stats, stats> interleaved(int warmups, int count, RawTrial&& raw_trial, LibTrial&& lib_trial) {
  for (int i = 0; i < warmups; ++i) {
    (void)raw_trial();
    (void)lib_trial();
  }
  std::pair<stats, stats> best;
  double best_spread = 0;
  for (int run = 1; run <= most_runs; ++run) {
    std::vector<double> raw, lib;
    raw.reserve(static_cast<std::size_t>(count));
    lib.reserve(static_cast<std::size_t>(count));
    for (int i = 0; i < count; ++i) {
      if (i % 2 == 0) {
        raw.push_back(raw_trial());
        lib.push_back(lib_trial());
      } else {
        lib.push_back(lib_trial());
        raw.push_back(raw_trial());
      }
    }
    std::pair<stats, stats> now{summarize(std::move(raw)), summarize(std::move(lib))};
    const double spread = std::max(relative_spread(now.first), relative_spread(now.second));
    if (run == 1 || spread < best_spread) best = now, best_spread = spread;
    best.first.runs = best.second.runs = run;
    if (spread <= repeat_spread) break;
  }
  return best;
}

using wall_clock = std::chrono::steady_clock;

double seconds_between(wall_clock::time_point start, wall_clock::time_point stop) {
  return std::chrono::duration<double>(stop - start).count();
}

// Holds the stream it runs on for `ns` nanoseconds of device time.
__global__ void hold_stream(unsigned long long ns) {
  unsigned long long start = 0, now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  while (now - start < ns);
}

// Host cost of one enqueue: the time to issue `calls` calls, divided by `calls`. Each batch is queued behind a kernel
// that holds the stream longer than the batch takes, so the device does not drain the queue while the host fills it
// (the time per call would then follow the device's pace, not the host's); the stream is drained after every batch
// (untimed) so that its queue never fills and blocks the host.
template <class RawCall, class LibCall>
row host_cost(std::string name, const options& opt, cudamem::stream_ref s, RawCall raw_call, LibCall lib_call) {
  const unsigned long long hold_ns = 1'000'000ull + 20'000ull * static_cast<unsigned long long>(opt.calls);
  auto batch = [&](auto& call) {
    hold_stream<<<1, 1, 0, s.get()>>>(hold_ns);
    check(cudaGetLastError(), "hold_stream");
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
    std::printf("%-34s %-20s %12.2f %12.2f %7.3f %7.1f%% %-9s %s", r.name.c_str(), r.unit.c_str(), r.raw.median,
                r.lib.median, r.ratio(), 100 * r.spread(), format_ratio_target(r).c_str(),
                r.target ? (r.passed() ? "PASS" : "FAIL") : "-");
    if (r.lib.runs > 1) std::printf(" (run %d times)", r.lib.runs);
    std::printf("\n");
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
                 "\"runs\": %d, \"device\": %s}%s\n",
                 r.raw.q1, r.raw.q3, r.lib.q1, r.lib.q3, r.lib.runs, json_string(device_name).c_str(),
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

// The number of visible devices; none (or no driver) prints why. A benchmark that finds fewer than
// it needs exits 77, reported as skipped, as the tests do.
int visible_devices() {
  int count = 0;
  if (const cudaError_t code = cudaGetDeviceCount(&count); code != cudaSuccess || count == 0) {
    std::fprintf(stderr, "no CUDA device (%s)\n",
                 code != cudaSuccess ? cudaGetErrorString(code) : "cudaGetDeviceCount returned 0");
    return 0;
  }
  return count;
}

// Keeps the timing thread on the CPU it runs on, so that a migration does not land in one side's batch. Called once
// CUDA is initialized: the driver's threads started with the context keep their affinity (a thread started later
// from this one would inherit the pinning).
void pin_to_current_cpu() {
  const int cpu = sched_getcpu();
  cpu_set_t set;
  CPU_ZERO(&set);
  if (cpu >= 0) CPU_SET(cpu, &set);
  if (cpu < 0 || sched_setaffinity(0, sizeof set, &set) != 0) std::printf("(the timing thread is not pinned)\n");
  else std::printf("timing thread pinned to CPU %d\n", cpu);
}

// The table, the summary and (with --json) the JSON file of a finished run.
void report(const std::vector<row>& rows, const options& opt, const std::string& device_name) {
  print_table(rows);
  std::printf("\n");
  print_summary(rows);
  if (opt.json_path != nullptr) {
    write_json(opt.json_path, rows, device_name);
    std::printf("wrote %s\n", opt.json_path);
  }
}
}  // namespace
