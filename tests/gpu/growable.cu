// SPDX-License-Identifier: MIT
// growable_buffer on a device: the address never moves and data survives growth, growth while a kernel still reads
// the old extent, the reservation's limit and the device's (clear errors, nothing lost), shrink_to_fit giving memory
// back, capture rules, exportable chunks, and (two devices) peer access that chunks mapped later inherit.
#include <cudamem/growable.hpp>
#include <cudamem/peer.hpp>

#include "common.cuh"

#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

using namespace cudamem;
using test::take;

namespace {
__global__ void write_index(device_span<std::uint32_t> out, std::uint32_t salt) {
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < out.size(); i += gridDim.x * blockDim.x)
    out[i] = static_cast<std::uint32_t>(i) * 2654435761u + salt;
}
// Waits about `ns`, then copies `in` to `out`: a kernel still reading the old extent while the host grows the buffer.
__global__ void copy_after_delay(device_span<std::uint32_t> out, device_span<const std::uint32_t> in,
                                 unsigned long long ns) {
  unsigned long long start = 0, now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  while (now - start < ns);
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < in.size(); i += gridDim.x * blockDim.x)
    out[i] = in[i];
}
std::uint32_t expected(std::size_t i, std::uint32_t salt) { return static_cast<std::uint32_t>(i) * 2654435761u + salt; }
// The first index where `values` differ from write_index's output with `salt`, or values.size().
std::size_t first_mismatch(const std::vector<std::uint32_t>& values, std::uint32_t salt, std::size_t from = 0) {
  for (std::size_t i = from; i < values.size(); ++i)
    if (values[i] != expected(i, salt)) return i;
  return values.size();
}
std::size_t free_device_bytes() {
  std::size_t free = 0, total = 0;
  REQUIRE(cudaMemGetInfo(&free, &total) == cudaSuccess);
  return free;
}
constexpr std::size_t mib = std::size_t{1} << 20;
constexpr std::size_t words_per_mib = mib / sizeof(std::uint32_t);
}  // namespace

TEST_CASE("growable_buffer: the address stays and the data survives every growth", "[growable]") {
  auto g = take(growable_buffer<std::uint32_t>::create(256 * words_per_mib));  // 256 MiB reserved
  CHECK(g.size() == 0);
  CHECK(g.capacity() == 0);
  CHECK(g.max_size() >= 256 * words_per_mib);
  CHECK(g.granularity() > 0);
  REQUIRE_OK(g.grow(3 * words_per_mib + 5));
  const device_ptr<std::uint32_t> first = g.data();
  REQUIRE(first.get() != nullptr);
  const device_span<std::uint32_t> early = g.view();  // taken before growth, used after it
  write_index<<<256, 256>>>(early, 7);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  for (std::size_t size : {8 * words_per_mib, 8 * words_per_mib + 1, 100 * words_per_mib, 256 * words_per_mib}) {
    CAPTURE(size);
    REQUIRE_OK(g.grow(size));
    CHECK(g.data() == first);
    CHECK(g.size() == size);
    CHECK(g.capacity() >= size);
    CHECK(g.capacity() * sizeof(std::uint32_t) % g.granularity() == 0);
  }
  // Only what was written is read (the rest is uninitialized, and compute-sanitizer's initcheck would say so).
  const auto old_part = test::read_back(device_span<const std::uint32_t>(g.view().first(early.size()).value()));
  CHECK(first_mismatch(old_part, 7) == early.size());
  write_index<<<1024, 256>>>(early, 9);  // the early span still addresses the first elements
  write_index<<<1024, 256>>>(g.view().subspan(0, g.size()).value(), 11);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(first_mismatch(test::read_back(device_span<const std::uint32_t>(g.view())), 11) == g.size());
  CHECK(g.chunks().size() >= 2);
}

