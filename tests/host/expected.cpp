// SPDX-License-Identifier: MIT
// result<T> and status against the documented behaviour of std::expected<T, E> and
// std::expected<void, E> ([expected.object], [expected.void]), member by member, so that result stays
// a subset that code written for std::expected compiles against. What must and must not compile is
// checked with static_asserts; where result differs from std::expected on purpose (value() aborts
// instead of throwing; an error converts to a result implicitly), the test says so.
#include <cudamem/device.hpp>
#include <cudamem/error.hpp>

#include "catch.hpp"

#include <sys/wait.h>
#include <unistd.h>
#include <concepts>
#include <csignal>
#include <cstdio>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

using namespace cudamem;

namespace {

const error failure = error(errc::out_of_range, "test", "no value");
const error other_failure = error(errc::invalid_argument, "test", "another");

struct explicit_from_int {
  explicit explicit_from_int(int v) : value(v) {}
  int value;
};
struct not_default_constructible {
  explicit not_default_constructible(int) {}
};
struct immovable {
  explicit immovable(int v) : value(v) {}
  immovable(immovable&&) = delete;
  int value;
};
struct may_throw {
  may_throw(int) noexcept(false) {}
};
struct list_sum {
  list_sum(std::initializer_list<int> values) noexcept {
    for (int v : values) sum += v;
  }
  int sum = 0;
};
struct point {
  int x = 0;
  int twice() const { return 2 * x; }
};

// Which overload a callback received: the value category that result passed on.
enum class category { lvalue, const_lvalue, rvalue, const_rvalue };
struct category_of {
  category operator()(int&) const { return category::lvalue; }
  category operator()(const int&) const { return category::const_lvalue; }
  category operator()(int&&) const { return category::rvalue; }
  category operator()(const int&&) const { return category::const_rvalue; }
  category operator()(error&) const { return category::lvalue; }
  category operator()(const error&) const { return category::const_lvalue; }
  category operator()(error&&) const { return category::rvalue; }
  category operator()(const error&&) const { return category::const_rvalue; }
};
struct category_result {
  template <class A>
  result<category> operator()(A&& a) const {
    return category_of{}(std::forward<A>(a));
  }
};

// Counts live objects, copies and assignments; copies throw when asked.
struct counted {
  static inline int live = 0;
  static inline int copy_constructions = 0;
  static inline int copy_assignments = 0;
  static inline bool throw_on_copy = false;
  int value;
  explicit counted(int v) : value(v) { ++live; }
  counted(const counted& other) : value(other.value) {
    if (throw_on_copy) throw std::runtime_error("copy");
    ++copy_constructions;
    ++live;
  }
  counted(counted&& other) noexcept : value(other.value) { ++live; }
  counted& operator=(const counted& other) {
    if (throw_on_copy) throw std::runtime_error("copy assignment");
    ++copy_assignments;
    value = other.value;
    return *this;
  }
  counted& operator=(counted&& other) noexcept {
    value = other.value;
    return *this;
  }
  ~counted() { --live; }
  static void reset() { live = copy_constructions = copy_assignments = 0, throw_on_copy = false; }
};
// Copying and moving both throw when asked: std::expected's third reinit-expected case.
struct fragile {
  static inline int live = 0;
  static inline bool throw_now = false;
  int value;
  explicit fragile(int v) : value(v) { ++live; }
  fragile(const fragile& other) : value(other.value) {
    if (throw_now) throw std::runtime_error("copy");
    ++live;
  }
  fragile(fragile&& other) noexcept(false) : value(other.value) {
    if (throw_now) throw std::runtime_error("move");
    ++live;
  }
  fragile& operator=(const fragile&) = default;
  fragile& operator=(fragile&&) = default;
  ~fragile() { --live; }
};

template <class R, class... Args>
concept can_emplace = requires(R& r, Args&&... args) { r.emplace(std::forward<Args>(args)...); };
template <class A, class B>
concept comparable = requires(const A& a, const B& b) {
  { a == b } -> std::convertible_to<bool>;
  { a != b } -> std::convertible_to<bool>;
};

// Runs `body` in a child process; true when the child was killed by SIGABRT and wrote `expected`
// to stderr.
template <class Body>
bool aborts_with(Body body, const std::string& expected) {
  int pipe_ends[2];
  if (pipe(pipe_ends) != 0) return false;
  std::fflush(nullptr);
  const pid_t child = fork();
  if (child == 0) {
    std::signal(SIGABRT, SIG_DFL);  // the test framework's handler would report it as a failure
    dup2(pipe_ends[1], 2);
    close(pipe_ends[0]);
    body();
    _exit(0);
  }
  close(pipe_ends[1]);
  std::string said;
  char chunk[256];
  for (ssize_t n; (n = read(pipe_ends[0], chunk, sizeof chunk)) > 0;) said.append(chunk, static_cast<std::size_t>(n));
  close(pipe_ends[0]);
  int how = 0;
  waitpid(child, &how, 0);
  return WIFSIGNALED(how) && WTERMSIG(how) == SIGABRT && said.find(expected) != std::string::npos;
}

}  // namespace

