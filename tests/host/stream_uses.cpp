// SPDX-License-Identifier: MIT
// Use tracking's bookkeeping (detail/stream_uses.hpp) without a GPU, against a fake stream order: each stream is a
// queue of numbered operations, an event remembers the stream and the position it was recorded at (and the capture it
// was recorded in), and a wait makes the waiting stream's next operations depend on that position. The reference is
// the test's own list of where it used the buffer last on each stream; a wait on an event of another capture, or on an
// event recorded outside the capture the waiting stream is in, is what CUDA refuses (and would break a capture), so
// the fake records it as a broken capture and the tests check that none happened.
#include <cudamem/buffer.hpp>
#include <cudamem/pitched.hpp>

#include "catch.hpp"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

using namespace cudamem;

namespace {

struct fake_event {
  cudaStream_t stream = nullptr;
  std::uint64_t position = 0;  // the stream's operations before it
  unsigned long long capture = 0;
  bool recorded = false, destroyed = false;
};

struct fake_streams {
  std::map<cudaStream_t, std::uint64_t> enqueued, completed;
  std::map<cudaStream_t, unsigned long long> capture;  // absent: not capturing
  std::map<cudaStream_t, std::map<cudaStream_t, std::uint64_t>> waited;  // waiting -> (stream -> position covered)
  std::vector<fake_event> events{fake_event{}};  // marker i is events[i]; 0 is none
  int made = 0, records = 0, waits = 0, broken_captures = 0;
  int misuse = 0;  // a destroyed event recorded, waited for or destroyed again (counted: the fake runs on threads)
  bool refuse_records = false, refuse_waits = false;
  detail::use_check_list<int> checks;
  std::mutex mutex;

  // One operation on `s` (a kernel using the buffer, say); its position.
  std::uint64_t enqueue(cudaStream_t s) {
    const std::lock_guard<std::mutex> lock(mutex);
    return ++enqueued[s];
  }
  void complete(cudaStream_t s) {  // all of its work so far is done
    const std::lock_guard<std::mutex> lock(mutex);
    completed[s] = enqueued[s];
  }
  // Whether stream `waiting` is ordered after position `position` of stream `on` by a wait.
  bool ordered_after(cudaStream_t waiting, cudaStream_t on, std::uint64_t position) {
    const std::lock_guard<std::mutex> lock(mutex);
    auto w = waited.find(waiting);
    if (w == waited.end()) return false;
    auto p = w->second.find(on);
    return p != w->second.end() && p->second >= position;
  }
  int live_events() {
    const std::lock_guard<std::mutex> lock(mutex);
    int live = 0;
    for (std::size_t i = 1; i < events.size(); ++i) live += !events[i].destroyed;
    return live;
  }
};

struct fake_use_order {
  using marker = int;
  fake_streams* world = nullptr;