TEST_CASE("growable_buffer grows while a kernel still reads the old extent, without waiting for it", "[growable]") {
  auto s = take(stream::create());
  auto g = take(growable_buffer<std::uint32_t>::create(512 * words_per_mib, s.ref()));
  auto out = take(device_buffer<std::uint32_t>::allocate(16 * words_per_mib));
  REQUIRE_OK(g.grow(16 * words_per_mib));
  write_index<<<512, 256, 0, s.get()>>>(g.view(), 3);
  copy_after_delay<<<512, 256, 0, s.get()>>>(out.view(), g.view(), 300'000'000ull);  // 300 ms
  const bool running = !take(s.ref().ready());  // a tool that makes launches synchronous runs it to the end here
  const auto start = std::chrono::steady_clock::now();
  for (std::size_t mb = 32; mb <= 512; mb += 32) REQUIRE_OK(g.grow(mb * words_per_mib));
  const auto took = std::chrono::steady_clock::now() - start;
  if (running) {  // growth did not wait for the kernel: it is still running when growth returns
    CHECK(!take(s.ref().ready()));
    CHECK(took < std::chrono::milliseconds(300));
  } else {
    WARN("the kernel finished before growth began (synchronous launches): the overlap is not observed");
  }
  write_index<<<512, 256, 0, s.get()>>>(g.view().last(g.size() - 16 * words_per_mib).value(), 5);
  REQUIRE_OK(s.synchronize());
  CHECK(first_mismatch(test::read_back(device_span<const std::uint32_t>(out.view())), 3) == out.size());
  const auto all = test::read_back(device_span<const std::uint32_t>(g.view()));
  std::vector<std::uint32_t> head(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(16 * words_per_mib));
  CHECK(first_mismatch(head, 3) == head.size());
  std::size_t bad = 0;
  for (std::size_t i = 16 * words_per_mib; i < all.size(); ++i)
    if (all[i] != expected(i - 16 * words_per_mib, 5)) ++bad;
  CHECK(bad == 0);
}

