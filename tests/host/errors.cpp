// SPDX-License-Identifier: MIT
// Errors and results: formatting, domains, stickiness, the result interface, the release handler.
#include <cudamem/error.hpp>

#include "catch.hpp"

#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <type_traits>

using namespace cudamem;

TEST_CASE("an error caught by the library names the call and the problem", "[error]") {
  const error e(errc::extents_mismatch, "copy", "extents differ (dst %d x %d, src %d x %d)", 100, 8, 100, 9);
  CHECK(std::string(e.message()) == "copy: extents differ (dst 100 x 8, src 100 x 9)");
  CHECK(e.code() == errc::extents_mismatch);
  CHECK(e.cuda_status() == cudaSuccess);
  CHECK(std::string(e.call()) == "copy");
  CHECK(std::string(e.api()) == "copy");
  CHECK_FALSE(e.is_sticky());
  CHECK(e.domain() == error_domain::library);
  CHECK(e.native_code() == static_cast<int>(errc::extents_mismatch));
}

TEST_CASE("an error CUDA reported carries its status, name and text", "[error]") {
  const error plain(cudaErrorInvalidPitchValue, nullptr, "cudaMemcpy2DAsync");
  CHECK(std::string(plain.message()) == "cudaMemcpy2DAsync: cudaErrorInvalidPitchValue: invalid pitch argument");
  CHECK(plain.code() == errc::cuda);
  CHECK(plain.cuda_status() == cudaErrorInvalidPitchValue);
  CHECK(plain.api() == nullptr);
  CHECK(plain.domain() == error_domain::cuda);
  CHECK(plain.native_code() == static_cast<int>(cudaErrorInvalidPitchValue));

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
  // Both say "the process must be terminated and relaunched" in driver_types.h.
  CHECK(error(cudaErrorMpsClientTerminated, nullptr, "k").is_sticky());
  CHECK(error(cudaErrorExternalDevice, nullptr, "k").is_sticky());
  CHECK(error::is_sticky_status(cudaErrorContained));
  CHECK(error::is_sticky_status(cudaErrorTensorMemoryLeak));
  CHECK_FALSE(error::is_sticky_status(cudaErrorCudartUnloading));
}

TEST_CASE("an error from another library keeps its domain and native code", "[error]") {
  // As the NCCL adapter makes them: ncclInvalidArgument is 4.
  const error e(error_domain::nccl, 4, "all_reduce", "ncclAllReduce", "ncclInvalidArgument", "invalid argument");
  CHECK(e.domain() == error_domain::nccl);
  CHECK(e.native_code() == 4);
  CHECK(e.code() == errc::nccl);
  CHECK(e.cuda_status() == cudaSuccess);
  CHECK_FALSE(e.is_sticky());
  CHECK(std::string(e.message()) == "all_reduce: ncclAllReduce: ncclInvalidArgument: invalid argument");
  CHECK(std::string(e.call()) == "ncclAllReduce");
  const error unnamed(error_domain::nccl, 2, nullptr, "ncclCommInitRank", nullptr, "unhandled system error");
  CHECK(std::string(unnamed.message()) == "ncclCommInitRank: unhandled system error");
  CHECK(std::string(unnamed.with_api("communicator::create").message()) ==
        "communicator::create: ncclCommInitRank: unhandled system error");
  CHECK(std::string(to_string(error_domain::nccl)) == "nccl");
  CHECK(std::string(to_string(errc::nccl)) == "nccl");
  // A CUDA status through the general constructor is the same error as through the CUDA one.
  CHECK(error(error_domain::cuda, static_cast<int>(cudaErrorInvalidValue), "copy", "cudaMemcpyAsync",
              cudaGetErrorName(cudaErrorInvalidValue), cudaGetErrorString(cudaErrorInvalidValue))
            .cuda_status() == cudaErrorInvalidValue);
}

TEST_CASE("errors compare by domain and native code, and against errc and cudaError_t", "[error]") {
  const error a(errc::out_of_range, "span::first", "%d elements from a span of %d", 5, 4);
  const error b(errc::out_of_range, "span::last", "something else");
  const error c(errc::invalid_argument, "span::last", "something else");
  CHECK(a == b);
  CHECK(a != c);
  CHECK(a == errc::out_of_range);
  CHECK(errc::out_of_range == a);
  CHECK(a != errc::cuda);
  CHECK(a != cudaErrorInvalidValue);
  const error cuda(cudaErrorInvalidValue, "copy", "cudaMemcpyAsync");
  CHECK(cuda == cudaErrorInvalidValue);
  CHECK(cuda == errc::cuda);
  CHECK(cuda == error(cudaErrorInvalidValue, nullptr, "cudaMemsetAsync"));
  CHECK(cuda != error(cudaErrorMemoryAllocation, nullptr, "cudaMalloc"));
  // The same number from different reporters is a different error.
  CHECK(error(cudaErrorMemoryAllocation, nullptr, "cudaMalloc") !=
        error(error_domain::nccl, static_cast<int>(cudaErrorMemoryAllocation), nullptr, "ncclAllReduce", nullptr, "x"));
  STATIC_REQUIRE(std::is_trivially_copyable_v<error>);
}