  result<unsigned long long> capture_of(stream_ref s, const char*) const noexcept {
    const std::lock_guard<std::mutex> lock(world->mutex);
    auto it = world->capture.find(s.get());
    return it == world->capture.end() ? 0ull : it->second;
  }
  status make(marker& m, device_id, const char*) const noexcept {
    const std::lock_guard<std::mutex> lock(world->mutex);
    world->events.push_back(fake_event{});
    m = static_cast<int>(world->events.size() - 1);
    ++world->made;
    return {};
  }
  status record(marker m, stream_ref s, const char* api) const noexcept {
    const std::lock_guard<std::mutex> lock(world->mutex);
    if (world->refuse_records) return error(cudaErrorInvalidResourceHandle, api, "cudaEventRecord");
    fake_event& e = world->events.at(std::size_t(m));
    world->misuse += e.destroyed;
    auto capture = world->capture.find(s.get());
    e = fake_event{s.get(), world->enqueued[s.get()], capture == world->capture.end() ? 0 : capture->second, true};
    ++world->records;
    return {};
  }
  status wait(stream_ref s, marker m, const char* api) const noexcept {
    const std::lock_guard<std::mutex> lock(world->mutex);
    if (world->refuse_waits) return error(cudaErrorInvalidResourceHandle, api, "cudaStreamWaitEvent");
    const fake_event& e = world->events.at(std::size_t(m));
    world->misuse += e.destroyed;
    auto capture = world->capture.find(s.get());
    const unsigned long long mine = capture == world->capture.end() ? 0 : capture->second;
    if (e.recorded && e.capture != mine) ++world->broken_captures;  // CUDA refuses it; a capture would break
    std::uint64_t& covered = world->waited[s.get()][e.stream];
    if (e.position > covered) covered = e.position;
    ++world->waits;
    return {};
  }
  void destroy(marker m) const noexcept {
    if (m == 0) return;
    const std::lock_guard<std::mutex> lock(world->mutex);
    fake_event& e = world->events.at(std::size_t(m));
    world->misuse += e.destroyed;
    e.destroyed = true;
  }
  bool done(marker m) const noexcept {
    const std::lock_guard<std::mutex> lock(world->mutex);
    const fake_event& e = world->events.at(std::size_t(m));
    return !e.recorded || world->completed[e.stream] >= e.position;
  }
  void settle(marker m) const noexcept {  // the free point's stream reaches it
    const std::lock_guard<std::mutex> lock(world->mutex);
    const fake_event& e = world->events.at(std::size_t(m));
    std::uint64_t& done_upto = world->completed[e.stream];
    if (done_upto < e.position) done_upto = e.position;
  }
  detail::use_check_list<int>& checks() const noexcept { return world->checks; }
};

using uses_type = detail::basic_stream_uses<fake_use_order>;

// The owners record their uses when given to a stream-ordered copy or fill; views cannot.
static_assert(detail::tracked_owner<device_buffer<float>> && detail::tracked_owner<pinned_buffer<int>>);
static_assert(detail::tracked_owner<device_pitched_buffer<int>> && detail::tracked_owner<const managed_buffer<int>>);
static_assert(!detail::tracked_owner<device_span<float>> && !detail::tracked_owner<device_pitched_span<int>>);

std::vector<std::string> reports;
std::mutex reports_mutex;
void recording_handler(const error& e) noexcept {
  const std::lock_guard<std::mutex> lock(reports_mutex);
  reports.push_back(e.message());
}
struct handler_scope {
  release_handler previous;
  handler_scope() : previous(set_release_handler(&recording_handler)) { reports.clear(); }
  ~handler_scope() { set_release_handler(previous); }
};

stream_ref raw(std::uintptr_t handle) {
  return stream_ref::from_native_handle(reinterpret_cast<cudaStream_t>(handle), device_id(0));
}
stream_ref object(std::uintptr_t handle, std::uint64_t id) {
  return detail::stream_identity::make(reinterpret_cast<cudaStream_t>(handle), device_id(0), id);
}

struct uses_fixture {
  fake_streams world;
  uses_type uses{fake_use_order{&world}};
  stream_ref a = raw(0xa000), b = raw(0xb000), c = raw(0xc000);
  handler_scope handler;
  ~uses_fixture() { CHECK(world.misuse == 0); }
  // A use on `s` as a copy makes it: the record prepared first, the operation, then its end marked.
  std::uint64_t use(stream_ref s) {
    auto m = uses.prepare(a, s, "copy", false);
    REQUIRE(m);
    const std::uint64_t at = world.enqueue(s.get());
    REQUIRE(uses.commit(*m, s, "copy"));
    return at;
  }
};

}  // namespace

TEST_CASE_METHOD(uses_fixture, "a buffer used on its own stream only records nothing and makes no call",
                 "[stream_uses]") {
  for (int i = 0; i < 3; ++i) use(a);
  CHECK(uses.empty());
  CHECK(uses.note(a, a, "buffer::use_on"));
  CHECK(uses.join(a, a, "buffer::free"));
  CHECK(world.made == 0);
  CHECK(world.records == 0);
  CHECK(world.waits == 0);
  // The default stream's two names are one stream.
  CHECK(uses.note(stream_ref(), stream_ref::legacy(), "buffer::use_on"));
  CHECK(uses.empty());
  CHECK(sizeof(uses_type) == sizeof(void*) + sizeof(fake_use_order));
  CHECK(sizeof(detail::stream_uses) == sizeof(void*));
}