// [expected.object.general]
static_assert(std::is_same_v<result<int>::value_type, int>);
static_assert(std::is_same_v<result<int>::error_type, error>);
static_assert(std::is_same_v<result<int>::rebind<long>, result<long>>);
static_assert(std::is_same_v<status::value_type, void>);
static_assert(std::is_same_v<status::rebind<int>, result<int>>);

TEST_CASE("constructors follow std::expected", "[result][expected]") {
  // Default: a value-initialized T, only where T has a default constructor.
  STATIC_REQUIRE(std::is_default_constructible_v<result<int>>);
  STATIC_REQUIRE_FALSE(std::is_default_constructible_v<result<not_default_constructible>>);
  CHECK(*result<int>() == 0);

  // From a value: explicit exactly where T's constructor is (explicit(!is_convertible_v<U, T>)).
  STATIC_REQUIRE(std::is_constructible_v<result<device_id>, int>);
  STATIC_REQUIRE_FALSE(std::is_convertible_v<int, result<device_id>>);  // result<device_id> d = 3;
  STATIC_REQUIRE_FALSE(std::is_convertible_v<int, result<explicit_from_int>>);
  STATIC_REQUIRE(std::is_convertible_v<int, result<long>>);
  STATIC_REQUIRE(std::is_convertible_v<const char*, result<std::string>>);
  STATIC_REQUIRE_FALSE(std::is_constructible_v<result<int>, std::string>);
  CHECK(result<device_id>(3)->get() == 3);
  result<std::string> text = "abc";
  CHECK(*text == "abc");

  // In place, also from an initializer list; the tags never convert from {}.
  CHECK(*result<std::string>(std::in_place, 3, 'x') == "xxx");
  CHECK(result<std::vector<int>>(std::in_place, {1, 2, 3})->size() == 3);
  CHECK(result<immovable>(std::in_place, 7)->value == 7);
  STATIC_REQUIRE_FALSE(std::is_constructible_v<result<int>, std::in_place_t, std::string>);
  STATIC_REQUIRE_FALSE(std::is_convertible_v<std::in_place_t, result<int>>);

  // From an error: unexpect, or (cudamem's part for std::unexpected) the error itself.
  const result<int> failed(unexpect, failure);
  REQUIRE_FALSE(failed);
  CHECK(failed.error() == failure);
  const result<int> implicit = failure;
  CHECK_FALSE(implicit.has_value());

  // Copy and move exist where T's do; move is noexcept where T's is.
  STATIC_REQUIRE(std::is_copy_constructible_v<result<std::string>>);
  STATIC_REQUIRE_FALSE(std::is_copy_constructible_v<result<std::unique_ptr<int>>>);
  STATIC_REQUIRE(std::is_nothrow_move_constructible_v<result<std::unique_ptr<int>>>);
  STATIC_REQUIRE_FALSE(std::is_move_constructible_v<result<immovable>>);
  STATIC_REQUIRE_FALSE(std::is_nothrow_move_constructible_v<result<fragile>>);

  // From result<U>: the value converted, explicit where that conversion is.
  result<const char*> name = "name";
  result<std::string> converted = name;
  CHECK(*converted == "name");
  result<std::string> moved_in = result<const char*>("moved");
  CHECK(*moved_in == "moved");
  result<std::string> converted_error = result<const char*>(failure);
  CHECK(converted_error.error() == failure);
  STATIC_REQUIRE(std::is_constructible_v<result<explicit_from_int>, const result<int>&>);
  STATIC_REQUIRE_FALSE(std::is_convertible_v<const result<int>&, result<explicit_from_int>>);
  // bool is made from the value, never from the result (which converts to bool explicitly).
  const result<bool> from_zero(result<int>(0));
  REQUIRE(from_zero.has_value());
  CHECK_FALSE(*from_zero);
}