TEST_CASE("growable_buffer: growth past max_size is out_of_range and loses nothing", "[growable]") {
  auto g = take(growable_buffer<std::uint32_t>::create(8 * words_per_mib));
  const std::size_t limit = g.max_size();
  REQUIRE_OK(g.grow(limit));  // exactly the reservation
  write_index<<<256, 256>>>(g.view(), 21);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  for (std::size_t past : {limit + 1, 2 * limit, ~std::size_t{0}}) {
    auto refused = g.grow(past);
    REQUIRE(!refused);
    CHECK(refused.error() == errc::out_of_range);
    CHECK(std::string(refused.error().message()).find("growable_buffer::grow") == 0);
    auto reserve_refused = g.reserve(past);
    REQUIRE(!reserve_refused);
    CHECK(reserve_refused.error() == errc::out_of_range);
  }
  CHECK(g.size() == limit);
  CHECK(first_mismatch(test::read_back(device_span<const std::uint32_t>(g.view())), 21) == limit);
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("growable_buffer: growth past the device's memory is a clear error and loses nothing", "[growable]") {
  std::size_t free = 0, total = 0;
  REQUIRE(cudaMemGetInfo(&free, &total) == cudaSuccess);
  // Reserve twice the device's memory (address space, not memory), then grow by an eighth of it until it fails.
  auto g = take(growable_buffer<std::uint32_t>::create(2 * total / sizeof(std::uint32_t)));
  REQUIRE_OK(g.grow(words_per_mib));
  write_index<<<256, 256>>>(g.view(), 33);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  const std::size_t step = total / 8 / sizeof(std::uint32_t);
  status grown;
  std::size_t before = 0, capacity_before = 0;
  for (int i = 0; i < 20 && grown; ++i) {
    before = g.size();
    capacity_before = g.capacity();
    grown = g.grow(g.size() + step);
  }
  REQUIRE(!grown);
  CHECK(grown.error() == cudaErrorMemoryAllocation);
  CHECK(std::string(grown.error().message()).find("cuMemCreate") != std::string::npos);
  CHECK(g.size() == before);
  CHECK(g.capacity() == capacity_before);
  CHECK(cudaGetLastError() == cudaSuccess);
  std::vector<std::uint32_t> head(words_per_mib);
  REQUIRE_OK(copy(span(head), device_span<const std::uint32_t>(g.view().first(words_per_mib).value())));
  CHECK(first_mismatch(head, 33) == head.size());
}

TEST_CASE("growable_buffer: shrink_to_fit unmaps whole chunks past size() and gives the memory back", "[growable]") {
  auto g = take(growable_buffer<std::uint32_t>::create(1024 * words_per_mib));
  for (std::size_t mb : {64, 128, 192, 256}) REQUIRE_OK(g.grow(mb * words_per_mib));  // four 64 MiB chunks
  REQUIRE(g.chunks().size() == 4);
  write_index<<<512, 256>>>(g.view(), 44);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  const std::size_t free_before = free_device_bytes();
  REQUIRE_OK(g.resize(100 * words_per_mib));  // in the second chunk: the third and fourth go
  CHECK(g.capacity() == 256 * words_per_mib);  // resize unmaps nothing
  REQUIRE_OK(g.shrink_to_fit());
  CHECK(g.capacity() == 128 * words_per_mib);
  CHECK(g.chunks().size() == 2);
  CHECK(free_device_bytes() >= free_before + 120 * mib);  // 128 MiB back, give or take the driver's bookkeeping
  CHECK(first_mismatch(test::read_back(device_span<const std::uint32_t>(g.view())), 44) == g.size());
  REQUIRE_OK(g.grow(300 * words_per_mib));  // and it grows again at the same address
  write_index<<<512, 256>>>(g.view(), 45);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(first_mismatch(test::read_back(device_span<const std::uint32_t>(g.view())), 45) == g.size());
  REQUIRE_OK(g.resize(0));
  REQUIRE_OK(g.shrink_to_fit());
  CHECK(g.capacity() == 0);
  CHECK(g.chunks().size() == 0);
}

TEST_CASE(
    "growable_buffer under capture: growth leaves the capture intact; shrink_to_fit of a capturing stream is "
    "refused first",
    "[growable][graph]") {
  auto s = take(stream::create());
  auto other = take(stream::create());
  auto g = take(growable_buffer<std::uint32_t>::create(64 * words_per_mib, s.ref()));
  REQUIRE_OK(g.grow(4 * words_per_mib));
  for (cudaStreamCaptureMode mode :
       {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal, cudaStreamCaptureModeRelaxed}) {
    CAPTURE(static_cast<int>(mode));
    REQUIRE_OK(g.resize(4 * words_per_mib));
    REQUIRE_OK(g.shrink_to_fit());
    const std::size_t capacity = g.capacity();
    REQUIRE(cudaStreamBeginCapture(other.get(), mode) == cudaSuccess);
    write_index<<<64, 256, 0, other.get()>>>(g.view(), 1);
    const status grown = g.grow(40 * words_per_mib);  // another stream captures: the mapping is no part of it
    REQUIRE(cudaStreamBeginCapture(s.get(), cudaStreamCaptureModeRelaxed) == cudaSuccess);
    REQUIRE_OK(g.resize(4 * words_per_mib));
    const std::size_t mapped = g.capacity();
    const status shrunk = g.shrink_to_fit();  // its own stream captures: waiting on it would break the capture
    cudaGraph_t own = nullptr, graph = nullptr;
    REQUIRE(cudaStreamEndCapture(s.get(), &own) == cudaSuccess);
    REQUIRE(cudaStreamEndCapture(other.get(), &graph) == cudaSuccess);  // both captures survived
    REQUIRE_OK(grown);
    REQUIRE(!shrunk);
    CHECK(shrunk.error() == errc::capture_active);
    CHECK(g.capacity() == mapped);
    CHECK(mapped > capacity);
    if (own != nullptr) REQUIRE(cudaGraphDestroy(own) == cudaSuccess);
    REQUIRE(graph != nullptr);
    cudaGraphExec_t exec = nullptr;
    REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
    REQUIRE(cudaGraphLaunch(exec, other.get()) == cudaSuccess);
    REQUIRE_OK(other.synchronize());
    REQUIRE(cudaGraphExecDestroy(exec) == cudaSuccess);
    REQUIRE(cudaGraphDestroy(graph) == cudaSuccess);
    CHECK(first_mismatch(test::read_back(device_span<const std::uint32_t>(g.view())), 1) == g.size());
  }
}

TEST_CASE("growable_buffer: misuse is refused with the call's name", "[growable]") {
  growable_buffer<float> empty;
  auto grown = empty.grow(1);
  REQUIRE(!grown);
  CHECK(grown.error() == errc::invalid_argument);
  auto shrunk = empty.shrink_to_fit();
  REQUIRE(!shrunk);
  CHECK(shrunk.error() == errc::invalid_argument);
  auto g = take(growable_buffer<float>::create(1000));
  REQUIRE_OK(g.grow(10));
  auto smaller = g.grow(5);
  REQUIRE(!smaller);
  CHECK(smaller.error() == errc::invalid_argument);
  CHECK(g.size() == 10);
  auto overflow = growable_buffer<double>::create(~std::size_t{0} / 4);
  REQUIRE(!overflow);
  CHECK(overflow.error() == errc::size_overflow);
  auto absurd = growable_buffer<std::byte>::create(std::size_t{1} << 62);  // more than the address space
  REQUIRE(!absurd);
  CHECK(std::string(absurd.error().message()).find("growable_buffer::create") == 0);
  auto no_device = growable_buffer<float>::create(10, device_id(4096));
  REQUIRE(!no_device);
  CHECK(no_device.error() == errc::out_of_range);
  CHECK(cudaGetLastError() == cudaSuccess);
  growable_buffer<float> moved = std::move(g);
  CHECK(moved.size() == 10);
  CHECK(g.size() == 0);
  CHECK(!g.grow(20));
  CHECK(!g.accessible_from(device_id(0)));  // a moved-from buffer holds nothing that a device could reach
  CHECK(g.max_size() == 0);
  CHECK(moved.accessible_from(device_id(0)));
}

namespace {
__global__ void refused_launch() {}
}  // namespace

// The driver's calls do not write the runtime's last-error slot: a growable buffer's failure must not clear it.
TEST_CASE("growable_buffer: a refusal of the driver's leaves a launch error of the caller's pending", "[growable]") {
  refused_launch<<<0, 1>>>();  // zero blocks: refused (cudaErrorInvalidValue), left unchecked by its caller
  const cudaError_t pending = cudaPeekAtLastError();
  REQUIRE(pending != cudaSuccess);
  auto absurd = growable_buffer<std::byte>::create(std::size_t{1} << 62);  // the driver refuses the reservation
  REQUIRE(!absurd);
  CHECK(cudaPeekAtLastError() == pending);  // neither cleared nor replaced
  CHECK(cudaGetLastError() == pending);
}

TEST_CASE("growable_buffer: chunks made exportable as POSIX file descriptors export", "[growable][ipc]") {
  const bool supported =
      take(detail::vmm_device_supports(detail::driver_vmm(), 0, detail::vmm_attribute_posix_fd, "test"));
  if (!supported) CUDAMEM_SKIP("device 0 cannot export memory as POSIX file descriptors");
  auto g = take(growable_buffer<int>::create(16 * words_per_mib, growable_options{shareable_handle::posix_fd}));
  REQUIRE_OK(g.grow(3 * words_per_mib));
  REQUIRE_OK(g.grow(9 * words_per_mib));
  CHECK(g.handle_type() == shareable_handle::posix_fd);
  REQUIRE(g.chunks().size() == 2);
  CHECK(g.chunks()[0].offset == 0);
  CHECK(g.chunks()[1].offset == g.chunks()[0].bytes);
  cudaError_t (*export_handle)(void*, unsigned long long, int, unsigned long long) = nullptr;
  detail::load_driver_entry("cuMemExportToShareableHandle", export_handle);
  REQUIRE(export_handle != nullptr);
  for (const physical_chunk& c : g.chunks()) {
    int fd = -1;
    REQUIRE(export_handle(&fd, c.handle, detail::vmm_handle_posix_fd, 0) == cudaSuccess);
    CHECK(fd >= 0);
    ::close(fd);
  }
  auto plain = take(growable_buffer<int>::create(words_per_mib));
  CHECK(plain.handle_type() == shareable_handle::none);
}

TEST_CASE("growable_buffer: a guard held for a pair opens every chunk, later ones too", "[growable][peer][multi_gpu]") {
  if (take(device_count()) < 2) CUDAMEM_SKIP("needs two devices");
  const device_id d0(0), d1(1);
  if (!take(can_access_peer(d1, d0))) CUDAMEM_SKIP("device 1 cannot reach device 0's memory");
  auto g = take(growable_buffer<std::uint32_t>::create(256 * words_per_mib, d0));
  REQUIRE_OK(g.grow(8 * words_per_mib));  // mapped before any guard: device 1 has no access yet
  CHECK(!g.accessible_from(d1));
  {
    auto guard = take(peer_access::enable(d1, d0));
    CHECK(!g.accessible_from(d1));  // a guard taken later reaches the buffer at the next grow, reserve or refresh
    REQUIRE_OK(g.refresh_peer_access());
    CHECK(g.accessible_from(d1));
    REQUIRE_OK(g.grow(64 * words_per_mib));  // a chunk mapped later inherits it
    auto on_d1 = take(device_guard::set(d1));
    write_index<<<512, 256>>>(g.view(), 77);  // device 1's kernel writes device 0's chunks, old and new
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  }
  CHECK(first_mismatch(test::read_back(device_span<const std::uint32_t>(g.view())), 77) == g.size());
  CHECK(g.accessible_from(d1));  // releasing the guard does not revoke the mapping's access
  // A buffer made while a guard is held starts with the access.
  auto guard = take(peer_access::enable(d1, d0));
  auto h = take(growable_buffer<std::uint32_t>::create(16 * words_per_mib, d0));
  CHECK(h.accessible_from(d1));
  REQUIRE_OK(h.grow(16 * words_per_mib));
  {
    auto on_d1 = take(device_guard::set(d1));
    write_index<<<256, 256>>>(h.view(), 78);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  }
  CHECK(first_mismatch(test::read_back(device_span<const std::uint32_t>(h.view())), 78) == h.size());
}
