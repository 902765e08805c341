// SPDX-License-Identifier: MIT
// interop/nccl.hpp without a device: the element types NCCL takes, NCCL's errors as cudamem errors, and calls on
// an empty communicator refused before NCCL is reached. Built and run only where NCCL is found.
#include <cudamem/interop/nccl.hpp>

#include "catch.hpp"

#include <cstdint>
#include <string>
#include <type_traits>

using namespace cudamem;

static_assert(nccl::data_type_of<float> == ncclFloat32 && nccl::data_type_of<const double> == ncclFloat64);
static_assert(nccl::data_type_of<__half> == ncclFloat16 && nccl::data_type_of<__nv_bfloat16> == ncclBfloat16);
static_assert(nccl::data_type_of<std::int8_t> == ncclInt8 && nccl::data_type_of<std::uint8_t> == ncclUint8);
static_assert(nccl::data_type_of<std::int32_t> == ncclInt32 && nccl::data_type_of<std::uint32_t> == ncclUint32);
static_assert(nccl::data_type_of<std::int64_t> == ncclInt64 && nccl::data_type_of<unsigned long long> == ncclUint64);
static_assert(!std::is_copy_constructible_v<nccl::communicator> &&
              std::is_nothrow_move_constructible_v<nccl::communicator>);
static_assert(!std::is_copy_constructible_v<nccl::group> && std::is_nothrow_move_constructible_v<nccl::group>);
static_assert(sizeof(nccl::unique_id::native) == NCCL_UNIQUE_ID_BYTES);

TEST_CASE("NCCL's errors are cudamem errors in the NCCL domain", "[nccl]") {
  const status failed = nccl::detail::check_nccl(ncclInvalidUsage, "nccl::all_reduce", "ncclAllReduce");
  REQUIRE_FALSE(failed);
  const error& e = failed.error();
  CHECK(e.domain() == error_domain::nccl);
  CHECK(e.code() == errc::nccl);
  CHECK(e.native_code() == ncclInvalidUsage);
  CHECK(e.cuda_status() == cudaSuccess);
  CHECK(std::string(e.call()) == "ncclAllReduce");
  const std::string expected =
      std::string("nccl::all_reduce: ncclAllReduce: ncclInvalidUsage: ") + ncclGetErrorString(ncclInvalidUsage);
  CHECK(std::string(e.message()) == expected.substr(0, error::max_message));
  CHECK(nccl::detail::check_nccl(ncclSuccess, "nccl::all_reduce", "ncclAllReduce"));
}

TEST_CASE("an empty communicator is refused before NCCL is called", "[nccl]") {
  nccl::communicator empty;
  CHECK_FALSE(empty.valid());
  CHECK(empty.get() == nullptr);
  const device_span<float> none;
  const auto refused = nccl::all_reduce(empty, none, none, nccl::reduce_op::sum, stream_ref());
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code() == errc::invalid_argument);
  CHECK(std::string(refused.error().message()) == "nccl::all_reduce: the communicator is empty");
  CHECK_FALSE(nccl::send(empty, none, 0, stream_ref()));
  CHECK_FALSE(nccl::receive(empty, none, 0, stream_ref()));
  CHECK(empty.abort().error().code() == errc::invalid_argument);
  const device_id one(1);
  const nccl::communicator* const none_out = nullptr;
  (void)none_out;
  CHECK(nccl::communicator::init_all({&one, 1}, {}).error().code() == errc::invalid_argument);
}
