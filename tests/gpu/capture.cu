// SPDX-License-Identifier: MIT
// Graph capture: every stream-ordered copy, fill and allocation can be captured, and a synchronous
// operation during a capture (any mode, any thread) either completes without disturbing it or is
// refused before anything is written.
#include "common.cuh"

#include <numeric>
#include <thread>

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
