// SPDX-License-Identifier: MIT
// Out-of-memory errors as values: the figures error::oom() carries, the one-line message they add, and what survives
// with_api and a second set of figures. The figures here are made up; tests/gpu/oom.cu checks them against CUDA's.
#include <cudamem/pool.hpp>

#include "catch.hpp"

#include <cstdlib>
#include <string>

using namespace cudamem;

namespace {
out_of_memory_info made_up() {
  out_of_memory_info info;
  info.requested_bytes = std::uint64_t{1} << 30;
  info.device = 3;
  info.device_free_bytes = std::uint64_t{512} << 20;
  info.device_total_bytes = std::uint64_t{80} << 30;
  info.pool_reserved_bytes = std::uint64_t{3} << 29;  // 1.5 GiB
  info.pool_used_bytes = 1000;
  info.graph_reserved_bytes = 0;
  info.graph_used_bytes = 0;
  info.known = out_of_memory_info::device_memory | out_of_memory_info::pool | out_of_memory_info::graphs;
  return info;
}
bool contains(const error& e, const char* text) { return std::string(e.message()).find(text) != std::string::npos; }

}  // namespace

TEST_CASE("an error has out-of-memory figures only when an allocation said so", "[oom]") {
  const error plain(errc::invalid_argument, "copy", "bad");
  CHECK(plain.oom() == nullptr);
  const error cuda(cudaErrorMemoryAllocation, nullptr, "cudaMalloc");
  CHECK(cuda.oom() == nullptr);
  const error with = cuda.with_out_of_memory(made_up());
  REQUIRE(with.oom() != nullptr);
  CHECK(with.oom()->requested_bytes == std::uint64_t{1} << 30);
  CHECK(with.oom()->device == 3);
  CHECK(with.oom()->has(out_of_memory_info::pool));
  CHECK_FALSE(with.oom()->has(out_of_memory_info::cache));
  CHECK(with == cudaErrorMemoryAllocation);  // the code is CUDA's as before
  CHECK(with == cuda);
  CHECK(std::string(with.message()) ==
        "cudaMalloc: cudaErrorMemoryAllocation: out of memory; asked 1.0 GiB on device 3: free 512.0 MiB of 80.0 GiB, "
        "pool reserved 1.5 GiB used 1000 B, graphs reserved 0 B used 0 B");
  static_assert(std::is_trivially_copyable_v<error>);
}

TEST_CASE("with_api keeps the figures, and new figures replace the old ones in the message", "[oom]") {
  const error inner = error(cudaErrorMemoryAllocation, nullptr, "cudaMallocAsync").with_out_of_memory(made_up());
  const error outer = inner.with_api("buffer::allocate");
  REQUIRE(outer.oom() != nullptr);
  CHECK(outer.oom()->device_free_bytes == std::uint64_t{512} << 20);
  CHECK(std::string(outer.message()).find("buffer::allocate: cudaMallocAsync: cudaErrorMemoryAllocation") == 0);
  out_of_memory_info more = made_up();
  more.cached_bytes = 2048, more.largest_cached_block = 1024;
  more.known |= out_of_memory_info::cache;
  const error again = outer.with_out_of_memory(more);
  CHECK(contains(again, "cache held 2.0 KiB (largest block 1.0 KiB)"));
  const std::string text = again.message();
  CHECK(text.find("; asked") == text.rfind("; asked"));  // one set of figures
  CHECK(text.find("buffer::allocate: ") == 0);
  const error renamed = again.with_api("outer");
  CHECK(std::string(renamed.message()) == "outer: " + text.substr(std::string("buffer::allocate: ").size()));
  CHECK(renamed.with_out_of_memory(more).message() == std::string(renamed.message()));
}

TEST_CASE("a long message with figures is cut at 255 characters and ends in ...", "[oom]") {
  const std::string long_name(40, 'x');
  out_of_memory_info info = made_up();
  info.known |= out_of_memory_info::cache;
  const error e =
      error(errc::out_of_memory, long_name.c_str(), "%s", std::string(150, 'y').c_str()).with_out_of_memory(info);
  const std::string text = e.message();
  CHECK(text.size() == error::max_message);
  CHECK(text.substr(text.size() - 3) == "...");
  REQUIRE(e.oom() != nullptr);
  CHECK(e.oom()->requested_bytes == info.requested_bytes);  // the fields are whole, whatever the message kept
}

TEST_CASE("limit_adaptor's refusal carries the request; a pool's carries its figures after the retry", "[oom]") {
  host_resource host;
  limit_adaptor<host_resource> limited(host, 100);
  auto over = limited.allocate(stream_ref(), 101, 8);
  REQUIRE_FALSE(over);
  CHECK(over.error() == errc::out_of_memory);
  REQUIRE(over.error().oom() != nullptr);
  CHECK(over.error().oom()->requested_bytes == 101);
  CHECK(over.error().oom()->device == -1);
  CHECK(over.error().oom()->known == 0);
  CHECK(contains(over.error(), "budget of 100 bytes"));
}
