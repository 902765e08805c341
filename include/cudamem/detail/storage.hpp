// SPDX-License-Identifier: MIT
// cudamem, internal: the owners, the optional value and the growable array of buffers, the caching pool and its
// stream order, so that the core headers never include <memory>, <optional> or <vector> (their cost to each
// translation unit: docs/decisions.md).
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>

namespace cudamem::detail {

/// Owns one `T` made by new, or an array made by new[] (std::unique_ptr's subset); move-only.
template <class T>
class owner {
  using element = std::remove_extent_t<T>;

 public:
  constexpr owner() noexcept = default;
  explicit owner(element* p) noexcept : p_(p) {}
  owner(owner&& other) noexcept : p_(other.p_) { other.p_ = nullptr; }
  owner& operator=(owner&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  ~owner() { reset(); }

  element* get() const noexcept { return p_; }
  element* operator->() const noexcept { return p_; }
  element& operator*() const noexcept { return *p_; }
  element& operator[](std::size_t i) const noexcept { return p_[i]; }
  explicit operator bool() const noexcept { return p_ != nullptr; }
  element* release() noexcept {
    element* p = p_;
    p_ = nullptr;
    return p;
  }
  void reset(element* p = nullptr) noexcept {
    element* old = p_;
    p_ = p;
    if constexpr (std::is_array_v<T>) delete[] old;
    else delete old;
  }

 private:
  element* p_ = nullptr;
};

/// A `T` or nothing (std::optional's subset: made empty or from a `T`, tested, dereferenced); move-constructible.
template <class T>
class maybe {
 public:
  maybe() noexcept {}
  maybe(T&& value) noexcept(std::is_nothrow_move_constructible_v<T>) : engaged_(true) {  // NOLINT: as std::optional
    ::new (static_cast<void*>(&value_)) T(static_cast<T&&>(value));
  }
  maybe(const T& value) noexcept(std::is_nothrow_copy_constructible_v<T>) : engaged_(true) {  // NOLINT
    ::new (static_cast<void*>(&value_)) T(value);
  }
  maybe(maybe&& other) noexcept(std::is_nothrow_move_constructible_v<T>) : engaged_(other.engaged_) {
    if (engaged_) ::new (static_cast<void*>(&value_)) T(static_cast<T&&>(other.value_));
  }
  maybe& operator=(maybe&&) = delete;
  ~maybe() {
    if (engaged_) value_.~T();
  }
  explicit operator bool() const noexcept { return engaged_; }
  T& operator*() noexcept { return value_; }
  const T& operator*() const noexcept { return value_; }
  T* operator->() noexcept { return &value_; }
  const T* operator->() const noexcept { return &value_; }

 private:
  union {
    T value_;
  };
  bool engaged_ = false;
};

/// A growable array of trivially copyable `T` (std::vector's subset the pool uses), on malloc and realloc. Out of
/// memory ends the process, as std::vector's bad_alloc does in cudamem's noexcept functions.
template <class T>
class vec {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>);

 public:
  constexpr vec() noexcept = default;
  vec(const vec&) = delete;
  vec& operator=(const vec&) = delete;
  ~vec() { std::free(data_); }

  T* begin() const noexcept { return data_; }
  T* end() const noexcept { return data_ + size_; }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  T& operator[](std::size_t i) const noexcept { return data_[i]; }
  T& front() const noexcept { return data_[0]; }
  T& back() const noexcept { return data_[size_ - 1]; }

  void push_back(const T& value) noexcept {
    if (size_ == capacity_) grow(size_ + 1);
    data_[size_++] = value;
  }
  void pop_back() noexcept { --size_; }
  /// Grows to `n` elements, the new ones `value` (never shrinks: the pool only grows it).
  void resize(std::size_t n, const T& value) noexcept {
    if (n > capacity_) grow(n);
    for (; size_ < n; ++size_) data_[size_] = value;
  }
  /// Removes [first, last), keeping the order of the rest.
  void erase(T* first, T* last) noexcept {
    if (first == last) return;  // also an empty array's null data
    std::memmove(static_cast<void*>(first), last, std::size_t(end() - last) * sizeof(T));
    size_ -= std::size_t(last - first);
  }
  void erase(T* at) noexcept { erase(at, at + 1); }
  /// Appends [first, last) (not of this array).
  void append(const T* first, const T* last) noexcept {
    const std::size_t n = std::size_t(last - first);
    if (n == 0) return;
    if (size_ + n > capacity_) grow(size_ + n);
    std::memcpy(static_cast<void*>(data_ + size_), first, n * sizeof(T));
    size_ += n;
  }
  /// Removes the elements for which `pred` is true, keeping the order of the rest (std::erase_if).
  template <class Pred>
  void erase_if(Pred pred) noexcept {
    std::size_t kept = 0;
    for (std::size_t i = 0; i < size_; ++i)
      if (!pred(data_[i])) data_[kept++] = data_[i];
    size_ = kept;
  }
  bool contains(const T& value) const noexcept {
    for (const T& v : *this)
      if (v == value) return true;
    return false;
  }
  void swap(vec& other) noexcept {
    T* const data = data_;
    const std::size_t size = size_, capacity = capacity_;
    data_ = other.data_, size_ = other.size_, capacity_ = other.capacity_;
    other.data_ = data, other.size_ = size, other.capacity_ = capacity;
  }

 private:
  void grow(std::size_t at_least) noexcept {
    std::size_t capacity = capacity_ < 4 ? 4 : capacity_ * 2;
    if (capacity < at_least) capacity = at_least;
    void* moved = std::realloc(static_cast<void*>(data_), capacity * sizeof(T));
    if (moved == nullptr) std::abort();
    data_ = static_cast<T*>(moved);
    capacity_ = capacity;
  }
  T* data_ = nullptr;
  std::size_t size_ = 0, capacity_ = 0;
};

}  // namespace cudamem::detail