TEST_CASE_METHOD(uses_fixture, "the free waits on its own stream for the last use on each other stream",
                 "[stream_uses]") {
  use(b);
  world.enqueue(b.get());  // unrelated work on b between the uses
  const std::uint64_t last_b = use(b);
  const std::uint64_t last_c = use(c);
  use(a);
  CHECK(uses.count() == 2);
  CHECK(world.made == 2);     // one event per other stream,
  CHECK(world.records == 3);  // recorded after each use there
  REQUIRE(uses.join(a, a, "buffer::free"));
  CHECK(world.ordered_after(a.get(), b.get(), last_b));
  CHECK(world.ordered_after(a.get(), c.get(), last_c));
  CHECK(world.waits == 2);
  CHECK(world.broken_captures == 0);
  CHECK(world.live_events() == 0);  // destroyed with the records
  CHECK(uses.empty());
  CHECK(reports.empty());
}

TEST_CASE_METHOD(uses_fixture, "use_on covers the work queued on the stream before the call, not after it",
                 "[stream_uses]") {
  world.enqueue(b.get());
  const std::uint64_t kernel = world.enqueue(b.get());  // a kernel given the buffer's view
  REQUIRE(uses.note(a, b, "buffer::use_on"));
  const std::uint64_t later = world.enqueue(b.get());
  REQUIRE(uses.join(a, a, "buffer::free"));
  CHECK(world.ordered_after(a.get(), b.get(), kernel));
  CHECK_FALSE(world.ordered_after(a.get(), b.get(), later));
}

TEST_CASE_METHOD(uses_fixture, "streams are told apart by a stream object's id, not by a handle CUDA reuses",
                 "[stream_uses]") {
  const stream_ref first = object(0xd000, 41), second = object(0xd000, 42);  // the handle came back for a new stream
  REQUIRE(uses.note(a, first, "buffer::use_on"));
  REQUIRE(uses.note(a, second, "buffer::use_on"));
  REQUIRE(uses.note(a, second, "buffer::use_on"));
  CHECK(uses.count() == 2);  // the first stream's record is not overwritten by the second's
  REQUIRE(uses.join(a, a, "buffer::free"));
  CHECK(world.waits == 2);
}

TEST_CASE_METHOD(uses_fixture, "a moved record list goes with the buffer; the moved-from one is empty",
                 "[stream_uses]") {
  const std::uint64_t at = use(b);
  uses_type moved(std::move(uses));
  CHECK(uses.empty());
  CHECK(moved.count() == 1);
  CHECK(uses.join(a, a, "buffer::free"));
  CHECK(world.waits == 0);
  REQUIRE(moved.join(a, a, "buffer::free"));
  CHECK(world.ordered_after(a.get(), b.get(), at));
  uses_type assigned{fake_use_order{&world}};
  use(c);
  assigned = std::move(uses);
  CHECK(assigned.count() == 1);
  CHECK(uses.empty());
  REQUIRE(assigned.join(a, a, "buffer::free"));
  CHECK(world.live_events() == 0);
}

TEST_CASE_METHOD(uses_fixture, "records never joined are dropped with the list (a buffer that held no memory)",
                 "[stream_uses]") {
  {
    uses_type local{fake_use_order{&world}};
    REQUIRE(local.note(a, b, "buffer::use_on"));
  }
  CHECK(world.made == 1);
  CHECK(world.live_events() == 0);
}

TEST_CASE_METHOD(uses_fixture, "a moved-from stream is refused and nothing is recorded", "[stream_uses]") {
  stream_ref gone = stream_ref::from_native_handle(detail::invalid_stream());
  auto refused = uses.note(a, gone, "buffer::use_on");
  REQUIRE_FALSE(refused);
  CHECK(refused.error() == errc::invalid_argument);
  CHECK(uses.empty());
}

TEST_CASE_METHOD(uses_fixture, "a record CUDA refuses is an error; the free still waits for the others",
                 "[stream_uses]") {
  const std::uint64_t at = use(c);
  world.refuse_records = true;
  auto refused = uses.note(a, b, "buffer::use_on");
  REQUIRE_FALSE(refused);
  CHECK(refused.error() == cudaErrorInvalidResourceHandle);
  world.refuse_records = false;
  REQUIRE(uses.join(a, a, "buffer::free"));
  CHECK(world.ordered_after(a.get(), c.get(), at));
  CHECK(world.broken_captures == 0);
}