TEST_CASE("assignment assigns like to like and keeps its state when T throws", "[result][expected]") {
  counted::reset();
  {
    result<counted> a(std::in_place, 1);
    const result<counted> b(std::in_place, 2);
    a = b;  // value to value: T's copy assignment, not destroy-and-construct
    CHECK(a->value == 2);
    CHECK(counted::copy_assignments == 1);
    CHECK(counted::copy_constructions == 0);

    a = failure;  // value to error
    CHECK(a.error() == failure);
    CHECK(counted::live == 1);
    a = b;  // error to value: constructs
    CHECK(a->value == 2);
    CHECK(counted::copy_constructions == 1);
    CHECK(counted::live == 2);

    // A copy assignment that throws leaves the value as T left it, destroyed once.
    counted::throw_on_copy = true;
    CHECK_THROWS(a = b);
    REQUIRE(a.has_value());
    CHECK(counted::live == 2);
    // A copy construction that throws (error to value) leaves the error.
    result<counted> c = failure;
    CHECK_THROWS(c = b);
    REQUIRE_FALSE(c.has_value());
    CHECK(c.error() == failure);
    CHECK(std::string(c.error().message()) == failure.message());
    counted::throw_on_copy = false;
  }
  CHECK(counted::live == 0);  // every value destroyed exactly once

  // T that may throw on copy and on move: the error survives a throwing construction.
  fragile::live = 0;
  {
    result<fragile> holder(std::in_place, 5);
    result<fragile> target = other_failure;
    fragile::throw_now = true;
    CHECK_THROWS(target = holder);
    CHECK_THROWS(target = std::move(holder));
    fragile::throw_now = false;
    REQUIRE_FALSE(target.has_value());
    CHECK(target.error() == other_failure);
    CHECK(std::string(target.error().message()) == other_failure.message());
    target = holder;
    CHECK(target->value == 5);
  }
  CHECK(fragile::live == 0);

  // From a value or an error directly.
  result<std::string> s = failure;
  s = "now";
  CHECK(*s == "now");
  s = std::string("again");
  CHECK(*s == "again");
  s = other_failure;
  CHECK(s.error() == other_failure);
  STATIC_REQUIRE_FALSE(std::is_copy_assignable_v<result<std::unique_ptr<int>>>);
  STATIC_REQUIRE(std::is_move_assignable_v<result<std::unique_ptr<int>>>);
  STATIC_REQUIRE_FALSE(std::is_assignable_v<result<int>&, std::string>);
}

TEST_CASE("emplace and swap", "[result][expected]") {
  result<std::string> r = failure;
  std::string& made = r.emplace(std::string(2, 'z'));
  CHECK(made == "zz");
  CHECK(&made == &*r);
  CHECK(r.emplace(std::string("other")) == "other");
  CHECK(result<list_sum>(failure).emplace({4, 5}).sum == 9);
  // emplace needs a constructor that cannot throw ([expected.object.assign]).
  STATIC_REQUIRE(can_emplace<result<std::string>, std::string>);
  STATIC_REQUIRE_FALSE(can_emplace<result<may_throw>, int>);

  result<std::string> a = "a";
  result<std::string> b = "b";
  swap(a, b);
  CHECK((*a == "b" && *b == "a"));
  result<std::string> e = failure;
  a.swap(e);
  CHECK(a.error() == failure);
  CHECK(*e == "b");
  e.swap(a);
  CHECK(*a == "b");
  CHECK(e.error() == failure);
  result<std::string> f = other_failure;
  e.swap(f);
  CHECK(e.error() == other_failure);
  CHECK(f.error() == failure);
  STATIC_REQUIRE(std::is_nothrow_swappable_v<result<std::string>>);
  STATIC_REQUIRE_FALSE(std::is_swappable_v<result<immovable>>);

  status s = failure;
  s.emplace();
  CHECK(s);
  status t = failure;
  swap(s, t);
  CHECK((!s && t));
}

