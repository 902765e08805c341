// SPDX-License-Identifier: MIT
// Streams, events, devices and host registration: the parts that need no device.
#include <cudamem/detail/stream_identity.hpp>
#include <cudamem/detail/unique_handle.hpp>
#include <cudamem/device.hpp>
#include <cudamem/host_register.hpp>
#include <cudamem/stream.hpp>

#include "catch.hpp"

#include <cuda.h>  // only here: the headers call the driver in the runtime's types, held to the driver's below

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

using namespace cudamem;

namespace {
// References are small values; the mistakes they invite do not compile.
// A stream_ref is the handle, the device and the stream's id (a stream object's): three words at most.
static_assert(std::is_trivially_copyable_v<stream_ref> && sizeof(stream_ref) <= 3 * sizeof(void*));
static_assert(std::is_trivially_copyable_v<event_ref> && sizeof(event_ref) == sizeof(void*));
static_assert(!std::is_constructible_v<stream_ref, int> && !std::is_convertible_v<int, stream_ref>);
static_assert(!std::is_constructible_v<stream_ref, std::nullptr_t> &&
              !std::is_convertible_v<std::nullptr_t, stream_ref>);

// An owner converts to its reference only as an lvalue: a reference to a temporary would dangle.
template <class Owner, class Ref>
constexpr bool refers_to_lvalues_only =
    std::is_convertible_v<Owner&, Ref> && std::is_convertible_v<const Owner&, Ref> &&
    !std::is_convertible_v<Owner, Ref> && !std::is_constructible_v<Ref, Owner> &&
    !std::is_constructible_v<Ref, const Owner&&>;
static_assert(refers_to_lvalues_only<stream, stream_ref>);
static_assert(refers_to_lvalues_only<event, event_ref>);
static_assert(refers_to_lvalues_only<host_registration<float>, pinned_span<const float>>);
static_assert(refers_to_lvalues_only<host_registration<const int>, pinned_span<const int>>);
static_assert(std::is_convertible_v<host_registration<float>&, pinned_span<float>> &&
              !std::is_convertible_v<host_registration<float>&&, pinned_span<float>>);
// A registration is deep-const, as buffers are: a const one gives const elements only.
static_assert(!std::is_convertible_v<const host_registration<float>&, pinned_span<float>>);
static_assert(
    std::is_same_v<decltype(std::declval<const host_registration<float>&>().view()), pinned_span<const float>>);
static_assert(
    std::is_same_v<decltype(std::declval<const host_registration<float>&>().data()), pinned_ptr<const float>>);
static_assert(std::is_same_v<decltype(std::declval<host_registration<float>&>().view()), pinned_span<float>>);
static_assert(std::is_same_v<decltype(std::declval<host_registration<float>&>().data()), pinned_ptr<float>>);
template <class Owner>
concept ref_of_temporary = requires(Owner&& owner) { std::move(owner).ref(); };
static_assert(!ref_of_temporary<stream> && !ref_of_temporary<event>);
template <class Owner>
concept view_of_temporary = requires(Owner&& owner) { std::move(owner).view(); };
static_assert(!view_of_temporary<host_registration<float>> && viewable<host_registration<float>>);
template <class Owner>
concept data_of_temporary = requires(Owner&& owner) { std::move(owner).data(); };
static_assert(!data_of_temporary<host_registration<float>> && !view_of_temporary<host_registration<const int>>);
static_assert(host_registration<float>::owns_memory && host_registration<const int>::owns_memory);

// The owners are move-only.
template <class T>
constexpr bool move_only = !std::is_copy_constructible_v<T> && !std::is_copy_assignable_v<T> &&
                           std::is_nothrow_move_constructible_v<T> && std::is_nothrow_move_assignable_v<T>;
static_assert(move_only<stream> && move_only<event> && move_only<device_guard> && move_only<host_registration<float>>);

cudaStream_t fake_stream(std::uintptr_t address) { return reinterpret_cast<cudaStream_t>(address); }

// Records each release, so that a test can see exactly which handles were released.
struct counted_handle {
  using type = int;
  static int empty() noexcept { return -1; }
  static void release(int handle) noexcept {
    ++releases;
    last_released = handle;
  }
  static inline int releases = 0;
  static inline int last_released = -1;
};
using counted = detail::unique_handle<counted_handle>;
}  // namespace

TEST_CASE("a stream_ref that knows its device names it without asking CUDA", "[streams]") {
  // No CUDA call is made: this holds with no device at all.
  const auto named = stream_ref::from_native_handle(fake_stream(0x1000), device_id(3));
  REQUIRE(named.device());
  CHECK(*named.device() == device_id(3));
  CHECK(named.get() == fake_stream(0x1000));
  CHECK(named.valid());
  // Equality is by handle, whether or not the device is known.
  CHECK(named == stream_ref::from_native_handle(fake_stream(0x1000)));
  CHECK_FALSE(named == stream_ref::from_native_handle(fake_stream(0x2000), device_id(3)));
  CHECK(stream_ref::from_native_handle(cudaStreamLegacy, device_id(3)) == stream_ref::legacy());
  CHECK(stream_ref() == stream_ref::legacy());
  CHECK_FALSE(stream_ref::legacy() == stream_ref::per_thread());
}

