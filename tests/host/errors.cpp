// Errors and results: formatting, stickiness, the result interface, the release handler.
#include <cudamem/error.hpp>

#include "catch.hpp"

#include <cstring>
#include <memory>
#include <string>

using namespace cudamem;

TEST_CASE("an error caught by the library names the call and the problem", "[error]") {
  const error e(errc::extents_mismatch, "copy", "extents differ (dst %d x %d, src %d x %d)", 100, 8, 100, 9);
  CHECK(std::string(e.message()) == "copy: extents differ (dst 100 x 8, src 100 x 9)");
  CHECK(e.code() == errc::extents_mismatch);
  CHECK(e.cuda_status() == cudaSuccess);
  CHECK(std::string(e.call()) == "copy");
  CHECK_FALSE(e.is_sticky());
}

TEST_CASE("an error CUDA reported carries its status, name and text", "[error]") {
  const error plain(cudaErrorInvalidPitchValue, nullptr, "cudaMemcpy2DAsync");
  CHECK(std::string(plain.message()) == "cudaMemcpy2DAsync: cudaErrorInvalidPitchValue: invalid pitch argument");
  CHECK(plain.code() == errc::cuda);
  CHECK(plain.cuda_status() == cudaErrorInvalidPitchValue);
  CHECK(plain.api() == nullptr);

  const error inside(cudaErrorInvalidValue, "copy", "cudaMemcpyAsync");
  CHECK(std::string(inside.message()) == "copy: cudaMemcpyAsync: cudaErrorInvalidValue: invalid argument");
  CHECK(std::string(inside.api()) == "copy");
  CHECK(std::string(inside.call()) == "cudaMemcpyAsync");
}

TEST_CASE("stickiness follows CUDA's classification", "[error]") {
  CHECK(error(cudaErrorIllegalAddress, nullptr, "k").is_sticky());
  CHECK(error(cudaErrorLaunchFailure, nullptr, "k").is_sticky());
  CHECK(error(cudaErrorAssert, nullptr, "k").is_sticky());
  CHECK_FALSE(error(cudaErrorInvalidValue, nullptr, "k").is_sticky());
  CHECK_FALSE(error(cudaErrorMemoryAllocation, nullptr, "k").is_sticky());
  CHECK_FALSE(error(cudaErrorPeerAccessAlreadyEnabled, nullptr, "k").is_sticky());
}

TEST_CASE("a message longer than the buffer is cut, never overflows", "[error]") {
  const std::string long_text(1000, 'x');
  const error e(errc::invalid_argument, "span::subspan", "%s", long_text.c_str());
  const std::size_t length = std::strlen(e.message());
  CHECK(length > 100);
  CHECK(length < 1000);
  CHECK(std::string(e.message()).rfind("span::subspan: xxx", 0) == 0);
}

TEST_CASE("every errc has a name", "[error]") {
  for (int code = static_cast<int>(errc::cuda); code <= static_cast<int>(errc::out_of_memory); ++code)
    CHECK(std::string(to_string(static_cast<errc>(code))) != "unknown");
  CHECK(std::string(to_string(errc::capture_active)) == "capture_active");
}

namespace {
result<int> parse_positive(int x) {
  if (x <= 0) return error(errc::invalid_argument, "parse_positive", "%d is not positive", x);
  return x;
}
status twice_positive(int x, int& out) {
  auto value = parse_positive(x);
  CUDAMEM_TRY(value.transform([](int) {}));
  out = 2 * *value;
  return {};
}
}  // namespace

TEST_CASE("result holds a value or an error, like std::expected", "[error][result]") {
  auto good = parse_positive(4);
  REQUIRE(good.has_value());
  CHECK(*good == 4);
  CHECK(static_cast<bool>(good));

  auto bad = parse_positive(-1);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code() == errc::invalid_argument);
  CHECK(std::string(bad.error().message()) == "parse_positive: -1 is not positive");
  CHECK(std::move(bad).value_or(7) == 7);

  auto chained = parse_positive(3).and_then([](int v) { return parse_positive(v - 5); });
  REQUIRE_FALSE(chained);
  CHECK(std::string(chained.error().message()) == "parse_positive: -2 is not positive");

  auto mapped = parse_positive(3).transform([](int v) { return v * 1.5; });
  REQUIRE(mapped);
  CHECK(*mapped == 4.5);

  auto recovered = parse_positive(0).or_else([](const error&) -> result<int> { return 42; });
  REQUIRE(recovered);
  CHECK(*recovered == 42);

  int out = 0;
  CHECK(twice_positive(5, out));
  CHECK(out == 10);
  auto failed = twice_positive(-5, out);
  REQUIRE_FALSE(failed);
  CHECK(failed.error().code() == errc::invalid_argument);
  CHECK(out == 10);
}

TEST_CASE("result works with move-only values and copies copyable ones", "[error][result]") {
  result<std::unique_ptr<int>> owner(std::make_unique<int>(9));
  REQUIRE(owner);
  auto moved = std::move(owner);
  REQUIRE(moved);
  CHECK(**moved == 9);

  result<std::string> text(std::string("abc"));
  result<std::string> copy = text;
  CHECK(*copy == "abc");
  copy = result<std::string>(error(errc::out_of_range, "t", "gone"));
  REQUIRE_FALSE(copy);
  CHECK(copy.error().code() == errc::out_of_range);
  copy = text;
  CHECK(*copy == "abc");
  CHECK(text->size() == 3);
}

TEST_CASE("status is success by default and carries errors", "[error][result]") {
  status ok;
  CHECK(ok.has_value());
  status failed = error(errc::not_supported, "x", "nope");
  CHECK_FALSE(failed);
  CHECK(failed.error().code() == errc::not_supported);
  auto next = ok.and_then([]() -> result<int> { return 3; });
  REQUIRE(next);
  CHECK(*next == 3);
  auto skipped = failed.and_then([]() -> result<int> { return 3; });
  CHECK_FALSE(skipped);
}

namespace {
int handled_count = 0;
cudaError_t handled_status = cudaSuccess;
void counting_handler(const error& e) noexcept {
  ++handled_count;
  handled_status = e.cuda_status();
}
}  // namespace

TEST_CASE("release failures go to a replaceable handler", "[error][release]") {
  const release_handler previous = set_release_handler(&counting_handler);
  REQUIRE(previous != nullptr);
  handled_count = 0;
  report_release_failure(error(cudaErrorInvalidValue, nullptr, "cudaFree"));
  CHECK(handled_count == 1);
  CHECK(handled_status == cudaErrorInvalidValue);
  // Restoring: null selects the default, and the handler returned is ours.
  CHECK(set_release_handler(nullptr) == &counting_handler);
  CHECK(set_release_handler(previous) != &counting_handler);
}