TEST_CASE_METHOD(uses_fixture, "a wait CUDA refuses keeps the memory and tells the release handler", "[stream_uses]") {
  use(b);
  world.refuse_waits = true;
  CHECK_FALSE(uses.join(a, a, "buffer::free"));
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].find("cudaStreamWaitEvent") != std::string::npos);
  CHECK(world.live_events() == 0);
}

TEST_CASE_METHOD(uses_fixture, "a use in a capture the buffer's stream is not part of: refused, or not tracked",
                 "[stream_uses][capture]") {
  world.capture[b.get()] = 7;
  auto refused = uses.note(a, b, "buffer::use_on");
  REQUIRE_FALSE(refused);
  CHECK(refused.error() == errc::capture_active);
  CHECK(std::string(refused.error().message()).find("launches") != std::string::npos);
  CHECK(world.made == 0);
  use(b);  // a copy in that capture: the graph's launches are the uses; the copy goes ahead untracked
  CHECK(uses.empty());
  CHECK(world.records == 0);
  CHECK(uses.join(a, a, "buffer::free"));
  CHECK(world.waits == 0);
}

TEST_CASE_METHOD(uses_fixture, "a use in the buffer's own capture becomes a dependency of the free in it",
                 "[stream_uses][capture]") {
  world.capture[a.get()] = 9;
  world.capture[b.get()] = 9;
  const std::uint64_t at = use(b);
  REQUIRE(uses.count() == 1);
  REQUIRE(uses.join(a, a, "buffer::free"));  // still capturing: a wait inside the capture, a graph edge
  CHECK(world.ordered_after(a.get(), b.get(), at));
  CHECK(world.broken_captures == 0);
  CHECK(reports.empty());
}

TEST_CASE_METHOD(uses_fixture, "a use recorded in a capture that has ended is not waited for outside it",
                 "[stream_uses][capture]") {
  world.capture[a.get()] = 9;
  world.capture[b.get()] = 9;
  use(b);
  world.capture.clear();  // the capture ended: its events cannot be waited for by other work
  const std::uint64_t after = use(b);  // a use outside it: tracked apart
  CHECK(uses.count() == 2);
  REQUIRE(uses.join(a, a, "buffer::free"));
  CHECK(world.waits == 1);
  CHECK(world.ordered_after(a.get(), b.get(), after));
  CHECK(world.broken_captures == 0);
  CHECK(world.live_events() == 0);
}

TEST_CASE_METHOD(uses_fixture, "a buffer used before a capture and freed inside it is kept, not freed unordered",
                 "[stream_uses][capture]") {
  use(b);
  world.capture[a.get()] = 3;
  CHECK_FALSE(uses.join(a, a, "buffer::free"));
  CHECK(world.waits == 0);
  CHECK(world.broken_captures == 0);
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].find("before the capture") != std::string::npos);
  CHECK(reports[0].find("kept") != std::string::npos);
  CHECK(world.live_events() == 0);
}

TEST_CASE_METHOD(uses_fixture, "checking mode reports a use the program did not order before the free",
                 "[stream_uses][checking]") {
  world.checks.enabled = 1;
  use(b);             // B's use is still running when...
  world.enqueue(a.get());
  REQUIRE(uses.join(a, a, "buffer::free"));  // ...the free is reached on A: a race without tracking
  CHECK(world.checks.pending.size() == 1);
  CHECK(world.live_events() == 2);  // the use's event and the free point, owned by the check
  CHECK(detail::settle_use_checks(fake_use_order{&world}, true) == 1);
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].find("0xa000") != std::string::npos);  // the buffer's, using and freeing streams
  CHECK(reports[0].find("0xb000") != std::string::npos);
  CHECK(reports[0].find("by copy") != std::string::npos);
  CHECK(world.live_events() == 0);
  CHECK(world.checks.pending.empty());
}