// detail/driver.hpp calls driver entry points through the runtime's types: they must be the driver's, value for value.
static_assert(std::is_same_v<CUstream, cudaStream_t> && std::is_same_v<CUevent, cudaEvent_t>);
static_assert(sizeof(CUresult) == sizeof(cudaError_t) &&
              sizeof(CUstreamCaptureStatus) == sizeof(cudaStreamCaptureStatus) &&
              sizeof(CUstreamCaptureMode) == sizeof(cudaStreamCaptureMode));
static_assert(int{CUDA_SUCCESS} == int{cudaSuccess} && int{CUDA_ERROR_NOT_READY} == int{cudaErrorNotReady});
static_assert(int{CU_STREAM_CAPTURE_STATUS_NONE} == int{cudaStreamCaptureStatusNone} &&
              int{CU_STREAM_CAPTURE_STATUS_ACTIVE} == int{cudaStreamCaptureStatusActive} &&
              int{CU_STREAM_CAPTURE_STATUS_INVALIDATED} == int{cudaStreamCaptureStatusInvalidated});
static_assert(int{CU_STREAM_CAPTURE_MODE_GLOBAL} == int{cudaStreamCaptureModeGlobal} &&
              int{CU_STREAM_CAPTURE_MODE_THREAD_LOCAL} == int{cudaStreamCaptureModeThreadLocal} &&
              int{CU_STREAM_CAPTURE_MODE_RELAXED} == int{cudaStreamCaptureModeRelaxed});

TEST_CASE("a stream object's reference carries its stream's id; others carry none", "[streams]") {
  using detail::stream_identity;
  CHECK(stream_identity::carried(stream_ref::from_native_handle(fake_stream(0x1000), device_id(0))) ==
        detail::no_stream_id);
  CHECK(stream_identity::carried(stream_ref::legacy()) == detail::no_stream_id);
  const stream_ref made = stream_identity::make(fake_stream(0x1000), device_id(2), 42);
  CHECK(stream_identity::carried(made) == 42);
  CHECK(*made.device() == device_id(2));
  CHECK(made == stream_ref::from_native_handle(fake_stream(0x1000)));  // equality stays by handle
  // Without a driver CUDA names no id: an adopted stream then carries none, and the pool and registry ask CUDA.
  auto adopted = stream::adopt(fake_stream(0x2000), device_id(0));
  REQUIRE(adopted);
  CHECK(stream_identity::carried(adopted->ref()) == detail::no_stream_id);
  (void)adopted->release();
}

namespace {
// A release handler whose own code destroys stream and event objects, as a user's may (logging, then cleaning up).
int handler_calls = 0;
void destroying_handler(const error&) noexcept {
  if (++handler_calls > 4) return;  // each destruction below fails without a device and comes back here
  auto doomed = stream::adopt(fake_stream(0x5000 + static_cast<std::uintptr_t>(handler_calls)), device_id(0));
  stream moved = std::move(*doomed);  // destroyed when it goes: cudaStreamDestroy fails and reports again
}
}  // namespace

TEST_CASE("a release handler may destroy stream objects: their lifetime takes no library lock", "[streams]") {
  // Stream objects once listed their handles under a process-wide lock, and the library reported to the handler with
  // it held; a handler destroying a stream then waited for itself. Destroying one inside the handler, inside a
  // destruction that reports, must return.
  handler_calls = 0;
  const release_handler previous = set_release_handler(&destroying_handler);
  {
    auto outer = stream::adopt(fake_stream(0x4000), device_id(0));
    REQUIRE(outer);
  }  // cudaStreamDestroy of a made-up handle fails without a device: the handler runs, and destroys more
  (void)set_release_handler(previous);
  CHECK(handler_calls >= 2);
}

TEST_CASE("references of moved-from streams and events are refused before CUDA sees them", "[streams]") {
  const auto gone = stream_ref::from_native_handle(detail::invalid_stream(), device_id(0));
  CHECK_FALSE(gone.valid());
  CHECK(gone.device().error().code() == errc::invalid_argument);
  CHECK(std::string(gone.device().error().message()) == "stream::device: the stream was moved from");
  CHECK(gone.synchronize().error().code() == errc::invalid_argument);
  CHECK(gone.ready().error().code() == errc::invalid_argument);

  const auto no_event = event_ref::from_native_handle(nullptr);
  CHECK_FALSE(no_event.valid());
  CHECK(std::string(no_event.record(stream_ref::legacy()).error().message()) ==
        "event::record: the event was moved from");
  CHECK(no_event.synchronize().error().code() == errc::invalid_argument);
  CHECK(no_event.ready().error().code() == errc::invalid_argument);
  CHECK(std::string(stream_ref::legacy().wait(no_event).error().message()) == "stream::wait: the event was moved from");
  CHECK(gone.wait(no_event).error().code() == errc::invalid_argument);
  CHECK(event::elapsed_ms(no_event, no_event).error().code() == errc::invalid_argument);
}

