// SPDX-License-Identifier: MIT
// libFuzzer harness: the host-side arithmetic of views against a model written out here. span's
// subspan (both forms), first, last and subspan_unchecked, as_bytes and as_writable_bytes, and ptr
// arithmetic and comparison. Slices of a real heap allocation are read and written in full, so a
// bounds check that lets one element too many through is an AddressSanitizer report; huge views at
// made-up device addresses exercise the overflow checks without touching memory. Any disagreement
// with the model aborts with the expression that failed.
#include <cudamem/span.hpp>

#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>

namespace {
using namespace cudamem;

#define EXPECT(condition)                                                                              \
  do {                                                                                                 \
    if (!(condition)) {                                                                                \
      std::fprintf(stderr, "views fuzzer: the model disagrees: %s (line %d)\n", #condition, __LINE__); \
      std::abort();                                                                                    \
    }                                                                                                  \
  } while (0)

constexpr std::size_t size_max = std::numeric_limits<std::size_t>::max();
constexpr std::size_t steppable_bytes = static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max());

// An argument for slicing a view of `size` elements: mostly near its edges, sometimes extreme.
std::size_t pick(FuzzedDataProvider& in, std::size_t size) {
  switch (in.ConsumeIntegralInRange<int>(0, 4)) {
    case 0: return in.ConsumeIntegralInRange<std::size_t>(0, size < size_max - 2 ? size + 2 : size_max);
    case 1: return size - std::min(size, in.ConsumeIntegralInRange<std::size_t>(0, 3));
    case 2: return size_max - in.ConsumeIntegralInRange<std::size_t>(0, 3);
    case 3:
      return steppable_bytes / in.ConsumeIntegralInRange<std::size_t>(1, 16) +
             in.ConsumeIntegralInRange<std::size_t>(0, 2);
    default: return in.ConsumeIntegral<std::size_t>();
  }
}

template <class T>
struct element {
  unsigned char bytes[sizeof(T)];
};

// Reads and writes the first and last byte of every element: AddressSanitizer checks each access.
template <class T, class K>
void touch(span<T, K> view) {
  for (T& x : view) {
    auto* raw = reinterpret_cast<unsigned char*>(&x);
    raw[0] = static_cast<unsigned char>(raw[0] + 1);
    raw[sizeof(T) - 1] = static_cast<unsigned char>(raw[sizeof(T) - 1] ^ 0x5a);
  }
}

// What a slice must give: out_of_range outside the view, size_overflow for an offset a pointer
// cannot step, else [begin + offset, + count).
struct expected_slice {
  bool in_range;
  std::size_t offset;  // from the view's first element
  std::size_t count;
};

template <class T, class K>
result<span<T, K>> slice(span<T, K> view, int op, std::size_t a, std::size_t b, expected_slice& model) {
  const std::size_t size = view.size();
  switch (op) {
    case 0: model = {a <= size && b <= size - a, a, b}; return view.subspan(a, b);
    case 1: model = {a <= size, a, size - a}; return view.subspan(a);
    case 2: model = {a <= size, 0, a}; return view.first(a);
    default: model = {a <= size, size - a, a}; return view.last(a);
  }
}

template <class T, class K>
void check_slice(const result<span<T, K>>& got, const expected_slice& model, std::uintptr_t first_address) {
  if (!model.in_range) {
    EXPECT(!got.has_value());
    EXPECT(got.error().code() == errc::out_of_range);
    return;
  }
  if (model.offset > steppable_bytes / sizeof(T)) {
    EXPECT(!got.has_value());
    EXPECT(got.error().code() == errc::size_overflow);
    return;
  }
  EXPECT(got.has_value());
  EXPECT(got->size() == model.count);
  EXPECT(reinterpret_cast<std::uintptr_t>(got->data().get()) == first_address + model.offset * sizeof(T));
}

template <class T, class K>
void check_bytes(span<T, K> view) {
  const bool fits = view.size() <= size_max / sizeof(T);
  const auto bytes = as_bytes(view);
  EXPECT(bytes.has_value() == fits);
  if (!fits) {
    EXPECT(bytes.error().code() == errc::size_overflow);
    return;
  }
  EXPECT(bytes->size() == view.size() * sizeof(T));
  EXPECT(static_cast<const void*>(bytes->data().get()) == static_cast<const void*>(view.data().get()));
  EXPECT(bytes->device() == view.device());
  if constexpr (!std::is_const_v<T>) {
    const auto writable = as_writable_bytes(view);
    EXPECT(writable.has_value() && writable->size() == bytes->size());
  }
}

// Slices of a real allocation, each touched in full.
template <class T>
void real_views(FuzzedDataProvider& in) {
  const std::size_t n = in.ConsumeIntegralInRange<std::size_t>(0, 64);
  const std::unique_ptr<T[]> storage(new T[n]());
  T* const base = storage.get();
  host_span<T> view(host_ptr<T>(base), n);
  std::size_t begin = 0;
  for (int step = 0; step < 16 && in.remaining_bytes() > 0; ++step) {
    const int op = in.ConsumeIntegralInRange<int>(0, 4);
    const std::size_t a = pick(in, view.size());
    const std::size_t b = pick(in, view.size());
    if (op == 4) {
      // The unchecked form, only where its precondition holds.
      if (a > view.size() || b > view.size() - a) continue;
      const host_span<T> part = view.subspan_unchecked(a, b);
      EXPECT(part.data().get() == base + begin + a && part.size() == b);
      touch(part);
      continue;
    }
    expected_slice model{};
    const auto got = slice(view, op, a, b, model);
    check_slice(got, model, reinterpret_cast<std::uintptr_t>(base + begin));
    if (!got) continue;
    begin += model.offset;
    view = *got;
    touch(view);
    check_bytes(view);

    // ptr arithmetic inside the view: differences, ordering, and the way back.
    const std::size_t k = in.ConsumeIntegralInRange<std::size_t>(0, view.size());
    const host_ptr<T> first = view.data();
    host_ptr<T> moved = first + static_cast<std::ptrdiff_t>(k);
    EXPECT(moved - first == static_cast<std::ptrdiff_t>(k));
    EXPECT(moved - static_cast<std::ptrdiff_t>(k) == first);
    EXPECT((k == 0) == (moved == first));
    EXPECT((k > 0) == (first < moved));
    EXPECT(moved.get() == base + begin + k);
    moved -= static_cast<std::ptrdiff_t>(k);
    EXPECT(moved == first);
  }
}

// Views of up to SIZE_MAX elements at made-up device addresses: only arithmetic, never an access.
template <class T>
void huge_views(FuzzedDataProvider& in) {
  const std::uintptr_t address = 0x10000 * in.ConsumeIntegralInRange<std::uintptr_t>(1, 16);
  // The view must fit the address space, as any real one does.
  const std::size_t limit = (std::numeric_limits<std::uintptr_t>::max() - address) / sizeof(T);
  const std::size_t n = std::min(pick(in, limit), limit);
  device_span<T> view(device_ptr<T>(reinterpret_cast<T*>(address), device_id(in.ConsumeIntegralInRange<int>(0, 7))), n);
  check_bytes(view);
  std::uintptr_t first = address;
  for (int step = 0; step < 8 && in.remaining_bytes() > 0; ++step) {
    const int op = in.ConsumeIntegralInRange<int>(0, 3);
    expected_slice model{};
    const auto got = slice(view, op, pick(in, view.size()), pick(in, view.size()), model);
    check_slice(got, model, first);
    if (!got) continue;
    EXPECT(got->device() == view.device());
    first += model.offset * sizeof(T);
    view = *got;
    check_bytes(view);
  }
}

template <class T>
void run(FuzzedDataProvider& in) {
  if (in.ConsumeBool()) real_views<T>(in);
  else huge_views<T>(in);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  switch (in.ConsumeIntegralInRange<int>(0, 3)) {
    case 0: run<unsigned char>(in); break;
    case 1: run<std::uint32_t>(in); break;
    case 2: run<element<double[3]>>(in); break;  // 24 bytes
    default: run<element<char[7]>>(in); break;   // an odd size
  }
  return 0;
}
