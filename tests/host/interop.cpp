// SPDX-License-Identifier: MIT
// DLPack export and import without a device: host memory, and pinned, managed and device views at made-up addresses
// (never dereferenced). The expected data types and device types are DLPack's own codes, spelled out here from the
// specification, not read back from the library. Built only where <dlpack/dlpack.h> is found.
#include <cudamem/cudamem.hpp>
#include <cudamem/interop/dlpack.hpp>

#include "catch.hpp"

#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

using namespace cudamem;

namespace {
bool contains(const error& e, const char* text) { return std::string(e.message()).find(text) != std::string::npos; }

template <class T>
T* fake(std::uintptr_t address) {
  return reinterpret_cast<T*>(address);
}

// A host resource that counts its frees: to see when a buffer handed to a tensor is freed, and how often.
struct counting_host_resource {
  using kind = host;
  int frees = 0;
  result<void*> allocate(stream_ref s, std::size_t bytes, std::size_t alignment) noexcept {
    return inner.allocate(s, bytes, alignment);
  }
  void deallocate(stream_ref s, void* p, std::size_t bytes, std::size_t alignment) noexcept {
    ++frees;
    inner.deallocate(s, p, bytes, alignment);
  }
  host_resource inner;
};

// A host resource that records the stream of each free: the free of a handed-over buffer must not use its old stream.
struct stream_recording_host_resource {
  using kind = host;
  std::vector<cudaStream_t> freed_on;
  result<void*> allocate(stream_ref s, std::size_t bytes, std::size_t alignment) noexcept {
    return inner.allocate(s, bytes, alignment);
  }
  void deallocate(stream_ref s, void* p, std::size_t bytes, std::size_t alignment) noexcept {
    freed_on.push_back(s.get());
    inner.deallocate(s, p, bytes, alignment);
  }
  host_resource inner;
};

// A tensor made by hand, as another framework would hand it over: 2D float rows on the CPU, with a counting deleter.
struct hand_made {
  std::vector<float> storage = std::vector<float>(64);
  std::int64_t shape[2] = {3, 4};
  std::int64_t strides[2] = {6, 1};
  int deleted = 0;
  DLManagedTensor tensor{};
  hand_made() {
    tensor.dl_tensor = {storage.data(), {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, strides, 0};
    tensor.manager_ctx = this;
    tensor.deleter = [](DLManagedTensor* self) { ++static_cast<hand_made*>(self->manager_ctx)->deleted; };
  }
  DLTensor& t() { return tensor.dl_tensor; }
};

template <class T>
DLDataType dtype_of_export() {
  std::vector<std::remove_const_t<T>> values(3);
  auto tensor = to_dlpack(span<T, host>(span(values)));
  REQUIRE(tensor);
  return tensor->get()->dl_tensor.dtype;
}
bool same(DLDataType a, DLDataType b) { return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes; }
}  // namespace

TEST_CASE("exported tensors carry DLPack's data type of the element", "[dlpack]") {
  CHECK(same(dtype_of_export<float>(), {kDLFloat, 32, 1}));
  CHECK(same(dtype_of_export<double>(), {kDLFloat, 64, 1}));
  CHECK(same(dtype_of_export<std::int8_t>(), {kDLInt, 8, 1}));
  CHECK(same(dtype_of_export<std::uint8_t>(), {kDLUInt, 8, 1}));
  CHECK(same(dtype_of_export<std::int16_t>(), {kDLInt, 16, 1}));
  CHECK(same(dtype_of_export<std::uint32_t>(), {kDLUInt, 32, 1}));
  CHECK(same(dtype_of_export<std::int64_t>(), {kDLInt, 64, 1}));
  CHECK(same(dtype_of_export<const std::uint64_t>(), {kDLUInt, 64, 1}));
}

TEST_CASE("each kind exports as its DLPack device", "[dlpack]") {
  std::vector<int> values(5);
  auto on_host = to_dlpack(span(values));
  auto on_pinned = to_dlpack(make_span<pinned>(fake<int>(0x10000), 5, device_id::host()));
  auto on_device = to_dlpack(make_span<device>(fake<int>(0x20000), 5, device_id(3)));
  auto on_managed = to_dlpack(make_span<managed>(fake<int>(0x30000), 5, device_id(2)));
  REQUIRE(on_host);
  REQUIRE(on_pinned);
  REQUIRE(on_device);
  REQUIRE(on_managed);
  const DLDevice host_device = on_host->get()->dl_tensor.device, pinned_device = on_pinned->get()->dl_tensor.device,
                 cuda_device = on_device->get()->dl_tensor.device, managed_device = on_managed->get()->dl_tensor.device;
  CHECK((host_device.device_type == kDLCPU && host_device.device_id == 0));
  CHECK((pinned_device.device_type == kDLCUDAHost && pinned_device.device_id == 0));
  CHECK((cuda_device.device_type == kDLCUDA && cuda_device.device_id == 3));
  CHECK((managed_device.device_type == kDLCUDAManaged && managed_device.device_id == 2));  // the memory's device
  CHECK(on_device->get()->dl_tensor.data == reinterpret_cast<void*>(0x20000));
}

TEST_CASE("a span exports as shape {size}, stride {1}", "[dlpack]") {
  std::vector<float> values(7);
  auto tensor = to_dlpack(span(values));
  REQUIRE(tensor);
  const DLTensor& t = tensor->get()->dl_tensor;
  CHECK(t.data == values.data());
  CHECK(t.ndim == 1);
  CHECK(t.shape[0] == 7);
  REQUIRE(t.strides != nullptr);
  CHECK(t.strides[0] == 1);
  CHECK(t.byte_offset == 0);

  auto empty = to_dlpack(host_span<float>());
  REQUIRE(empty);
  CHECK(empty->get()->dl_tensor.shape[0] == 0);
}

TEST_CASE("pitched rows export with strides in elements", "[dlpack]") {
  std::vector<double> cells(4 * 6);
  auto rows = make_pitched(host_ptr<double>(cells.data()), 5, 4, 6 * sizeof(double));  // 5 of every 6 used
  REQUIRE(rows);
  auto tensor = to_dlpack(*rows);
  REQUIRE(tensor);
  const DLTensor& t = tensor->get()->dl_tensor;
  CHECK(t.ndim == 2);
  CHECK((t.shape[0] == 4 && t.shape[1] == 5));
  CHECK((t.strides[0] == 6 && t.strides[1] == 1));
  CHECK(t.data == cells.data());

  SECTION("a pitch that is no whole number of elements is refused") {
    const host_pitched_span<std::int32_t> odd(host_ptr<std::int32_t>(reinterpret_cast<std::int32_t*>(0x1000)), 2, 3,
                                              10);
    auto refused = to_dlpack(odd);
    REQUIRE(!refused);
    CHECK(refused.error().code() == errc::invalid_argument);
    CHECK(contains(refused.error(), "to_dlpack: pitch (10 bytes) is not a multiple of the element's size (4)"));
  }
}

TEST_CASE("extents beyond DLPack's int64_t are refused", "[dlpack]") {
  const std::size_t huge = std::size_t{1} << 63;
  auto refused = to_dlpack(make_span<device>(fake<std::uint8_t>(0x1000), huge, device_id(0)));
  REQUIRE(!refused);
  CHECK(refused.error().code() == errc::size_overflow);
}

TEST_CASE("a buffer handed to a tensor is freed by the tensor's deleter, once", "[dlpack]") {
  counting_host_resource counter;
  auto owner = host_buffer<int>::allocate(6, stream_ref(), counter);
  REQUIRE(owner);
  int* const address = owner->data().get();

  SECTION("when the owning tensor goes") {
    {
      auto tensor = to_dlpack(std::move(*owner));
      REQUIRE(tensor);
      CHECK(owner->empty());
      CHECK(tensor->get()->dl_tensor.data == address);
      CHECK(tensor->get()->dl_tensor.shape[0] == 6);
      CHECK(counter.frees == 0);
      dlpack_tensor moved = std::move(*tensor);  // the moved-from owner must not call the deleter
      CHECK(!*tensor);
      CHECK(counter.frees == 0);
    }
    CHECK(counter.frees == 1);
  }
  SECTION("when the consumer calls the deleter of a released tensor") {
    auto tensor = to_dlpack(std::move(*owner));
    REQUIRE(tensor);
    DLManagedTensor* handed_over = tensor->release();
    CHECK(!*tensor);
    CHECK(counter.frees == 0);
    handed_over->deleter(handed_over);
    CHECK(counter.frees == 1);
  }
  SECTION("pitched rows too") {
    auto rows = host_pitched_buffer<float>::allocate(3, 2, stream_ref(), counter);
    REQUIRE(rows);
    const std::size_t pitch_elements = rows->pitch_bytes() / sizeof(float);
    {
      auto tensor = to_dlpack(std::move(*rows));
      REQUIRE(tensor);
      const DLTensor& t = tensor->get()->dl_tensor;
      CHECK((t.shape[0] == 2 && t.shape[1] == 3));
      CHECK((t.strides[0] == static_cast<std::int64_t>(pitch_elements) && t.strides[1] == 1));
      CHECK(counter.frees == 0);
    }
    CHECK(counter.frees == 1);
  }
}

TEST_CASE("a handed-over buffer is not freed on its own stream, which may be gone when the deleter runs", "[dlpack]") {
  stream_recording_host_resource recorder;
  // A made-up handle, never given to CUDA: pageable memory is in no stream-ordered work, so nothing is ordered.
  const auto doomed = reinterpret_cast<cudaStream_t>(std::uintptr_t{0xdead0});
  SECTION("a buffer") {
    auto owner = host_buffer<int>::allocate(6, stream_ref::from_native_handle(doomed), recorder);
    REQUIRE(owner);
    REQUIRE(owner->stream().get() == doomed);
    auto tensor = to_dlpack(std::move(*owner));
    REQUIRE(tensor);
    DLManagedTensor* handed_over = tensor->release();
    // ... the stream is destroyed here; later the consumer is done:
    handed_over->deleter(handed_over);
  }
  SECTION("pitched rows") {
    auto rows = host_pitched_buffer<float>::allocate(3, 2, stream_ref::from_native_handle(doomed), recorder);
    REQUIRE(rows);
    REQUIRE(rows->stream().get() == doomed);
    auto tensor = to_dlpack(std::move(*rows));
    REQUIRE(tensor);
  }
  REQUIRE(recorder.freed_on.size() == 1);
  CHECK(recorder.freed_on[0] != doomed);
  CHECK(recorder.freed_on[0] == cudaStreamLegacy);  // the legacy default stream lives as long as the device does
}

TEST_CASE("a managed view's tensor names the memory's device, and imports back on it", "[dlpack]") {
  const auto original = make_span<managed>(fake<float>(0x60000), 4, device_id(3));  // a made-up device
  auto tensor = to_dlpack(original);
  REQUIRE(tensor);
  CHECK(tensor->get()->dl_tensor.device.device_type == kDLCUDAManaged);
  CHECK(tensor->get()->dl_tensor.device.device_id == original.device().get());
  auto back = span_from_dlpack<float, managed>(tensor->get());
  REQUIRE(back);
  CHECK(back->device() == device_id(3));
  CHECK(back->data() == original.data());

  std::vector<int> cells(2 * 4);  // 2D: the same for pitched rows
  const pitched_span<int, managed> rows(ptr<int, managed>(cells.data(), device_id(1)), 3, 2, 4 * sizeof(int));
  auto rows_tensor = to_dlpack(rows);
  REQUIRE(rows_tensor);
  CHECK(rows_tensor->get()->dl_tensor.device.device_id == 1);
  auto rows_back = pitched_from_dlpack<int, managed>(rows_tensor->get());
  REQUIRE(rows_back);
  CHECK(rows_back->device() == device_id(1));
}

TEST_CASE("dlpack_tensor calls an adopted tensor's deleter exactly once", "[dlpack]") {
  hand_made made;
  {
    auto owner = dlpack_tensor::adopt(&made.tensor);
    CHECK(owner.get() == &made.tensor);
    auto moved = std::move(owner);
    CHECK(!owner);
    CHECK(made.deleted == 0);
  }
  CHECK(made.deleted == 1);

  hand_made second;
  {
    auto owner = dlpack_tensor::adopt(&second.tensor);
    owner = dlpack_tensor();  // assigning releases what it held
    CHECK(second.deleted == 1);
  }
  CHECK(second.deleted == 1);

  hand_made no_deleter;
  no_deleter.tensor.deleter = nullptr;
  { auto owner = dlpack_tensor::adopt(&no_deleter.tensor); }  // tolerated: nothing to call
  CHECK(no_deleter.deleted == 0);
}

TEST_CASE("exported tensors import back to the same views", "[dlpack]") {
  SECTION("a device span keeps its address, size and device") {
    const auto original = make_span<device>(fake<float>(0x40000), 9, device_id(5));
    auto tensor = to_dlpack(original);
    REQUIRE(tensor);
    auto back = span_from_dlpack<float, device>(tensor->get());
    REQUIRE(back);
    CHECK(back->data() == original.data());
    CHECK(back->size() == 9);
    CHECK(back->device() == device_id(5));
  }
  SECTION("pitched host rows keep their pitch, and the values are there") {
    std::vector<int> cells(3 * 8);
    for (std::size_t i = 0; i < cells.size(); ++i) cells[i] = static_cast<int>(i * 7);
    const host_pitched_span<int> rows(host_ptr<int>(cells.data()), 5, 3, 8 * sizeof(int));
    auto tensor = to_dlpack(rows);
    REQUIRE(tensor);
    auto back = pitched_from_dlpack<int, host>(tensor->get());
    REQUIRE(back);
    CHECK(back->data() == rows.data());
    CHECK((back->width() == 5 && back->height() == 3 && back->pitch_bytes() == 32));
    CHECK((*back)(2, 4) == (2 * 8 + 4) * 7);
  }
  SECTION("managed memory keeps its kind") {
    auto tensor = to_dlpack(make_span<managed>(fake<double>(0x50000), 2, device_id(0)));
    REQUIRE(tensor);
    CHECK(span_from_dlpack<double, managed>(tensor->get()));
    CHECK(!span_from_dlpack<double, device>(tensor->get()));
  }
}

TEST_CASE("importing reads the layout the tensor describes", "[dlpack]") {
  hand_made made;
  SECTION("row stride and unit column stride") {
    auto rows = pitched_from_dlpack<float, host>(&made.tensor);
    REQUIRE(rows);
    CHECK(rows->data().get() == made.storage.data());
    CHECK((rows->height() == 3 && rows->width() == 4 && rows->pitch_bytes() == 6 * sizeof(float)));
  }
  SECTION("byte_offset moves the first element") {
    made.t().byte_offset = 2 * sizeof(float);
    auto rows = pitched_from_dlpack<float, host>(&made.tensor);
    REQUIRE(rows);
    CHECK(rows->data().get() == made.storage.data() + 2);
  }
  SECTION("null strides are compact rows") {
    made.t().strides = nullptr;
    auto rows = pitched_from_dlpack<float, host>(&made.tensor);
    REQUIRE(rows);
    CHECK(rows->pitch_bytes() == 4 * sizeof(float));
    made.t().ndim = 1;
    made.t().shape[0] = 10;
    auto flat = span_from_dlpack<float, host>(&made.tensor);
    REQUIRE(flat);
    CHECK(flat->size() == 10);
  }
  SECTION("a single row's stride does not matter") {
    made.shape[0] = 1;
    made.strides[0] = 1;
    auto rows = pitched_from_dlpack<float, host>(&made.tensor);
    REQUIRE(rows);
    CHECK((rows->height() == 1 && rows->width() == 4 && rows->pitch_bytes() == 4 * sizeof(float)));
  }
  SECTION("pinned memory is also host memory, never the reverse") {
    made.t().device.device_type = kDLCUDAHost;
    CHECK(pitched_from_dlpack<float, host>(&made.tensor));
    CHECK(pitched_from_dlpack<float, pinned>(&made.tensor));
    made.t().device.device_type = kDLCPU;
    CHECK(!pitched_from_dlpack<float, pinned>(&made.tensor));
  }
  SECTION("a CUDA tensor names its device") {
    made.t().device = {kDLCUDA, 4};
    auto rows = pitched_from_dlpack<float, device>(&made.tensor);
    REQUIRE(rows);
    CHECK(rows->device() == device_id(4));
  }
  CHECK(made.deleted == 0);  // importing never takes ownership
}

TEST_CASE("importing refuses a tensor that breaks a rule, and says which", "[dlpack]") {
  hand_made made;
  auto refusal = [&](auto imported, const char* rule) {
    REQUIRE(!imported);
    CHECK(imported.error().code() == errc::invalid_argument);
    INFO(imported.error().message());
    CHECK(contains(imported.error(), rule));
  };
  SECTION("null") { refusal(pitched_from_dlpack<float, host>(nullptr), "pitched_from_dlpack: the tensor is null"); }
  SECTION("another device type") {
    refusal(pitched_from_dlpack<float, device>(&made.tensor), "device type 1 is not that of device memory (2)");
    made.t().device.device_type = kDLCUDA;
    refusal(pitched_from_dlpack<float, host>(&made.tensor), "device type 2 is not that of host memory (1)");
    refusal(pitched_from_dlpack<float, managed>(&made.tensor), "not that of managed memory (13)");
  }
  SECTION("another dtype") {
    refusal(pitched_from_dlpack<std::int32_t, host>(&made.tensor), "dtype (code 2, 32 bits, 1 lanes) is not T's");
    refusal(pitched_from_dlpack<double, host>(&made.tensor), "dtype");
    made.t().dtype.lanes = 2;
    refusal(pitched_from_dlpack<float, host>(&made.tensor), "2 lanes");
  }
  SECTION("another number of dimensions") {
    refusal(span_from_dlpack<float, host>(&made.tensor), "span_from_dlpack: ndim is 2, not 1");
    made.t().ndim = 3;
    refusal(pitched_from_dlpack<float, host>(&made.tensor), "ndim is 3, not 2");
    made.t().ndim = 2;
    made.t().shape = nullptr;
    refusal(pitched_from_dlpack<float, host>(&made.tensor), "(no shape)");
  }
  SECTION("negative extents and strides") {
    made.shape[1] = -4;
    refusal(pitched_from_dlpack<float, host>(&made.tensor), "dimension 1 has a negative extent or stride");
    made.shape[1] = 4;
    made.strides[0] = -6;
    refusal(pitched_from_dlpack<float, host>(&made.tensor), "dimension 0 has a negative extent or stride");
  }
  SECTION("columns that are not adjacent") {
    made.strides[1] = 2;
    refusal(pitched_from_dlpack<float, host>(&made.tensor), "the columns are 2 elements apart, not adjacent");
    made.t().ndim = 1;
    made.strides[0] = 3;
    refusal(span_from_dlpack<float, host>(&made.tensor), "span_from_dlpack: the columns are 3 elements apart");
  }
  SECTION("rows that overlap (a row stride shorter than a row, or 0 as in broadcasting)") {
    made.strides[0] = 3;
    refusal(pitched_from_dlpack<float, host>(&made.tensor), "pitch (12 bytes) is less than a row");
    made.strides[0] = 0;
    refusal(pitched_from_dlpack<float, host>(&made.tensor), "pitch (0 bytes) is less than a row");
  }
  SECTION("a first element misaligned for T") {
    made.t().byte_offset = 2;
    refusal(pitched_from_dlpack<float, host>(&made.tensor), "data + byte_offset (2) is not aligned for T (4 bytes)");
  }
  SECTION("a negative device_id for device memory") {
    made.t().device = {kDLCUDA, -1};
    refusal(pitched_from_dlpack<float, device>(&made.tensor), "device_id -1 names no device");
  }
  CHECK(made.deleted == 0);
}