TEST_CASE("unique_handle releases each owned handle exactly once", "[streams]") {
  counted_handle::releases = 0;
  {
    counted empty;
    CHECK_FALSE(empty.valid());
    CHECK(empty.get() == -1);
  }
  CHECK(counted_handle::releases == 0);  // the sentinel is never released
  {
    counted first(5);
    CHECK(first.valid());
    counted second(std::move(first));
    CHECK_FALSE(first.valid());
    CHECK(second.get() == 5);
    CHECK(counted_handle::releases == 0);

    counted third(6);
    third = std::move(second);  // releases 6, takes 5
    CHECK(counted_handle::releases == 1);
    CHECK(counted_handle::last_released == 6);
    CHECK(third.get() == 5);
    CHECK_FALSE(second.valid());

    counted& same = third;
    third = std::move(same);  // self-move keeps the handle
    CHECK(third.get() == 5);
    CHECK(counted_handle::releases == 1);

    CHECK(third.release() == 5);  // given up, not released
    CHECK_FALSE(third.valid());
    third.reset(7);
    CHECK(counted_handle::releases == 1);
    third.reset(8);  // releases 7
    CHECK(counted_handle::releases == 2);
    CHECK(counted_handle::last_released == 7);
  }
  CHECK(counted_handle::releases == 3);  // 8, at the end of the scope
  CHECK(counted_handle::last_released == 8);
}

TEST_CASE("per-device values are cached, 0 included; errors and unknown ordinals are not", "[streams]") {
  struct zero_tag {};
  int reads = 0;
  auto read_zero = [&reads](int) noexcept -> result<int> {
    ++reads;
    return 0;  // a minor compute capability of 0 (sm_90), or a false attribute
  };
  using zeros = detail::per_device_cache<zero_tag>;
  CHECK(*zeros::get(0, read_zero) == 0);
  CHECK(*zeros::get(0, read_zero) == 0);
  CHECK(reads == 1);
  CHECK(*zeros::get(1, read_zero) == 0);
  CHECK(reads == 2);

  struct flaky_tag {};
  int attempts = 0;
  auto fail_once = [&attempts](int) noexcept -> result<int> {
    if (++attempts == 1) return error(errc::not_supported, "test", "first read fails");
    return 90;
  };
  using flaky = detail::per_device_cache<flaky_tag>;
  CHECK(flaky::get(2, fail_once).error().code() == errc::not_supported);
  CHECK(*flaky::get(2, fail_once) == 90);
  CHECK(*flaky::get(2, fail_once) == 90);
  CHECK(attempts == 2);

  struct outside_tag {};
  int outside_reads = 0;
  auto read_outside = [&outside_reads](int ordinal) noexcept -> result<int> {
    ++outside_reads;
    return ordinal;
  };
  using outside = detail::per_device_cache<outside_tag>;
  CHECK(*outside::get(-1, read_outside) == -1);
  CHECK(*outside::get(-1, read_outside) == -1);
  CHECK(*outside::get(outside::max_devices, read_outside) == outside::max_devices);
  CHECK(*outside::get(outside::max_devices - 1, read_outside) == outside::max_devices - 1);
  CHECK(*outside::get(outside::max_devices - 1, read_outside) == outside::max_devices - 1);
  CHECK(outside_reads == 4);
}

TEST_CASE("host_register refuses where a device cannot use the host address of registered memory", "[streams]") {
  auto all_can = [](int) noexcept -> result<int> { return 1; };
  CHECK(detail::check_host_pointer_usable(4, all_can, "host_register"));
  CHECK(detail::check_host_pointer_usable(0, all_can, "host_register"));

  auto third_cannot = [](int ordinal) noexcept -> result<int> { return ordinal == 2 ? 0 : 1; };
  auto refused = detail::check_host_pointer_usable(4, third_cannot, "host_register");
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code() == errc::not_supported);
  CHECK(std::string(refused.error().message()) ==
        "host_register: device 2 cannot use the host address of registered memory in kernels; use a pinned_buffer");
  CHECK(detail::check_host_pointer_usable(2, third_cannot, "host_register"));

  auto unknown = [](int) noexcept -> result<int> {
    return error(cudaErrorInvalidDevice, "host_register", "cudaDeviceGetAttribute");
  };
  CHECK(detail::check_host_pointer_usable(1, unknown, "host_register").error().cuda_status() == cudaErrorInvalidDevice);
}

TEST_CASE("an empty range registers nothing and views as empty", "[streams]") {
  auto registration = host_register(host_span<float>());
  REQUIRE(registration);
  CHECK(registration->view().empty());
  const pinned_span<float> view = *registration;
  CHECK(view.data().get() == nullptr);
  auto moved = std::move(*registration);
  CHECK(moved.view().empty());
}
