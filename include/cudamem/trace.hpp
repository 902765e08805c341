// SPDX-License-Identifier: MIT
/// \file
/// Writes a ledger's allocations and frees to a Chrome trace / Perfetto JSON file (chrome://tracing, ui.perfetto.dev):
/// one process per device, one thread per stream, an instant event per allocation and free, and counters of the bytes
/// in use per device and per stream. tools/plot_memory.py draws it. Not in cudamem.hpp: include it where you trace.
///
///     trace_recorder recorder;
///     status recorder.open(path, book)   writes to `path` from now on, attached to the ledger `book`
///     status recorder.close()            detaches, ends the JSON and closes the file (the destructor does too)
///
/// Each event: {"name": "alloc" | "free", "ph": "i", "ts": microseconds since open, "pid": device, "tid": stream,
/// "args": {"bytes", "address", "source", "device", "stream"}}; counters: {"name": "device N" | "stream S", "ph": "C"}.
#pragma once

#include <cudamem/detail/storage.hpp>
#include <cudamem/detail/sync.hpp>
#include <cudamem/error.hpp>
#include <cudamem/statistics.hpp>

#include <time.h>
#include <cstdint>
#include <cstdio>

namespace cudamem {

/// Records every allocation and free of one ledger's sources to a JSON file, under a lock of its own (off unless
/// open). Not movable: the ledger refers to it. The ledger must outlive it, or close() must come first; open and close
/// it while no allocation through the ledger's sources runs.
class trace_recorder {
 public:
  trace_recorder() noexcept = default;  ///< Records nothing until open().
  trace_recorder(const trace_recorder&) = delete;
  trace_recorder& operator=(const trace_recorder&) = delete;
  ~trace_recorder() { (void)close(); }  ///< close(); its failure is dropped.

  /// Creates (truncates) `path`, writes the trace's opening and attaches to `book` (replacing its sink). Errors:
  /// invalid_argument (null path, already open); not_supported (the file cannot be created: the message says why).
  [[nodiscard]] status open(const char* path, ledger& book) noexcept {
    constexpr const char* api = "trace_recorder::open";
    if (path == nullptr) return error(errc::invalid_argument, api, "the path is null");
    if (file_ != nullptr) return error(errc::invalid_argument, api, "already open; close() first");
    std::FILE* file = std::fopen(path, "w");
    if (file == nullptr) return error(errc::not_supported, api, "cannot create %s", path);
    file_ = file;
    events_ = events_written_ = 0;
    start_ns_ = now_ns();
    std::fputs("{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n", file_);
    book_ = &book;
    book.attach({&trace_recorder::record, this});
    return {};
  }
  /// Detaches from the ledger, ends the JSON and closes the file; nothing if not open. Errors: not_supported (a write
  /// or the close failed: the file is incomplete).
  [[nodiscard]] status close() noexcept {
    if (file_ == nullptr) return {};
    if (book_ != nullptr) book_->detach();
    book_ = nullptr;
    const detail::lock_guard<detail::mutex> hold(lock_);
    std::fputs("\n]}\n", file_);
    const bool failed = std::ferror(file_) != 0;
    const bool closed = std::fclose(file_) == 0;
    file_ = nullptr;
    devices_.clear(), streams_.clear();
    if (failed || !closed) return error(errc::not_supported, "trace_recorder::close", "writing the trace failed");
    return {};
  }
  [[nodiscard]] bool is_open() const noexcept { return file_ != nullptr; }  ///< Whether it records.
  [[nodiscard]] std::size_t events() const noexcept { return events_; }  ///< Allocations and frees written so far.