TEST_CASE("api and call are copies: names built at run time may be freed", "[error]") {
  char api[] = "dynamic_api";
  char call[] = "dynamicCall";
  const error cuda(cudaErrorInvalidValue, api, call);
  const error library(errc::invalid_argument, api, "bad");
  std::memset(api, 'X', sizeof api - 1);
  std::memset(call, 'Y', sizeof call - 1);
  CHECK(std::string(cuda.api()) == "dynamic_api");
  CHECK(std::string(cuda.call()) == "dynamicCall");
  CHECK(std::string(library.api()) == "dynamic_api");
  CHECK(std::string(library.call()) == "dynamic_api");
  CHECK(std::string(cuda.message()) == "dynamic_api: dynamicCall: cudaErrorInvalidValue: invalid argument");
  // A name longer than max_name is cut in api() and call(), never in the message.
  const std::string long_name(100, 'n');
  const error cut(cudaErrorInvalidValue, long_name.c_str(), "cudaMemcpyAsync");
  CHECK(std::string(cut.api()) == long_name.substr(0, error::max_name));
  CHECK(std::string(cut.message()).rfind(long_name + ": cudaMemcpyAsync: ", 0) == 0);
}

TEST_CASE("with_api replaces the api, whatever the length of the old one", "[error]") {
  // The error sits in storage whose bytes after it are not zero: reading past its message shows.
  for (std::size_t length : {1u, 100u, 157u, 158u, 159u, 200u, 250u, 253u, 254u, 255u, 256u, 300u}) {
    CAPTURE(length);
    const std::string inner(length, 'a');
    alignas(error) unsigned char storage[sizeof(error) + 64];
    std::memset(storage, 'Z', sizeof storage);
    const error* e = ::new (static_cast<void*>(storage)) error(errc::out_of_range, inner.c_str(), "gone");
    const error outer = e->with_api("copy");
    const std::string text(outer.message());
    CHECK(text.rfind("copy: ", 0) == 0);
    CHECK(text.find('Z') == std::string::npos);
    CHECK(text.size() <= error::max_message);
    if (length + 6 <= error::max_message) CHECK(text == "copy: gone");
    CHECK(std::string(outer.api()) == "copy");
    CHECK(outer.code() == errc::out_of_range);
  }
  const error cuda(cudaErrorInvalidValue, "inner", "cudaMemcpyAsync");
  CHECK(std::string(cuda.with_api("outer").message()) ==
        "outer: cudaMemcpyAsync: cudaErrorInvalidValue: invalid argument");
  CHECK(std::string(cuda.with_api("outer").call()) == "cudaMemcpyAsync");
  CHECK(cuda.with_api("outer").cuda_status() == cudaErrorInvalidValue);
  CHECK(std::string(cuda.with_api(nullptr).message()) == "cudaMemcpyAsync: cudaErrorInvalidValue: invalid argument");
  const error plain(cudaErrorInvalidValue, nullptr, "cudaMemcpyAsync");
  CHECK(std::string(plain.with_api("copy").message()) ==
        "copy: cudaMemcpyAsync: cudaErrorInvalidValue: invalid argument");
}

TEST_CASE("the library's longest message fits whole", "[error]") {
  const char* capture =
      "a blocking stream is capturing a graph, and the legacy default stream would join it; use the "
      "stream-ordered form on the capturing stream";
  const error e(errc::capture_active, "pitched_span::copy_from_host", "%s", capture);
  CHECK(std::string(e.message()) == std::string("pitched_span::copy_from_host: ") + capture);
  const error inner(errc::capture_active, "copy", "%s", capture);
  CHECK(std::string(inner.with_api("pitched_span::copy_from_host").message()) == e.message());
}

TEST_CASE("a message longer than the buffer is cut, never overflows", "[error]") {
  const std::string long_text(1000, 'x');
  const error e(errc::invalid_argument, "span::subspan", "%s", long_text.c_str());
  const std::size_t length = std::strlen(e.message());
  CHECK(length == error::max_message);
  CHECK(std::string(e.message()).rfind("span::subspan: xxx", 0) == 0);
  // The cut is visible.
  CHECK(std::string(e.message()).substr(length - 3) == "...");
  const error exact(errc::invalid_argument, "a", "%s", std::string(error::max_message - 3, 'y').c_str());
  CHECK(std::strlen(exact.message()) == error::max_message);
  CHECK(std::string(exact.message()).find("...") == std::string::npos);
}

TEST_CASE("every errc has a name", "[error]") {
  for (int code = static_cast<int>(errc::cuda); code <= static_cast<int>(errc::out_of_memory_retry); ++code)
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

TEST_CASE("a release after the CUDA runtime unloaded is not a failure", "[error][release]") {
  const release_handler previous = set_release_handler(&counting_handler);
  handled_count = 0;
  // What cudaFree returns for a buffer with static storage duration freed after CUDA shut down.
  detail::check_release(cudaErrorCudartUnloading, "cudaFree");
  CHECK(handled_count == 0);
  detail::check_release(cudaSuccess, "cudaFree");
  CHECK(handled_count == 0);
  detail::check_release(cudaErrorInvalidValue, "cudaFree");
  CHECK(handled_count == 1);
  CHECK(handled_status == cudaErrorInvalidValue);
  set_release_handler(previous);
}

TEST_CASE("check_launch turns the last error into a status that names the kernel", "[error]") {
  (void)cudaGetLastError();
  // Any failed runtime call leaves its error where a failed launch would: in the last-error slot.
  const cudaError_t refused = cudaSetDevice(-1);
  REQUIRE(refused != cudaSuccess);
  const status launched = check_launch("scale");
  REQUIRE_FALSE(launched);
  CHECK(launched.error().code() == errc::cuda);
  CHECK(std::string(launched.error().message()).rfind("scale: kernel launch: cuda", 0) == 0);
  CHECK(std::string(launched.error().api()) == "scale");
  CHECK(launched.error() == refused);
  // Reading the error cleared it (without a driver, every call keeps failing to initialize CUDA).
  if (refused == cudaErrorInvalidDevice) CHECK(check_launch("scale"));
}
