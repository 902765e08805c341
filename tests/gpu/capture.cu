// SPDX-License-Identifier: MIT
// Graph capture: every stream-ordered copy, fill and allocation can be captured, and a synchronous
// operation during a capture (any mode, any thread) either completes without disturbing it or is
// refused before anything is written.
#include "common.cuh"

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <vector>

using namespace cudamem;
using test::take;

namespace {
const char* name_of(cudaStreamCaptureMode mode) {
  switch (mode) {
    case cudaStreamCaptureModeGlobal: return "global";
    case cudaStreamCaptureModeThreadLocal: return "thread-local";
    default: return "relaxed";
  }
}

// Ends the capture on `s`, which must still be valid, then instantiates and replays the graph once.
void end_and_replay(const stream& s) {
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(s.get(), &graph) == cudaSuccess);
  REQUIRE(graph != nullptr);
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  REQUIRE(cudaGraphLaunch(exec, s.get()) == cudaSuccess);
  REQUIRE_OK(s.synchronize());
  CHECK(cudaGraphExecDestroy(exec) == cudaSuccess);
  CHECK(cudaGraphDestroy(graph) == cudaSuccess);
}
}  // namespace

TEST_CASE("synchronous work beside another stream's capture completes and leaves the capture intact", "[graph]") {
  const auto mode =
      GENERATE(cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal, cudaStreamCaptureModeRelaxed);
  const bool other_thread = GENERATE(false, true);
  INFO(name_of(mode) << " capture, synchronous calls from the " << (other_thread ? "other" : "capturing") << " thread");
  auto s = take(stream::create());  // non-blocking: the legacy stream does not join its capture
  auto other = take(stream::create());  // not capturing: waiting for it must leave the capture intact
  auto other_done = take(event::create());
  auto captured = take(device_buffer<int>::allocate(256));
  auto target = take(device_buffer<int>::allocate(256));
  auto pinned_out = take(pinned_buffer<int>::allocate(256));
  auto pinned_in = take(pinned_buffer<int>::allocate(256));
  std::vector<int> values(256);
  std::iota(values.begin(), values.end(), 1);
  std::vector<int> back(256, 0);
  REQUIRE_OK(fill_bytes(captured, 0));

  REQUIRE(cudaStreamBeginCapture(s.get(), mode) == cudaSuccess);
  REQUIRE_OK(fill_bytes(captured, 1, s));  // recorded, runs only when the graph is replayed
  status copied, read, read_pinned, filled, allocated, waited, event_waited;
  result<bool> stream_ready = false, event_ready = false;
  const auto synchronous_work = [&] {
    copied = copy(target, span(values));
    read = copy(span(back), target);
    read_pinned = copy(pinned_in, target);
    filled = fill_bytes(pinned_out, 0x11);
    // cudaMalloc and cudaFree: not part of the capture.
    allocated = device_buffer<int>::allocate(64).transform([](auto&&) {});
    // Waiting for and querying a stream or event that is not capturing: CUDA refuses these as unsafe in a global or
    // thread-local capture (invalidating it); cudamem makes them in relaxed mode.
    waited = fill_bytes(target, 0x22, other).and_then([&] { return other.synchronize(); });
    stream_ready = other.ready();
    event_waited = other_done.record(other).and_then([&] { return other_done.synchronize(); });
    event_ready = other_done.ready();
  };
  if (other_thread) std::thread(synchronous_work).join();
  else synchronous_work();
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  REQUIRE(cudaStreamIsCapturing(s.get(), &capture) == cudaSuccess);
  CHECK(capture == cudaStreamCaptureStatusActive);
  end_and_replay(s);

  REQUIRE_OK(copied);
  REQUIRE_OK(read);
  REQUIRE_OK(read_pinned);
  REQUIRE_OK(filled);
  REQUIRE_OK(allocated);
  REQUIRE_OK(waited);
  REQUIRE_OK(event_waited);
  REQUIRE_OK(stream_ready);
  REQUIRE_OK(event_ready);
  CHECK(*stream_ready);  // both waited for above
  CHECK(*event_ready);
  CHECK(test::all_bytes(test::read_back(target.view()), 0x22));
  CHECK(back == values);
  CHECK(test::read_back(pinned_in.view()) == values);
  CHECK(test::all_bytes(test::read_back(pinned_out.view()), 0x11));
  CHECK(test::all_bytes(test::read_back(captured.view()), 1));
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("synchronous work that a blocking stream's capture would absorb is refused before writing", "[graph]") {
  const auto mode =
      GENERATE(cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal, cudaStreamCaptureModeRelaxed);
  INFO(name_of(mode) << " capture");
  auto s = take(stream::create(stream_options{.non_blocking = false}));
  auto dst = take(device_buffer<int>::allocate(64));
  std::vector<int> values(64, 3);
  std::vector<int> back(64, 9);
  REQUIRE_OK(fill_bytes(dst, test::poison));

  REQUIRE(cudaStreamBeginCapture(s.get(), mode) == cudaSuccess);
  REQUIRE_OK(fill_bytes(dst, 0, s));
  auto copied = copy(dst, span(values));
  auto filled = fill_bytes(dst, 7);
  auto read = copy(span(back), dst);
  end_and_replay(s);

  REQUIRE_FALSE(read);
  CHECK(read.error().code() == errc::capture_active);
  CHECK(back == std::vector<int>(64, 9));
  REQUIRE_FALSE(copied);
  CHECK(copied.error().code() == errc::capture_active);
  CHECK(std::string(copied.error().message()).starts_with("copy: "));
  REQUIRE_FALSE(filled);
  CHECK(filled.error().code() == errc::capture_active);
  CHECK(test::all_bytes(test::read_back(dst.view()), 0));  // only the replayed fill wrote
}

TEST_CASE("stream-ordered allocation, typed fill and copies are captured into a graph", "[graph]") {
  const auto mode =
      GENERATE(cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal, cudaStreamCaptureModeRelaxed);
  INFO(name_of(mode) << " capture");
  auto s = take(stream::create());
  auto out = take(pinned_buffer<int>::allocate(1000));
  REQUIRE_OK(fill_bytes(out, 0));

  REQUIRE(cudaStreamBeginCapture(s.get(), mode) == cudaSuccess);
  status filled, copied;
  std::string allocation_error;
  {
    auto scratch = device_buffer<int>::allocate(1000, s);  // the allocation becomes a graph node
    if (scratch) {
      filled = fill(*scratch, 42, s);
      copied = copy(out, *scratch, s);
    } else {
      allocation_error = scratch.error().message();
    }
  }  // and so does the free
  // A raw handle of unknown device: the library must not ask a capturing stream for its device.
  auto unknown = device_buffer<int>::allocate(10, stream_ref::from_native_handle(s.get()));
  end_and_replay(s);

  CHECK(allocation_error.empty());
  REQUIRE_OK(filled);
  REQUIRE_OK(copied);
  REQUIRE_FALSE(unknown);
  CHECK(unknown.error().code() == errc::capture_active);
  CHECK(test::read_back(out.view()) == std::vector<int>(1000, 42));
  CHECK(cudaGetLastError() == cudaSuccess);
}

// Every stream-ordered operation, captured and replayed, against the same operations run eagerly. The reference is the
// eager run's data and the values computed here on the host; the outputs are pinned memory read directly on the host.
namespace {
constexpr std::size_t count = 1024;  // 4 KiB of int: quick under compute-sanitizer
constexpr std::size_t width = 60, height = 17;  // 2D rows of 240 bytes
constexpr std::size_t own_pitch = 64;  // elements per row of rows laid over a flat buffer by hand
constexpr std::size_t laid_out = own_pitch * height;
constexpr unsigned char byte_1d = 0x5A, byte_2d = 0x77;
constexpr int value_1d = 0x12345678, value_2d = -7;

// What both runs read.
struct inputs {
  pinned_buffer<int> flat;
  std::vector<int> pageable;  // page-locked by `registered`
  std::optional<host_registration<int>> registered;
  pinned_pitched_buffer<int> rows;
};
void prepare(inputs& in) {
  const auto seed = test::fresh_seed();
  INFO("seed " << seed);
  const auto flat_values = test::random_vector<int>(count, seed);
  in.pageable = test::random_vector<int>(count, seed + 1);
  const auto row_values = test::random_vector<int>(width * height, seed + 2);
  in.flat = take(pinned_buffer<int>::allocate(count));
  std::copy(flat_values.begin(), flat_values.end(), in.flat.begin());
  in.registered.emplace(take(host_register(span(in.pageable))));
  in.rows = take(pinned_pitched_buffer<int>::allocate(width, height));
  REQUIRE(in.rows.pitch_bytes() > width * sizeof(int));  // padding, which no copy may write
  auto rows = in.rows.view();
  for (std::size_t r = 0; r < height; ++r)
    for (std::size_t c = 0; c < width; ++c) rows(r, c) = row_values[r * width + c];
}

// What one run writes: pinned memory, poisoned on the host before each run.
struct outputs {
  pinned_buffer<int> flat_d2h, flat_h2h, flat_of_rows, fill_bytes_1d, fill_bytes_2d, fill_1d, fill_2d;
  std::vector<int> pageable;  // page-locked by `registered`: the destination of copy_to_host
  std::optional<host_registration<int>> registered;
  pinned_pitched_buffer<int> rows_d2h, rows_h2h, rows_of_flat, rows_2d_d2h, rows_2d_h2h, fill_rows;
  std::vector<pinned_buffer<int>*> flats() {
    return {&flat_d2h, &flat_h2h, &flat_of_rows, &fill_bytes_1d, &fill_bytes_2d, &fill_1d, &fill_2d};
  }
  std::vector<pinned_pitched_buffer<int>*> pitched() {
    return {&rows_d2h, &rows_h2h, &rows_of_flat, &rows_2d_d2h, &rows_2d_h2h, &fill_rows};
  }
};
void prepare(outputs& out) {
  for (auto* flat : {&out.flat_d2h, &out.flat_h2h, &out.fill_bytes_1d, &out.fill_1d})
    *flat = take(pinned_buffer<int>::allocate(count));
  out.flat_of_rows = take(pinned_buffer<int>::allocate(width * height));
  out.fill_bytes_2d = take(pinned_buffer<int>::allocate(laid_out));
  out.fill_2d = take(pinned_buffer<int>::allocate(laid_out));
  out.pageable.assign(count, 0);
  out.registered.emplace(take(host_register(span(out.pageable))));
  for (auto* rows : out.pitched()) *rows = take(pinned_pitched_buffer<int>::allocate(width, height));
}
// Every byte of every output, padding included (no copy writes it: it stays poisoned).
void poison(outputs& out) {
  for (auto* flat : out.flats()) std::memset(flat->data().get(), test::poison, flat->size_bytes());
  std::memset(out.pageable.data(), test::poison, out.pageable.size() * sizeof(int));
  for (auto* rows : out.pitched()) std::memset(rows->data().get(), test::poison, rows->pitch_bytes() * rows->height());
}
std::vector<unsigned char> bytes_of(outputs& out) {
  std::vector<unsigned char> all;
  const auto add = [&](const void* first, std::size_t bytes) {
    const auto* p = static_cast<const unsigned char*>(first);
    all.insert(all.end(), p, p + bytes);
  };
  for (auto* flat : out.flats()) add(flat->data().get(), flat->size_bytes());
  add(out.pageable.data(), out.pageable.size() * sizeof(int));
  for (auto* rows : out.pitched()) add(rows->data().get(), rows->pitch_bytes() * rows->height());
  return all;
}
bool all_poisoned(outputs& out) {
  const auto all = bytes_of(out);
  return std::all_of(all.begin(), all.end(), [](unsigned char b) { return b == test::poison; });
}

// The failures of one run, as messages: the capturing thread may not be the test's, and Catch2 asserts in one only.
using failures = std::vector<std::string>;
void note(failures& failed, const char* what, const status& outcome) {
  if (!outcome) failed.push_back(std::string(what) + ": " + outcome.error().message());
}
template <class T>
T value_or_empty(failures& failed, const char* what, result<T>&& outcome) {
  if (outcome) return std::move(*outcome);
  failed.push_back(std::string(what) + ": " + outcome.error().message());
  return T();
}

// Every stream-ordered operation on `s`, between `in` and `out`, through device memory allocated on `s` from the
// stream-ordered pool and freed on `s` when this returns: no host wait, nothing synchronous.
void enqueue_all(stream_ref s, const inputs& in, outputs& out, failures& failed) {
  const auto flat = [&](const char* what) {
    return value_or_empty(failed, what, device_buffer<int>::allocate(count, s));
  };
  const auto rows = [&](const char* what) {
    return value_or_empty(failed, what, device_pitched_buffer<int>::allocate(width, height, s));
  };
  // 1D, every direction: H2D from pinned, D2D, D2H to pinned, pinned to pinned.
  auto a = flat("allocate a"), b = flat("allocate b");
  note(failed, "copy H2D", copy(a, in.flat, s));
  note(failed, "copy D2D", copy(b, a, s));
  note(failed, "copy D2H", copy(out.flat_d2h, b, s));
  note(failed, "copy pinned to pinned", copy(out.flat_h2h, in.flat, s));
  // CuPy's names, with registered (host_register) memory as the pinned side both ways.
  auto c = flat("allocate c"), d = flat("allocate d");
  note(failed, "copy_from_host", copy_from_host(c, *in.registered, s));
  note(failed, "copy_from_device", copy_from_device(d, c, s));
  note(failed, "copy_to_host", copy_to_host(*out.registered, d, s));
  // 2D views of pitched buffers, every direction.
  auto rows_1 = rows("allocate rows_1"), rows_2 = rows("allocate rows_2");
  note(failed, "2D copy H2D", copy(rows_1, in.rows, s));
  note(failed, "2D copy D2D", copy(rows_2, rows_1, s));
  note(failed, "2D copy D2H", copy(out.rows_d2h, rows_2, s));
  note(failed, "2D copy pinned to pinned", copy(out.rows_h2h, in.rows, s));
  // 1D against 2D: rows read back to back into a flat buffer, and a flat device range written into rows.
  note(failed, "copy 2D to 1D", copy(out.flat_of_rows, rows_2, s));
  auto rows_3 = rows("allocate rows_3");
  if (auto front = a.view().first(width * height)) note(failed, "copy 1D to 2D", copy(rows_3, *front, s));
  else note(failed, "span::first", front.error());
  note(failed, "2D copy D2H of the reshaped rows", copy(out.rows_of_flat, rows_3, s));
  // copy_2d, the byte-level form, every direction.
  auto rows_4 = rows("allocate rows_4"), rows_5 = rows("allocate rows_5");
  constexpr std::size_t row_bytes = width * sizeof(int);
  note(failed, "copy_2d H2D",
       copy_2d(rows_4.data(), rows_4.pitch_bytes(), in.rows.data(), in.rows.pitch_bytes(), row_bytes, height, s));
  note(failed, "copy_2d D2D",
       copy_2d(rows_5.data(), rows_5.pitch_bytes(), rows_4.data(), rows_4.pitch_bytes(), row_bytes, height, s));
  note(failed, "copy_2d D2H",
       copy_2d(out.rows_2d_d2h.data(), out.rows_2d_d2h.pitch_bytes(), rows_5.data(), rows_5.pitch_bytes(), row_bytes,
               height, s));
  note(failed, "copy_2d pinned to pinned",
       copy_2d(out.rows_2d_h2h.data(), out.rows_2d_h2h.pitch_bytes(), in.rows.data(), in.rows.pitch_bytes(), row_bytes,
               height, s));
  // fill_bytes, 1D and 2D (rows laid by hand over a zeroed flat buffer: the padding must stay 0).
  auto filled_1d = flat("allocate filled_1d");
  note(failed, "fill_bytes 1D", fill_bytes(filled_1d, byte_1d, s));
  note(failed, "copy fill_bytes 1D", copy(out.fill_bytes_1d, filled_1d, s));
  auto filled_2d = value_or_empty(failed, "allocate filled_2d", device_buffer<int>::allocate(laid_out, s));
  note(failed, "fill_bytes zero", fill_bytes(filled_2d, 0, s));
  if (auto laid = make_pitched(filled_2d.data(), width, height, own_pitch * sizeof(int)))
    note(failed, "fill_bytes 2D", fill_bytes(*laid, byte_2d, s));
  else note(failed, "make_pitched", laid.error());
  note(failed, "copy fill_bytes 2D", copy(out.fill_bytes_2d, filled_2d, s));
  // The typed fill, 1D, 2D laid by hand, and a pitched buffer.
  auto typed_1d = flat("allocate typed_1d");
  note(failed, "fill 1D", fill(typed_1d, value_1d, s));
  note(failed, "copy fill 1D", copy(out.fill_1d, typed_1d, s));
  auto typed_2d = value_or_empty(failed, "allocate typed_2d", device_buffer<int>::allocate(laid_out, s));
  note(failed, "fill_bytes zero", fill_bytes(typed_2d, 0, s));
  if (auto laid = make_pitched(typed_2d.data(), width, height, own_pitch * sizeof(int)))
    note(failed, "fill 2D", fill(*laid, value_2d, s));
  else note(failed, "make_pitched", laid.error());
  note(failed, "copy fill 2D", copy(out.fill_2d, typed_2d, s));
  auto typed_rows = rows("allocate typed_rows");
  note(failed, "fill pitched buffer", fill(typed_rows, value_2d, s));
  note(failed, "copy fill pitched buffer", copy(out.fill_rows, typed_rows, s));
}  // every device buffer is freed here, on `s`

// `out` against the values computed on the host from `in`.
void check_outputs(const inputs& in, outputs& out) {
  const auto rows = in.rows.view();
  const auto flat = in.flat.view();
  for (std::size_t i = 0; i < count; ++i) {
    INFO("element " << i);
    CHECK(out.flat_d2h[i] == flat[i]);
    CHECK(out.flat_h2h[i] == flat[i]);
    CHECK(out.pageable[i] == in.pageable[i]);
    CHECK(out.fill_1d[i] == value_1d);
  }
  CHECK(test::all_bytes(std::vector<int>(out.fill_bytes_1d.begin(), out.fill_bytes_1d.end()), byte_1d));
  for (std::size_t r = 0; r < height; ++r) {
    INFO("row " << r);
    for (std::size_t c = 0; c < width; ++c) {
      INFO("column " << c);
      CHECK(out.rows_d2h.view()(r, c) == rows(r, c));
      CHECK(out.rows_h2h.view()(r, c) == rows(r, c));
      CHECK(out.rows_2d_d2h.view()(r, c) == rows(r, c));
      CHECK(out.rows_2d_h2h.view()(r, c) == rows(r, c));
      CHECK(out.flat_of_rows[r * width + c] == rows(r, c));
      CHECK(out.rows_of_flat.view()(r, c) == flat[r * width + c]);
      CHECK(out.fill_rows.view()(r, c) == value_2d);
    }
    for (std::size_t c = 0; c < own_pitch; ++c) {
      INFO("column " << c << " of the rows laid by hand");
      std::uint32_t pattern = 0;
      if (c < width) std::memset(&pattern, byte_2d, sizeof pattern);
      CHECK(static_cast<std::uint32_t>(out.fill_bytes_2d[r * own_pitch + c]) == pattern);
      CHECK(out.fill_2d[r * own_pitch + c] == (c < width ? value_2d : 0));
    }
    for (auto* padded : out.pitched()) {  // the padding of each row is the poison it had
      const auto* row = reinterpret_cast<const unsigned char*>(padded->data().get()) + r * padded->pitch_bytes();
      CHECK(std::all_of(row + width * sizeof(int), row + padded->pitch_bytes(),
                        [](unsigned char b) { return b == test::poison; }));
    }
  }
}

// The eager run: the same operations on `s`, waited for.
void run_eagerly(stream_ref s, const inputs& in, outputs& out) {
  poison(out);
  failures failed;
  enqueue_all(s, in, out, failed);
  INFO((failed.empty() ? std::string() : failed.front()));
  CHECK(failed.empty());
  REQUIRE(cudaStreamSynchronize(s.get()) == cudaSuccess);
  check_outputs(in, out);
}

// `s`'s capture status, as CUDA gives it (cudaStreamGetCaptureInfo).
cudaStreamCaptureStatus capture_status_of(cudaStream_t s) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  REQUIRE(cudaStreamGetCaptureInfo(s, &capture) == cudaSuccess);
  return capture;
}

// Instantiates `graph` (flags 0), launches it twice on `s`, each time onto poisoned outputs, and checks them against
// the host's values and the eager run's bytes; destroys both.
void replay_twice(cudaGraph_t graph, cudaStream_t s, const inputs& in, outputs& out, outputs& eager) {
  CHECK(all_poisoned(out));  // the capture only recorded
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  for (int launch = 1; launch <= 2; ++launch) {
    INFO("launch " << launch);
    poison(out);
    REQUIRE(cudaGraphLaunch(exec, s) == cudaSuccess);
    REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
    check_outputs(in, out);
    CHECK(bytes_of(out) == bytes_of(eager));
  }
  CHECK(cudaGraphExecDestroy(exec) == cudaSuccess);
  CHECK(cudaGraphDestroy(graph) == cudaSuccess);
  CHECK(cudaGetLastError() == cudaSuccess);
}

// Captures enqueue_all on `s` in `mode` from this thread, checking that the capture stays valid, then replays it.
void capture_here_and_replay(stream_ref s, cudaStreamCaptureMode mode, const inputs& in, outputs& eager) {
  outputs captured;
  prepare(captured);
  poison(captured);
  // A caching pool refuses a capturing stream (a replay would reuse its blocks unordered): made before the capture.
  device_pool_resource upstream;
  caching_pool<device_pool_resource> caching(upstream);
  failures failed;
  REQUIRE(cudaStreamBeginCapture(s.get(), mode) == cudaSuccess);
  enqueue_all(s, in, captured, failed);
  auto refused = caching.allocate(s, 256, 256);
  auto refused_buffer = device_buffer<int>::allocate(64, s, caching);
  const cudaStreamCaptureStatus before_end = capture_status_of(s.get());
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(s.get(), &graph);
  const cudaStreamCaptureStatus after_end = capture_status_of(s.get());

  CHECK(before_end == cudaStreamCaptureStatusActive);  // not invalidated
  REQUIRE(ended == cudaSuccess);
  REQUIRE(graph != nullptr);
  CHECK(after_end == cudaStreamCaptureStatusNone);
  INFO((failed.empty() ? std::string() : failed.front()));
  CHECK(failed.empty());
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code() == errc::capture_active);
  REQUIRE_FALSE(refused_buffer);
  CHECK(refused_buffer.error().code() == errc::capture_active);
  CHECK(cudaGetLastError() == cudaSuccess);
  replay_twice(graph, s.get(), in, captured, eager);
}
}  // namespace

