// SPDX-License-Identifier: MIT
// The peer registry's counting, driven by a fake switch (no device): the first guard of a pair switches on, the
// last switches off what the first switched, errors count nothing, and guards taken and dropped from many threads
// never leave a pair switched off under a holder. Also built with ThreadSanitizer (tests/sanitize).
#include <cudamem/peer.hpp>

#include "catch.hpp"

#include <atomic>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

using namespace cudamem;
using detail::peer_entry;
using detail::peer_switch;
using detail::peer_table;

static_assert(!std::is_copy_constructible_v<peer_access> && !std::is_copy_assignable_v<peer_access>);
static_assert(std::is_nothrow_move_constructible_v<peer_access> && std::is_nothrow_move_assignable_v<peer_access>);

namespace {
// What the fake switch did, per pair of the first four devices. Written only by on/off, which the registry calls
// with its lock held: plain variables, so that ThreadSanitizer reports a switch outside the lock.
struct fake_state {
  bool on[4][4] = {};
  int switched_on = 0, switched_off = 0, borrowed_off = 0;
  bool borrow = false;       // on() finds access already on: it switches nothing
  bool fail = false;         // on() fails, changing nothing
  bool misuse = false;       // on() found a pair on, or off() one off: the counting is wrong
} fake;

status fake_on(device_id accessor, device_id owner, peer_entry& entry) noexcept {
  if (fake.fail) return error(cudaErrorTooManyPeers, "peer_access::enable", "cudaDeviceEnablePeerAccess");
  bool& on = fake.on[accessor.get()][owner.get()];
  if (on) fake.misuse = true;
  on = true;
  entry.switched_access = !fake.borrow;
  fake.switched_on += entry.switched_access ? 1 : 0;
  return {};
}
void fake_off(device_id accessor, device_id owner, const peer_entry& entry) noexcept {
  bool& on = fake.on[accessor.get()][owner.get()];
  if (!on) fake.misuse = true;
  on = false;
  (entry.switched_access ? fake.switched_off : fake.borrowed_off) += 1;
}
constexpr peer_switch fake_switch{&fake_on, &fake_off};

const device_id d0(0), d1(1), d2(2);
}  // namespace

TEST_CASE("the first guard of a pair switches it on, the last off; nested guards switch nothing", "[peer_registry]") {
  fake = {};
  static peer_table table;
  REQUIRE(table.acquire(d0, d1, fake_switch));
  CHECK(fake.switched_on == 1);
  REQUIRE(table.acquire(d0, d1, fake_switch));  // nested
  REQUIRE(table.acquire(d1, d0, fake_switch));  // the other direction is a pair of its own
  CHECK(fake.switched_on == 2);
  CHECK(table.guards(d0, d1) == 2);
  CHECK(table.guards(d1, d0) == 1);
  CHECK(table.guards(d0, d2) == 0);
  table.release(d0, d1, fake_switch);
  CHECK(fake.switched_off == 0);
  CHECK(fake.on[0][1]);
  table.release(d0, d1, fake_switch);  // out of order with the other direction's guard: independent
  CHECK(fake.switched_off == 1);
  CHECK(!fake.on[0][1]);
  CHECK(fake.on[1][0]);
  table.release(d1, d0, fake_switch);
  CHECK(fake.switched_off == 2);
  CHECK(table.guards(d1, d0) == 0);
  CHECK(!fake.misuse);
  // A release without a guard (never done by peer_access) changes nothing.
  table.release(d0, d1, fake_switch);
  CHECK(fake.switched_off == 2);
}

TEST_CASE("access that was on before the first guard is borrowed and never switched off", "[peer_registry]") {
  fake = {};
  static peer_table table;
  fake.borrow = true;
  REQUIRE(table.acquire(d0, d1, fake_switch));
  fake.borrow = false;
  REQUIRE(table.acquire(d0, d1, fake_switch));
  table.release(d0, d1, fake_switch);
  table.release(d0, d1, fake_switch);
  CHECK(fake.switched_on == 0);
  CHECK(fake.switched_off == 0);
  CHECK(fake.borrowed_off == 1);  // off() was told that the first guard switched nothing
  // The next first guard asks again: this time it switches on, and its last guard switches off.
  REQUIRE(table.acquire(d0, d1, fake_switch));
  table.release(d0, d1, fake_switch);
  CHECK(fake.switched_on == 1);
  CHECK(fake.switched_off == 1);
  CHECK(!fake.misuse);
}

TEST_CASE("a failed switch counts no guard", "[peer_registry]") {
  fake = {};
  static peer_table table;
  fake.fail = true;
  const status refused = table.acquire(d0, d1, fake_switch);
  REQUIRE_FALSE(refused);
  CHECK(refused.error() == cudaErrorTooManyPeers);
  CHECK(table.guards(d0, d1) == 0);
  fake.fail = false;
  REQUIRE(table.acquire(d0, d1, fake_switch));
  CHECK(table.guards(d0, d1) == 1);
  table.release(d0, d1, fake_switch);
  CHECK(fake.switched_on == 1);
  CHECK(fake.switched_off == 1);
  CHECK(!fake.misuse);
}

TEST_CASE("ordinals outside the table hold no guard", "[peer_registry]") {
  static peer_table table;
  CHECK(table.guards(device_id(-1), d0) == 0);
  CHECK(table.guards(d0, device_id(peer_table::max_devices)) == 0);
  CHECK(!detail::peer_access_held(device_id::host(), d0));
}

TEST_CASE("guards taken and dropped from 8 threads never leave a held pair switched off",
          "[peer_registry][concurrent]") {
  fake = {};
  static peer_table table;
  constexpr int threads = 8, rounds = 2000;
  std::atomic<int> failures{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();
      for (int i = 0; i < rounds; ++i) {
        // Half the threads nest a second pair inside the first; the pairs overlap between threads.
        const device_id accessor(t % 2), owner(1 - t % 2), third(2 + t % 2);
        if (!table.acquire(accessor, owner, fake_switch)) ++failures;
        if (t % 4 < 2 && !table.acquire(accessor, third, fake_switch)) ++failures;
        if (table.guards(accessor, owner) == 0) ++failures;
        if (t % 4 < 2) table.release(accessor, third, fake_switch);
        table.release(accessor, owner, fake_switch);
      }
    });
  go = true;
  for (auto& worker : workers) worker.join();
  CHECK(failures == 0);
  CHECK(!fake.misuse);
  CHECK(fake.switched_on == fake.switched_off);
  CHECK(fake.switched_on >= 1);
  for (int a = 0; a < 4; ++a)
    for (int o = 0; o < 4; ++o) {
      CHECK(table.guards(device_id(a), device_id(o)) == 0);
      CHECK(!fake.on[a][o]);
    }
}

TEST_CASE("peer access without a device is an error, never a crash", "[no_device]") {
  CHECK_FALSE(can_access_peer(d0, d1));
  CHECK_FALSE(peer_link_between(d0, d1));
  CHECK_FALSE(peers_of(d0));
  auto guard = peer_access::enable(d0, d1);
  REQUIRE_FALSE(guard);
  CHECK(guard.error().code() == errc::cuda);
  CHECK(std::string(guard.error().message()).rfind("peer_access::enable: cudaGetDeviceCount", 0) == 0);
  CHECK(!detail::peer_access_held(d0, d1));
  CHECK_FALSE(enable_both(d0, d1));
}
