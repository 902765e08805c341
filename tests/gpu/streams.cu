// Streams, events, device guards, ordering across streams, and graph capture.
#include "common.cuh"

using namespace cudamem;
using test::take;

namespace {
__global__ void wait_for_flag(volatile int* flag) {
  const long long start = clock64();
  // Bounded so that a broken test cannot hang the GPU: ~10 s at 2 GHz.
  while (*flag == 0 && clock64() - start < 20'000'000'000LL) {
  }
}
}  // namespace

TEST_CASE("streams are created with the options asked for", "[stream]") {
  auto plain = take(stream::create());
  unsigned flags = 0;
  REQUIRE(cudaStreamGetFlags(plain.get(), &flags) == cudaSuccess);
  CHECK(flags == cudaStreamNonBlocking);
  CHECK(plain.device() == take(current_device()));
  CHECK(take(plain.ref().device()) == plain.device());

  auto blocking = take(stream::create(stream_options{.non_blocking = false}));
  REQUIRE(cudaStreamGetFlags(blocking.get(), &flags) == cudaSuccess);
  CHECK(flags == cudaStreamDefault);

  int least = 0, greatest = 0;
  REQUIRE(cudaDeviceGetStreamPriorityRange(&least, &greatest) == cudaSuccess);
  auto urgent = take(stream::create(device_id(0), stream_options{.priority = greatest}));
  int priority = 0;
  REQUIRE(cudaStreamGetPriority(urgent.get(), &priority) == cudaSuccess);
  CHECK(priority == greatest);
}

TEST_CASE("a moved-from stream or event is refused, and release/adopt hand ownership over", "[stream]") {
  auto first = take(stream::create());
  const cudaStream_t handle = first.get();
  stream second = std::move(first);
  CHECK(second.get() == handle);
  CHECK_FALSE(first.valid());
  CHECK(first.synchronize().error().code() == errc::invalid_argument);
  CHECK(std::string(first.synchronize().error().message()) == "stream::synchronize: the stream was moved from");
  auto e = take(event::create());
  CHECK(e.record(first).error().code() == errc::invalid_argument);
  CHECK(first.wait(e).error().code() == errc::invalid_argument);

  const cudaStream_t raw = second.release();
  CHECK(raw == handle);
  stream adopted = take(stream::adopt(raw, device_id(0)));
  CHECK(stream::adopt(nullptr, device_id(0)).error().code() == errc::invalid_argument);
  CHECK(stream::adopt(cudaStreamPerThread, device_id(0)).error().code() == errc::invalid_argument);
  REQUIRE_OK(adopted.synchronize());

  event moved = std::move(e);
  CHECK_FALSE(e.valid());
  CHECK(e.synchronize().error().code() == errc::invalid_argument);
  CHECK(adopted.wait(e).error().code() == errc::invalid_argument);
  REQUIRE_OK(moved.record(adopted));
  REQUIRE_OK(moved.synchronize());
}