TEST_CASE("observers have std::expected's value categories", "[result][expected]") {
  result<int> r = 4;
  const result<int>& c = r;
  STATIC_REQUIRE(std::is_same_v<decltype(r.value()), int&>);
  STATIC_REQUIRE(std::is_same_v<decltype(c.value()), const int&>);
  // std::expected gives T&& here; result moves the value out (see "a reference to the value of a temporary result").
  STATIC_REQUIRE(std::is_same_v<decltype(std::move(r).value()), int>);
  STATIC_REQUIRE(std::is_same_v<decltype(std::move(c).value()), const int&&>);
  STATIC_REQUIRE(std::is_same_v<decltype(*r), int&>);
  STATIC_REQUIRE(std::is_same_v<decltype(*c), const int&>);
  STATIC_REQUIRE(std::is_same_v<decltype(*std::move(r)), int>);
  STATIC_REQUIRE(std::is_same_v<decltype(*std::move(c)), const int&&>);
  STATIC_REQUIRE(std::is_same_v<decltype(*std::declval<result<immovable>>()), immovable&&>);  // nothing to move
  STATIC_REQUIRE(std::is_same_v<decltype(r.error()), error&>);
  STATIC_REQUIRE(std::is_same_v<decltype(c.error()), const error&>);
  STATIC_REQUIRE(std::is_same_v<decltype(std::move(r).error()), error&&>);
  STATIC_REQUIRE(std::is_same_v<decltype(std::move(c).error()), const error&&>);
  STATIC_REQUIRE(std::is_same_v<decltype(r.operator->()), int*>);
  STATIC_REQUIRE(std::is_same_v<decltype(c.operator->()), const int*>);
  STATIC_REQUIRE_FALSE(std::is_convertible_v<result<int>, bool>);  // explicit operator bool
  status s;
  STATIC_REQUIRE(std::is_void_v<decltype(*s)>);
  STATIC_REQUIRE(std::is_void_v<decltype(s.value())>);
  STATIC_REQUIRE(std::is_void_v<decltype(std::move(s).value())>);
  STATIC_REQUIRE(std::is_same_v<decltype(std::move(s).error()), error&&>);

  r.value() = 5;
  CHECK(*r == 5);
  result<point> p = point{3};
  CHECK(p->twice() == 6);
  CHECK(std::move(p).value().x == 3);
}

namespace {
result<counted> make_counted() { return result<counted>(std::in_place, 7); }
}  // namespace

TEST_CASE("a reference to the value of a temporary result keeps the value alive", "[result][expected]") {
  // std::expected's T&& would bind the reference to the value inside the result, destroyed at the semicolon
  // (`const peer_access& g = *peer_access::enable(a, b);` would end the access there). result gives a T instead,
  // whose life the reference extends.
  counted::reset();
  {
    const counted& held = *make_counted();
    CHECK(counted::live == 1);
    CHECK(held.value == 7);
    auto&& forwarded = make_counted().value();
    CHECK(counted::live == 2);
    CHECK(forwarded.value == 7);
  }
  CHECK(counted::live == 0);
  // Moving out of a named result leaves it holding a moved-from value, as std::move(*r) does.
  result<std::unique_ptr<int>> owner = std::make_unique<int>(5);
  const std::unique_ptr<int> taken = *std::move(owner);
  CHECK(*taken == 5);
  REQUIRE(owner.has_value());
  CHECK(*owner == nullptr);
}