TEST_CASE_METHOD(uses_fixture, "checking mode is quiet where the use was done before the free was reached",
                 "[stream_uses][checking]") {
  world.checks.enabled = 1;
  use(b);
  use(c);
  world.complete(b.get());  // the program synchronized with b (an event, a stream synchronize)
  REQUIRE(uses.join(a, a, "buffer::free"));
  world.complete(c.get());
  CHECK(detail::settle_use_checks(fake_use_order{&world}, true) == 0);
  CHECK(reports.empty());
  CHECK(world.live_events() == 0);
  // The free still waited for both: the check observes, the tracking orders.
  CHECK(world.waits == 2);
}

TEST_CASE_METHOD(uses_fixture, "checking mode settles without waiting the checks whose free was reached",
                 "[stream_uses][checking]") {
  world.checks.enabled = 1;
  use(b);
  world.enqueue(a.get());  // A is busy: its free point is not reached at once
  REQUIRE(uses.join(a, a, "buffer::free"));
  uses_type other{fake_use_order{&world}};
  REQUIRE(other.note(a, c, "buffer::use_on"));
  CHECK(detail::settle_use_checks(fake_use_order{&world}, false) == 0);  // the free point is not reached yet
  CHECK(world.checks.pending.size() == 1);
  world.complete(a.get());  // A reaches the free while B's use still runs
  REQUIRE(other.join(a, a, "buffer::free"));  // a later free settles the first check on the way
  CHECK(reports.size() == 1);
  CHECK(world.checks.pending.size() == 1);
  world.complete(c.get());
  CHECK(detail::settle_use_checks(fake_use_order{&world}, true) == 0);
  CHECK(world.live_events() == 0);
}

TEST_CASE_METHOD(uses_fixture, "checking mode off: no free points, nothing pending", "[stream_uses][checking]") {
  world.checks.enabled = 0;
  use(b);
  REQUIRE(uses.join(a, a, "buffer::free"));
  CHECK(world.checks.pending.empty());
  CHECK(world.made == 1);
}

TEST_CASE("the process-wide checking switch reads the environment once and can be set", "[stream_uses][checking]") {
  const bool was = set_stream_use_checking(true);
  CHECK(set_stream_use_checking(false));
  CHECK_FALSE(set_stream_use_checking(was));
  CHECK(check_stream_uses() == 0);  // nothing pending: no CUDA call
}

TEST_CASE_METHOD(uses_fixture, "eight threads using one buffer on eight streams at once: one record each",
                 "[stream_uses][threads]") {
  constexpr int threads = 8, rounds = 200;
  std::vector<std::thread> pool;
  std::vector<std::uint64_t> last(threads);
  std::atomic<int> failed{0};  // Catch2's assertions are not for other threads
  const uses_type& shared = uses;  // as a const buffer copied from on several threads
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      const stream_ref s = object(0x10000 + std::uintptr_t(t) * 0x100, 100 + std::uint64_t(t));
      for (int r = 0; r < rounds; ++r) {
        auto m = shared.prepare(a, s, "copy", false);
        if (!m) {
          ++failed;
          return;
        }
        last[std::size_t(t)] = world.enqueue(s.get());
        if (!shared.commit(*m, s, "copy")) ++failed;
      }
    });
  for (auto& t : pool) t.join();
  CHECK(failed == 0);
  CHECK(uses.count() == threads);
  CHECK(world.made == threads);
  CHECK(world.records == threads * rounds);
  REQUIRE(uses.join(a, a, "buffer::free"));
  for (int t = 0; t < threads; ++t)
    CHECK(world.ordered_after(a.get(), reinterpret_cast<cudaStream_t>(0x10000 + std::uintptr_t(t) * 0x100),
                              last[std::size_t(t)]));
  CHECK(world.live_events() == 0);
}

TEST_CASE("a host buffer used on its own stream makes no CUDA call; use_on refuses a moved-from stream",
          "[stream_uses]") {
  auto b = host_buffer<int>::allocate(4);
  REQUIRE(b);
  CHECK(b->use_on(b->stream()));
  CHECK(b->use_on(stream_ref::legacy()));
  auto refused = b->use_on(stream_ref::from_native_handle(detail::invalid_stream()));
  REQUIRE_FALSE(refused);
  CHECK(refused.error() == errc::invalid_argument);
  // One pointer more than the buffer held before use tracking: data, size, device, stream, resource, records.
  CHECK(sizeof(device_buffer<float>) == 72);
}