TEST_CASE("ready() reports queued work without blocking", "[stream][event]") {
  auto s = take(stream::create());
  auto flag = take(pinned_buffer<int>::allocate(1));
  flag[0] = 0;
  auto done = take(event::create());
  wait_for_flag<<<1, 1, 0, s.get()>>>(flag.data().get());
  REQUIRE(cudaGetLastError() == cudaSuccess);
  REQUIRE_OK(done.record(s));
  CHECK(take(s.ready()) == false);
  CHECK(take(done.ready()) == false);
  __atomic_store_n(flag.data().get(), 1, __ATOMIC_SEQ_CST);
  REQUIRE_OK(done.synchronize());
  CHECK(take(done.ready()) == true);
  CHECK(take(s.ready()) == true);
  // A not-ready query is not an error: CUDA's last-error slot stays clean.
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("events time work on a stream", "[event]") {
  auto s = take(stream::create());
  auto start = take(event::create());
  auto stop = take(event::create());
  auto scratch = take(device_buffer<int>::allocate(1, s));
  REQUIRE_OK(start.record(s));
  test::delay_then_write<<<1, 32, 0, s.get()>>>(scratch.view(), 1, 5'000'000ull);
  REQUIRE_OK(stop.record(s));
  REQUIRE_OK(stop.synchronize());
  const float ms = take(event::elapsed_ms(start, stop));
  CHECK(ms > 0.5f);
  CHECK(ms < 1000.0f);

  auto untimed = take(event::create(event_options{.timing = false}));
  REQUIRE_OK(untimed.record(s));
  REQUIRE_OK(untimed.synchronize());
  auto refused = event::elapsed_ms(start, untimed);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code() == errc::cuda);
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("work on two streams is ordered through an event", "[stream][event]") {
  auto producer = take(stream::create());
  auto consumer = take(stream::create());
  constexpr std::size_t n = 1 << 16;
  auto a = take(device_buffer<int>::allocate(n));
  auto b = take(device_buffer<int>::allocate(n));
  REQUIRE_OK(fill_bytes(a, 0));
  REQUIRE_OK(fill_bytes(b, 0));
  auto ready = take(event::create(event_options{.timing = false}));

  // The producer writes late; the consumer copies only after the event, so it must see the data.
  test::delay_then_write<<<64, 256, 0, producer.get()>>>(a.view(), 42, 20'000'000ull);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  REQUIRE_OK(ready.record(producer));
  REQUIRE_OK(consumer.wait(ready));
  REQUIRE_OK(copy(b, a, consumer));
  REQUIRE_OK(consumer.synchronize());
  CHECK(test::read_back(b.view()) == std::vector<int>(n, 42));
}

TEST_CASE("device_guard restores the previous device on every path", "[device]") {
  const int count = take(device_count());
  REQUIRE_OK(set_current_device(device_id(0)));
  {
    auto guard = take(device_guard::set(device_id(count - 1)));
    CHECK(take(current_device()) == device_id(count - 1));
    CHECK(guard.previous() == device_id(0));
    device_guard moved = std::move(guard);
    CHECK(take(current_device()) == device_id(count - 1));
  }
  CHECK(take(current_device()) == device_id(0));

  auto bad = device_guard::set(device_id(count));
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code() == errc::out_of_range);
  CHECK(std::string(bad.error().message()) ==
        "device_guard::set: device " + std::to_string(count) + " out of range (" + std::to_string(count) + " devices)");
  CHECK(take(current_device()) == device_id(0));
  CHECK(device_guard::set(device_id(-5)).error().code() == errc::out_of_range);
  CHECK(set_current_device(device_id(count)).error().code() == errc::out_of_range);
  CHECK(take(current_device()) == device_id(0));

  CHECK(take(max_pitch(device_id(0))) >= (std::size_t{1} << 20));
  CHECK(take(compute_capability(device_id(0))) >= 70);
  CHECK(max_pitch(device_id(count)).error().code() == errc::out_of_range);
}

TEST_CASE("a synchronous operation during a blocking stream's capture is refused, not run", "[stream][graph]") {
  auto capturing = take(stream::create(stream_options{.non_blocking = false}));
  constexpr std::size_t n = 256;
  auto dst = take(device_buffer<int>::allocate(n));
  auto src = take(device_buffer<int>::allocate(n));
  REQUIRE_OK(fill_bytes(src, 7));
  REQUIRE_OK(fill_bytes(dst, 0));

  REQUIRE(cudaStreamBeginCapture(capturing.get(), cudaStreamCaptureModeRelaxed) == cudaSuccess);
  auto refused = copy(dst, src);
  auto refused_fill = fill_bytes(dst, 1);
  // The stream-ordered form on the capturing stream is captured instead.
  auto captured = copy(dst, src, capturing);
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(capturing.get(), &graph);

  REQUIRE_FALSE(refused);
  CHECK(refused.error().code() == errc::capture_active);
  CHECK(refused_fill.error().code() == errc::capture_active);
  REQUIRE_OK(captured);
  REQUIRE(ended == cudaSuccess);  // the capture was not invalidated
  CHECK(cudaGetLastError() == cudaSuccess);

  // Nothing ran yet; replaying the graph performs the copy.
  CHECK(test::all_bytes(test::read_back(dst.view()), 0));
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
  REQUIRE(cudaGraphLaunch(exec, capturing.get()) == cudaSuccess);
  REQUIRE_OK(capturing.synchronize());
  CHECK(test::all_bytes(test::read_back(dst.view()), 7));
  REQUIRE(cudaGraphExecDestroy(exec) == cudaSuccess);
  REQUIRE(cudaGraphDestroy(graph) == cudaSuccess);
}

TEST_CASE("the per-thread and legacy default streams can be named explicitly", "[stream]") {
  auto a = take(device_buffer<int>::allocate(10));
  auto b = take(device_buffer<int>::allocate(10));
  REQUIRE_OK(fill_bytes(a, 3, stream_ref::per_thread()));
  REQUIRE_OK(copy(b, a, stream_ref::per_thread()));
  REQUIRE_OK(stream_ref::per_thread().synchronize());
  CHECK(test::all_bytes(test::read_back(b.view()), 3));
  REQUIRE_OK(fill_bytes(b, 4, stream_ref::legacy()));
  REQUIRE_OK(stream_ref::legacy().synchronize());
  CHECK(test::all_bytes(test::read_back(b.view()), 4));
}