TEST_CASE("value() aborts with the message on an error, in every build", "[result][expected]") {
  // std::expected throws bad_expected_access; cudamem builds without exceptions, so it aborts.
  CHECK(aborts_with([] { (void)result<int>(failure).value(); },
                    "cudamem: result::value() called on an error: test: no value"));
  CHECK(aborts_with(
      [] {
        const result<std::string> r = failure;
        (void)r.value();
      },
      "result::value() called on an error"));
  CHECK(aborts_with([] { status(failure).value(); }, "cudamem: status::value() called on an error: test: no value"));
  CHECK_FALSE(aborts_with([] { (void)result<int>(1).value(); }, "cudamem"));
#ifndef NDEBUG
  // operator* checks only in debug builds, as std::expected's hardened modes do.
  CHECK(aborts_with([] { (void)*result<int>(failure); }, "result::operator* called on an error"));
  CHECK(aborts_with([] { (void)result<int>(1).error(); }, "result::error() called on a success"));
#endif
}

TEST_CASE("value_or and error_or", "[result][expected]") {
  result<std::string> r = "kept";
  result<std::string> e = failure;
  CHECK(r.value_or("fallback") == "kept");
  CHECK(e.value_or("fallback") == "fallback");
  CHECK(std::move(e).value_or({}).empty());  // the fallback defaults to T
  result<std::unique_ptr<int>> owner = std::make_unique<int>(3);
  CHECK(*std::move(owner).value_or(nullptr) == 3);
  CHECK(r.error_or(other_failure) == other_failure);
  CHECK(e.error_or(other_failure) == failure);
  CHECK(status().error_or(other_failure) == other_failure);
  CHECK(status(failure).error_or(other_failure) == failure);
}

TEST_CASE("and_then, transform, or_else and transform_error pass the result's value category", "[result][expected]") {
  result<int> r = 1;
  const result<int>& c = r;
  CHECK(*r.and_then(category_result{}) == category::lvalue);
  CHECK(*c.and_then(category_result{}) == category::const_lvalue);
  CHECK(*std::move(r).and_then(category_result{}) == category::rvalue);
  CHECK(*std::move(c).and_then(category_result{}) == category::const_rvalue);
  CHECK(*r.transform(category_of{}) == category::lvalue);
  CHECK(*c.transform(category_of{}) == category::const_lvalue);
  CHECK(*std::move(r).transform(category_of{}) == category::rvalue);
  CHECK(*std::move(c).transform(category_of{}) == category::const_rvalue);

  result<int> e = failure;
  const result<int>& ce = e;
  const auto error_category = [](auto&& held) -> result<int> {
    return static_cast<int>(category_of{}(std::forward<decltype(held)>(held)));
  };
  CHECK(*e.or_else(error_category) == static_cast<int>(category::lvalue));
  CHECK(*ce.or_else(error_category) == static_cast<int>(category::const_lvalue));
  CHECK(*std::move(e).or_else(error_category) == static_cast<int>(category::rvalue));
  CHECK(*std::move(ce).or_else(error_category) == static_cast<int>(category::const_rvalue));

  // A callback taking T& sees (and may change) the value of an lvalue result.
  result<int> counter = 10;
  auto bumped = counter.and_then([](int& v) -> result<int> { return ++v; });
  CHECK(*bumped == 11);
  CHECK(*counter == 11);
  (void)counter.transform([](int& v) { v = 20; });
  CHECK(*counter == 20);

  // The other branch passes through untouched, and the callback is not called.
  int calls = 0;
  CHECK(e.and_then([&](int) { return ++calls, result<int>(0); }).error() == failure);
  CHECK(e.transform([&](int) { return ++calls; }).error() == failure);
  CHECK(*r.or_else([&](const error&) { return ++calls, result<int>(0); }) == 1);
  CHECK(*r.transform_error([&](const error& x) { return ++calls, x; }) == 1);
  CHECK(calls == 0);

  // transform: any value type, void gives a status, and the value is made in place (no move).
  STATIC_REQUIRE(std::is_same_v<decltype(r.transform([](int) {})), status>);
  STATIC_REQUIRE(std::is_same_v<decltype(r.transform([](int v) { return v * 0.5; })), result<double>>);
  CHECK(r.transform([](int v) { return immovable(v + 1); })->value == 2);
  CHECK(*result<point>(point{4}).transform(&point::twice) == 8);
  CHECK(*result<const point*>(nullptr).transform([](const point* p) { return p == nullptr; }));

  // transform_error: rewrite the error, keep the value.
  const auto relabelled = e.transform_error([](const error& x) { return x.with_api("load"); });
  CHECK(std::string(relabelled.error().message()) == "load: no value");
  STATIC_REQUIRE(std::is_same_v<decltype(relabelled), const result<int>>);

  // Move-only values move through the rvalue forms.
  auto owned = result<std::unique_ptr<int>>(std::make_unique<int>(7))
                   .and_then([](std::unique_ptr<int> p) -> result<std::unique_ptr<int>> { return p; });
  CHECK(**owned == 7);
  auto kept = result<std::unique_ptr<int>>(std::make_unique<int>(8)).or_else([](error) {
    return result<std::unique_ptr<int>>(nullptr);
  });
  CHECK(**kept == 8);
}