TEST_CASE("every stream-ordered operation is captured on a created stream and replays as it runs eagerly",
          "[graph][capture]") {
  const auto mode =
      GENERATE(cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal, cudaStreamCaptureModeRelaxed);
  INFO(name_of(mode) << " capture");
  inputs in;
  prepare(in);
  outputs eager;
  prepare(eager);
  auto eager_stream = take(stream::create());
  run_eagerly(eager_stream, in, eager);
  auto s = take(stream::create());
  capture_here_and_replay(s, mode, in, eager);
}

TEST_CASE("every stream-ordered operation is captured on the per-thread default stream and replays as it runs eagerly",
          "[graph][capture]") {
  inputs in;
  prepare(in);
  outputs eager;
  prepare(eager);
  auto eager_stream = take(stream::create());
  run_eagerly(eager_stream, in, eager);
  REQUIRE(capture_status_of(cudaStreamPerThread) == cudaStreamCaptureStatusNone);
  capture_here_and_replay(stream_ref::per_thread(), cudaStreamCaptureModeThreadLocal, in, eager);
}

TEST_CASE("a second thread captures every stream-ordered operation while this one works synchronously",
          "[graph][capture]") {
  const auto mode =
      GENERATE(cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal, cudaStreamCaptureModeRelaxed);
  INFO(name_of(mode) << " capture in the other thread");
  inputs in;
  prepare(in);
  outputs eager, captured;
  prepare(eager);
  prepare(captured);
  auto eager_stream = take(stream::create());
  run_eagerly(eager_stream, in, eager);
  poison(captured);

  // This thread's own memory, unrelated to the capture: each synchronous call either does its work or is refused with
  // capture_active and leaves its destination as it was.
  const auto values = test::random_vector<int>(count, test::fresh_seed());
  auto on_device = take(device_buffer<int>::allocate(count));
  auto filled = take(device_buffer<int>::allocate(count));
  auto to_pinned = take(pinned_buffer<int>::allocate(count));
  auto device_rows = take(device_pitched_buffer<int>::allocate(width, height));
  auto host_rows = take(host_pitched_buffer<int>::allocate(width, height));
  auto host_rows_back = take(host_pitched_buffer<int>::allocate(width, height));
  for (std::size_t r = 0; r < height; ++r)
    for (std::size_t c = 0; c < width; ++c) host_rows.view()(r, c) = values[r * width + c];
  std::vector<int> back(count);
  const auto poison_all = [&] {
    REQUIRE(cudaMemset(on_device.data().get(), test::poison, on_device.size_bytes()) == cudaSuccess);
    REQUIRE(cudaMemset(filled.data().get(), test::poison, filled.size_bytes()) == cudaSuccess);
    REQUIRE(cudaMemset2D(device_rows.data().get(), device_rows.pitch_bytes(), test::poison, width * sizeof(int),
                         height) == cudaSuccess);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    std::memset(to_pinned.data().get(), test::poison, to_pinned.size_bytes());
    std::memset(host_rows_back.data().get(), test::poison, host_rows_back.pitch_bytes() * height);
    std::memset(back.data(), test::poison, back.size() * sizeof(int));
  };
  poison_all();

  auto s = take(stream::create());  // non-blocking: the legacy stream, which the synchronous calls use, is not joined
  std::mutex lock;
  std::condition_variable changed;
  bool capturing = false, done_here = false;
  cudaError_t began = cudaErrorUnknown, ended = cudaErrorUnknown, status_before = cudaErrorUnknown,
              status_after = cudaErrorUnknown;
  cudaStreamCaptureStatus before_end = cudaStreamCaptureStatusNone, after_end = cudaStreamCaptureStatusActive;
  cudaGraph_t graph = nullptr;
  failures failed;
  std::thread capturer([&] {  // no Catch2 assertion in this thread: it reports through the variables above
    began = cudaStreamBeginCapture(s.get(), mode);
    {
      const std::lock_guard<std::mutex> hold(lock);
      capturing = true;
    }
    changed.notify_all();
    if (began == cudaSuccess) enqueue_all(s, in, captured, failed);  // while the other thread works
    std::unique_lock<std::mutex> hold(lock);
    changed.wait(hold, [&] { return done_here; });  // the capture stays open until it is done
    if (began != cudaSuccess) return;
    status_before = cudaStreamGetCaptureInfo(s.get(), &before_end);
    ended = cudaStreamEndCapture(s.get(), &graph);
    status_after = cudaStreamGetCaptureInfo(s.get(), &after_end);
  });
  {
    std::unique_lock<std::mutex> hold(lock);
    changed.wait(hold, [&] { return capturing; });
  }
  // Synchronous work during the capture: no assertion that could leave the capturing thread waiting.
  const status copied = copy(on_device, span(values));
  const status read = copy(span(back), on_device);
  const status read_pinned = copy(to_pinned, on_device);
  const status filled_bytes = fill_bytes(filled, byte_1d);
  const status copied_rows = copy(device_rows, host_rows);
  const status read_rows = copy(host_rows_back, device_rows);
  result<device_buffer<int>> allocated = device_buffer<int>::allocate(count);  // cudaMalloc, and cudaFree below
  const status allocation = allocated ? status() : status(allocated.error());
  if (allocated) *allocated = device_buffer<int>();
  {
    const std::lock_guard<std::mutex> hold(lock);
    done_here = true;
  }
  changed.notify_all();
  capturer.join();

  // The capture.
  REQUIRE(began == cudaSuccess);
  CHECK(status_before == cudaSuccess);
  CHECK(before_end == cudaStreamCaptureStatusActive);  // not invalidated by this thread's work
  REQUIRE(ended == cudaSuccess);
  REQUIRE(graph != nullptr);
  CHECK(status_after == cudaSuccess);
  CHECK(after_end == cudaStreamCaptureStatusNone);
  INFO((failed.empty() ? std::string() : failed.front()));
  CHECK(failed.empty());
  CHECK(cudaGetLastError() == cudaSuccess);

  // This thread's work: done, or refused before it wrote.
  const auto refused_or_done = [](const status& outcome, const char* what) {
    INFO(what << ": " << (outcome ? std::string("done") : std::string(outcome.error().message())));
    if (!outcome) CHECK(outcome.error().code() == errc::capture_active);
    return static_cast<bool>(outcome);
  };
  std::vector<int> device_now(count);
  REQUIRE(cudaMemcpy(device_now.data(), on_device.data().get(), on_device.size_bytes(), cudaMemcpyDeviceToHost) ==
          cudaSuccess);
  const std::vector<int> poisoned(count, [] {
    int word = 0;
    std::memset(&word, test::poison, sizeof word);
    return word;
  }());
  const bool wrote = refused_or_done(copied, "copy H2D");
  CHECK(device_now == (wrote ? values : poisoned));
  CHECK(back == (refused_or_done(read, "copy D2H") ? device_now : poisoned));
  CHECK(std::vector<int>(to_pinned.begin(), to_pinned.end()) ==
        (refused_or_done(read_pinned, "copy D2H to pinned") ? device_now : poisoned));
  std::vector<int> filled_now(count);
  REQUIRE(cudaMemcpy(filled_now.data(), filled.data().get(), filled.size_bytes(), cudaMemcpyDeviceToHost) ==
          cudaSuccess);
  CHECK(test::all_bytes(filled_now, refused_or_done(filled_bytes, "fill_bytes") ? byte_1d : test::poison));
  std::vector<int> rows_now(width * height);
  REQUIRE(cudaMemcpy2D(rows_now.data(), width * sizeof(int), device_rows.data().get(), device_rows.pitch_bytes(),
                       width * sizeof(int), height, cudaMemcpyDeviceToHost) == cudaSuccess);
  const bool rows_written = refused_or_done(copied_rows, "2D copy H2D");
  const bool rows_read = refused_or_done(read_rows, "2D copy D2H");
  for (std::size_t r = 0; r < height; ++r)
    for (std::size_t c = 0; c < width; ++c) {
      CHECK(rows_now[r * width + c] == (rows_written ? values[r * width + c] : poisoned[0]));
      CHECK(host_rows_back.view()(r, c) == (rows_read ? rows_now[r * width + c] : poisoned[0]));
    }
  refused_or_done(allocation, "cudaMalloc");

  replay_twice(graph, s.get(), in, captured, eager);
}
