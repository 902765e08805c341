// SPDX-License-Identifier: MIT
// cudamem, internal: the atomics, locks and yield of the pool, the registries and the peer table, on GCC/Clang's
// __atomic builtins and pthreads, so that the core headers never include <atomic>, <mutex> or <thread> (libstdc++'s
// atomic machinery costs each translation unit over a second of compile time; docs/decisions.md). ThreadSanitizer
// understands the builtins and pthread mutexes as it does std::atomic and std::mutex.
#pragma once

#include <pthread.h>
#include <sched.h>

namespace cudamem::detail {

/// std::memory_order's orders, as the builtins take them.
enum class memory_order : int {
  relaxed = __ATOMIC_RELAXED,
  acquire = __ATOMIC_ACQUIRE,
  release = __ATOMIC_RELEASE,
  acq_rel = __ATOMIC_ACQ_REL,
  seq_cst = __ATOMIC_SEQ_CST,
};
inline constexpr memory_order memory_order_relaxed = memory_order::relaxed;
inline constexpr memory_order memory_order_acquire = memory_order::acquire;
inline constexpr memory_order memory_order_release = memory_order::release;
inline constexpr memory_order memory_order_acq_rel = memory_order::acq_rel;
inline constexpr memory_order memory_order_seq_cst = memory_order::seq_cst;

/// The part of std::atomic<T> cudamem uses, for T an integer, bool or pointer; the same orders and defaults.
template <class T>
class atomic {
 public:
  constexpr atomic() noexcept : value_() {}
  constexpr atomic(T value) noexcept : value_(value) {}  // NOLINT(google-explicit-constructor): as std::atomic
  atomic(const atomic&) = delete;
  atomic& operator=(const atomic&) = delete;

  T load(memory_order order = memory_order::seq_cst) const noexcept { return __atomic_load_n(&value_, int(order)); }
  void store(T value, memory_order order = memory_order::seq_cst) noexcept {
    __atomic_store_n(&value_, value, int(order));
  }
  T exchange(T value, memory_order order = memory_order::seq_cst) noexcept {
    return __atomic_exchange_n(&value_, value, int(order));
  }
  T fetch_add(T delta, memory_order order = memory_order::seq_cst) noexcept {
    return __atomic_fetch_add(&value_, delta, int(order));
  }
  T fetch_sub(T delta, memory_order order = memory_order::seq_cst) noexcept {
    return __atomic_fetch_sub(&value_, delta, int(order));
  }
  T fetch_or(T bits, memory_order order = memory_order::seq_cst) noexcept {
    return __atomic_fetch_or(&value_, bits, int(order));
  }
  bool compare_exchange_weak(T& expected, T desired, memory_order order = memory_order::seq_cst) noexcept {
    return __atomic_compare_exchange_n(&value_, &expected, desired, true, int(order), failure_order(order));
  }
  bool compare_exchange_strong(T& expected, T desired, memory_order order = memory_order::seq_cst) noexcept {
    return __atomic_compare_exchange_n(&value_, &expected, desired, false, int(order), failure_order(order));
  }

 private:
  // std::atomic's failure order for a single order: no release part.
  static constexpr int failure_order(memory_order order) noexcept {
    return order == memory_order::acq_rel   ? __ATOMIC_ACQUIRE
           : order == memory_order::release ? __ATOMIC_RELAXED
                                            : int(order);
  }
  T value_;
};

/// A pthread mutex (std::mutex's lock, try_lock and unlock), statically initialized; never destroyed (a mutex made by
/// PTHREAD_MUTEX_INITIALIZER needs no pthread_mutex_destroy on the platforms cudamem supports).
class mutex {
 public:
  constexpr mutex() noexcept = default;
  mutex(const mutex&) = delete;
  mutex& operator=(const mutex&) = delete;
  void lock() noexcept { pthread_mutex_lock(&native_); }
  bool try_lock() noexcept { return pthread_mutex_trylock(&native_) == 0; }
  void unlock() noexcept { pthread_mutex_unlock(&native_); }

 private:
  pthread_mutex_t native_ = PTHREAD_MUTEX_INITIALIZER;
};

/// Gives the processor to another thread (std::this_thread::yield).
inline void yield() noexcept { sched_yield(); }

/// Holds `Lock` (mutex, spin_lock) from construction to destruction (std::lock_guard).
template <class Lock>
class lock_guard {
 public:
  explicit lock_guard(Lock& lock) noexcept : lock_(lock) { lock_.lock(); }
  ~lock_guard() { lock_.unlock(); }
  lock_guard(const lock_guard&) = delete;  // one unlock per lock
  lock_guard& operator=(const lock_guard&) = delete;

 private:
  Lock& lock_;
};

inline constexpr struct try_to_lock_t {
} try_to_lock{};
/// A lock that may be released and taken again, or only tried (std::unique_lock's subset); unlocks if held at the end.
template <class Lock>
class unique_lock {
 public:
  explicit unique_lock(Lock& lock) noexcept : lock_(lock) { this->lock(); }
  unique_lock(Lock& lock, try_to_lock_t) noexcept : lock_(lock), held_(lock.try_lock()) {}
  ~unique_lock() {
    if (held_) lock_.unlock();
  }
  unique_lock(const unique_lock&) = delete;
  unique_lock& operator=(const unique_lock&) = delete;
  void lock() noexcept {
    lock_.lock();
    held_ = true;
  }
  void unlock() noexcept {
    lock_.unlock();
    held_ = false;
  }
  explicit operator bool() const noexcept { return held_; }

 private:
  Lock& lock_;
  bool held_ = false;
};

/// A test-and-test-and-set lock: uncontended, one atomic exchange (a third of a mutex's cost); a waiter yields.
class spin_lock {
 public:
  bool try_lock() noexcept {
    return !held_.load(memory_order::relaxed) && !held_.exchange(true, memory_order::acquire);
  }
  void lock() noexcept {
    while (!try_lock()) yield();
  }
  void unlock() noexcept { held_.store(false, memory_order::release); }

 private:
  atomic<bool> held_{false};
};

}  // namespace cudamem::detail