 private:
  struct running {  // bytes in use per device or stream, as the events add up
    std::uint64_t key;
    std::int64_t bytes;
  };
  struct totals {
    detail::vec<running> rows;
    std::int64_t add(std::uint64_t key, std::int64_t delta) noexcept {
      for (running& r : rows)
        if (r.key == key) return r.bytes += delta;
      rows.push_back({key, delta});
      return delta;
    }
    bool has(std::uint64_t key) const noexcept {
      for (const running& r : rows)
        if (r.key == key) return true;
      return false;
    }
    void clear() noexcept { rows.erase(rows.begin(), rows.end()); }
  };
  static std::uint64_t now_ns() noexcept {
    timespec t{};
    clock_gettime(CLOCK_MONOTONIC, &t);
    return std::uint64_t(t.tv_sec) * 1000000000u + std::uint64_t(t.tv_nsec);
  }
  static long long stream_tid(std::uint64_t stream) noexcept {  // JSON numbers: the special keys as -1, -2, -3
    return stream >= ledger::per_thread_stream ? -1 - static_cast<long long>(~stream) : static_cast<long long>(stream);
  }
  void name(const char* text) noexcept {  // a JSON string, escaped
    std::fputc('"', file_);
    for (const char* c = text; c != nullptr && *c != '\0'; ++c) {
      const unsigned char ch = static_cast<unsigned char>(*c);
      if (ch == '"' || ch == '\\') std::fputc('\\', file_), std::fputc(ch, file_);
      else if (ch < 0x20) std::fprintf(file_, "\\u%04x", ch);
      else std::fputc(ch, file_);
    }
    std::fputc('"', file_);
  }
  void separator() noexcept { std::fputs(events_written_++ == 0 ? "" : ",\n", file_); }
  static void record(void* self, const allocation_event& event) noexcept {
    static_cast<trace_recorder*>(self)->write(event);
  }
  void write(const allocation_event& e) noexcept {
    const detail::lock_guard<detail::mutex> hold(lock_);
    if (file_ == nullptr) return;
    const std::uint64_t ns = now_ns() - start_ns_;
    const unsigned long long us = ns / 1000u, frac = ns % 1000u;
    const long long tid = stream_tid(e.stream);
    const auto delta = static_cast<std::int64_t>(e.bytes) * (e.is_free ? -1 : 1);
    if (!devices_.has(std::uint64_t(e.device))) {
      separator();
      std::fprintf(file_, R"({"name": "process_name", "ph": "M", "pid": %d, "args": {"name": "device %d"}})", e.device,
                   e.device);
    }
    if (!streams_.has(e.stream)) {
      separator();
      std::fprintf(file_,
                   R"({"name": "thread_name", "ph": "M", "pid": %d, "tid": %lld, "args": {"name": "stream %lld"}})",
                   e.device, tid, tid);
    }
    separator();
    std::fprintf(file_,
                 R"({"name": "%s", "cat": "cudamem", "ph": "i", "s": "t", "ts": %llu.%03llu, "pid": %d, "tid": %lld, )"
                 R"("args": {"bytes": %zu, "address": "%p", "device": %d, "stream": %lld, "source": )",
                 e.is_free ? "free" : "alloc", us, frac, e.device, tid, e.bytes, e.address, e.device, tid);
    name(e.source);
    std::fputs("}}", file_);
    const std::int64_t on_device = devices_.add(std::uint64_t(e.device), delta);
    const std::int64_t on_stream = streams_.add(e.stream, delta);
    separator();
    std::fprintf(file_, R"({"name": "device %d", "ph": "C", "ts": %llu.%03llu, "pid": %d, "args": {"bytes": %lld}})",
                 e.device, us, frac, e.device, static_cast<long long>(on_device));
    separator();
    std::fprintf(file_, R"({"name": "stream %lld", "ph": "C", "ts": %llu.%03llu, "pid": %d, "args": {"bytes": %lld}})",
                 tid, us, frac, e.device, static_cast<long long>(on_stream));
    ++events_;
  }

  std::FILE* file_ = nullptr;
  ledger* book_ = nullptr;
  detail::mutex lock_;
  std::uint64_t start_ns_ = 0;
  std::size_t events_ = 0, events_written_ = 0;
  totals devices_, streams_;
};

}  // namespace cudamem