TEST_CASE("status has std::expected<void>'s monadic members", "[result][expected]") {
  status ok;
  status bad = failure;
  int calls = 0;
  CHECK(*ok.and_then([&] { return ++calls, result<int>(5); }) == 5);
  CHECK(bad.and_then([&] { return ++calls, result<int>(5); }).error() == failure);
  CHECK(*ok.transform([&] { return ++calls; }) == 2);
  STATIC_REQUIRE(std::is_same_v<decltype(ok.transform([] {})), status>);
  CHECK(ok.transform([&] { ++calls; }));
  CHECK(bad.transform([&] { ++calls; }).error() == failure);
  CHECK(calls == 3);
  CHECK(ok.transform([] { return immovable(9); })->value == 9);
  CHECK(bad.or_else([](const error&) { return status(); }));
  CHECK(ok.or_else([&](const error&) { return ++calls, status(failure); }));
  CHECK(std::string(bad.transform_error([](const error& x) { return x.with_api("outer"); }).error().message()) ==
        "outer: no value");
  CHECK(ok.transform_error([](const error& x) { return x; }));
  CHECK(calls == 3);
  // Value categories of the error reach or_else and transform_error.
  const auto category_status = [](auto&& held) {
    return category_of{}(std::forward<decltype(held)>(held)) == category::rvalue ? status() : status(other_failure);
  };
  CHECK(std::move(bad).or_else(category_status));
  CHECK_FALSE(bad.or_else(category_status));
  STATIC_REQUIRE(std::is_same_v<decltype(std::move(bad).and_then([] { return status(); })), status>);
  STATIC_REQUIRE(std::is_trivially_copyable_v<status>);
  CHECK(status(std::in_place));
}

TEST_CASE("results compare like std::expected", "[result][expected]") {
  const result<int> one = 1;
  const result<long> one_long = 1L;
  const result<int> two = 2;
  const result<int> failed = failure;
  CHECK(one == one_long);
  CHECK(one != two);
  CHECK(one != failed);
  CHECK(failed == result<int>(failure));
  CHECK(failed != result<int>(other_failure));
  CHECK(one == 1);
  CHECK(1 == one);
  CHECK(one != 2);
  CHECK(failed != 1);
  CHECK(failed == failure);  // as comparing with std::unexpected(failure)
  CHECK(failure == failed);
  CHECK(one != failure);
  CHECK(status() == status());
  CHECK(status() != status(failure));
  CHECK(status(failure) == failure);
  CHECK(status(failure) != other_failure);
  STATIC_REQUIRE(comparable<result<int>, int>);
  STATIC_REQUIRE(comparable<result<int>, result<long>>);
  STATIC_REQUIRE(comparable<result<int>, error>);
  STATIC_REQUIRE_FALSE(comparable<result<int>, std::string>);
  STATIC_REQUIRE_FALSE(comparable<result<int>, result<std::string>>);
  STATIC_REQUIRE_FALSE(comparable<status, result<int>>);
}
