// SPDX-License-Identifier: MIT
/// \file
/// Device memory and events shared between processes on one machine (one process per GPU, as NCCL jobs run): typed,
/// checked descriptors to send, and owning imports. Not in cudamem.hpp: include <cudamem/ipc.hpp> (and, to pass a
/// pool's file descriptor, <cudamem/fd_passing.hpp>).
///
///     ipc_descriptor: kind(), count(), element_size(), device_ordinal(), exporter_pid(), data(), size;
///                     from_bytes(p, n)   trivially copyable bytes to send: magic, version, checksum, element type
///     export_ipc(device_span<T>)                 cudaMalloc memory (cudaIpcGetMemHandle)  -> result<ipc_descriptor>
///     import_ipc<T>(descriptor)                  -> result<ipc_memory<T>> (cudaIpcOpenMemHandle)
///     ipc_pool::create(device [, options])       an exportable stream-ordered pool; a memory resource (buffers)
///       export_memory(device_span<T>), share() -> {unique_fd fd, ipc_descriptor} (send both: send_fd)
///     imported_pool::import(descriptor, fd); import_memory<T>(descriptor)   -> result<ipc_memory<T>>
///     ipc_memory<T>: view(), data(), size(), device(), handle_kind(); closes or frees when the last import goes
///     ipc_event::create([device]); export_handle(); ipc_event::open(descriptor); ref(), record, synchronize, ready
///     ipc_kind: device_memory, pool_memory, pool, event; growable (reserved for VMM buffers, not made here)
/// Importing one descriptor twice in a process gives two owners of one mapping (a process-wide table counts them).
/// Importing in the exporting process is refused (CUDA cannot). docs/ipc.md: the protocol and the exporter's exit.
#pragma once

#include <cudamem/detail/driver.hpp>
#include <cudamem/detail/process_wide.hpp>
#include <cudamem/detail/storage.hpp>
#include <cudamem/detail/sync.hpp>
#include <cudamem/resource.hpp>
#include <cudamem/span.hpp>
#include <cudamem/stream.hpp>
#include <cudamem/unique_fd.hpp>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <utility>

#include <signal.h>
#include <time.h>
#include <unistd.h>

namespace cudamem {

/// What an ipc_descriptor describes, and so which call imports it.
enum class ipc_kind : std::uint8_t {
  device_memory = 1,  ///< cudaMalloc memory (cudaIpcGetMemHandle): import_ipc<T>
  pool_memory = 2,    ///< an allocation of an ipc_pool (cudaMemPoolExportPointer): imported_pool::import_memory<T>
  pool = 3,           ///< an ipc_pool itself, whose file descriptor travels beside it: imported_pool::import
  event = 4,          ///< an ipc_event (cudaIpcGetEventHandle): ipc_event::open
  growable = 5,       ///< reserved for VMM growable buffers (cuMemExportToShareableHandle); nothing here makes one
};
/// "device_memory", "pool_memory", "pool", "event", "growable"; "unknown" for another value.
[[nodiscard]] constexpr const char* to_string(ipc_kind kind) noexcept {
  constexpr const char* names[] = {"device_memory", "pool_memory", "pool", "event", "growable"};
  const unsigned index = static_cast<unsigned>(kind) - 1u;
  return index < 5u ? names[index] : "unknown";
}

namespace detail {
/// The descriptor's bytes, in the order they travel (one machine: one byte order). No padding.
struct ipc_fields {
  std::uint32_t magic;
  std::uint16_t version;
  std::uint8_t kind;        // ipc_kind
  std::uint8_t type_class;  // ipc_type_class<T>(): 0 for types only their size describes
  std::uint32_t element_size;
  std::uint32_t element_align;
  std::int32_t device;          // the exporter's ordinal (messages only: ordinals differ between processes)
  std::uint32_t pid;            // the exporter's process id
  std::uint64_t process_tag;    // with pid: tells the exporting process itself (pids repeat across namespaces)
  std::uint64_t pool_id;        // pool and pool_memory: which pool; else 0
  std::uint64_t count;          // elements
  std::uint64_t offset_bytes;   // of the first element, from the allocation's base
  std::uint64_t allocation_bytes;
  unsigned char uuid[16];       // the device's, which names it in every process
  unsigned char handle[64];     // cudaIpcMemHandle_t, cudaMemPoolPtrExportData or cudaIpcEventHandle_t
  std::uint64_t checksum;       // FNV-1a over every byte before it
};
static_assert(sizeof(ipc_fields) == 152 && std::has_unique_object_representations_v<ipc_fields>);
static_assert(sizeof(cudaIpcMemHandle_t) == 64 && sizeof(cudaMemPoolPtrExportData) == 64 &&
              sizeof(cudaIpcEventHandle_t) == 64);
struct ipc_descriptor_access;
}  // namespace detail

/// What one process sends another so that it can import memory or an event: trivially copyable bytes (send them as
/// they are: send_value, a pipe, a file) with a magic number, a version, a checksum, the element type's size and
/// class, the element count and the device's UUID. Made by the export calls; checked again by every import.
class ipc_descriptor {
 public:
  static constexpr std::uint32_t magic_value = 0x50494D43u;  ///< "CMIP" in memory order.
  static constexpr std::uint16_t current_version = 1;        ///< The layout this cudamem writes and reads.
  static constexpr std::size_t size = sizeof(detail::ipc_fields);  ///< Bytes to send.

  constexpr ipc_descriptor() noexcept = default;  ///< All zero: no import accepts it.
  /// A descriptor from `bytes` received from another process. Errors: invalid_argument (not `size` bytes, not a
  /// cudamem descriptor, another version, corrupted: the checksum differs, an unknown kind).
  [[nodiscard]] static result<ipc_descriptor> from_bytes(const void* bytes, std::size_t bytes_size) noexcept;
  [[nodiscard]] ipc_kind kind() const noexcept { return ipc_kind(fields_.kind); }  ///< What it describes.
  [[nodiscard]] std::uint16_t version() const noexcept { return fields_.version; }  ///< Its layout's version.
  [[nodiscard]] std::uint64_t count() const noexcept { return fields_.count; }  ///< Elements (memory; else 0).
  [[nodiscard]] std::uint32_t element_size() const noexcept { return fields_.element_size; }  ///< sizeof(T).
  /// The exporter's device ordinal, in the exporter's numbering (CUDA_VISIBLE_DEVICES may differ here).
  [[nodiscard]] int device_ordinal() const noexcept { return fields_.device; }
  [[nodiscard]] unsigned exporter_pid() const noexcept { return fields_.pid; }  ///< The exporting process's id.
  /// Its `size` bytes, to send.
  [[nodiscard]] const std::byte* data() const noexcept { return reinterpret_cast<const std::byte*>(&fields_); }
  /// Equal when every byte is.
  friend bool operator==(const ipc_descriptor& a, const ipc_descriptor& b) noexcept {
    return std::memcmp(&a.fields_, &b.fields_, size) == 0;
  }

 private:
  friend struct detail::ipc_descriptor_access;
  detail::ipc_fields fields_{};
};
static_assert(std::is_trivially_copyable_v<ipc_descriptor> && sizeof(ipc_descriptor) == ipc_descriptor::size);

namespace detail {
struct ipc_descriptor_access {
  static ipc_fields& fields(ipc_descriptor& d) noexcept { return d.fields_; }
  static const ipc_fields& fields(const ipc_descriptor& d) noexcept { return d.fields_; }
};
inline ipc_fields& fields_of(ipc_descriptor& d) noexcept { return ipc_descriptor_access::fields(d); }
inline const ipc_fields& fields_of(const ipc_descriptor& d) noexcept { return ipc_descriptor_access::fields(d); }

/// The class of an element type the descriptor records beside its size: 1 unsigned, 2 signed, 3 floating, 4 bool, 0
/// any other (a struct: only its size is checked).
template <class T>
constexpr std::uint8_t ipc_type_class() noexcept {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, bool>) return 4;
  else if constexpr (std::is_floating_point_v<U>) return 3;
  else if constexpr (std::is_integral_v<U>) return std::is_signed_v<U> ? 2 : 1;
  else return 0;
}
inline const char* ipc_type_class_name(unsigned type_class) noexcept {
  constexpr const char* names[] = {"a type known by its size", "unsigned integers", "signed integers",
                                   "floating-point numbers", "bool"};
  return type_class < 5u ? names[type_class] : "an unknown class";
}
/// FNV-1a, 64 bits, of the bytes before the checksum.
inline std::uint64_t ipc_checksum(const ipc_fields& f) noexcept {
  const auto* bytes = reinterpret_cast<const unsigned char*>(&f);
  std::uint64_t hash = 0xcbf29ce484222325ull;
  for (std::size_t i = 0; i < offsetof(ipc_fields, checksum); ++i) hash = (hash ^ bytes[i]) * 0x100000001b3ull;
  return hash;
}
/// Writes the checksum of `d`'s other bytes: the last step of making one.
inline void seal(ipc_descriptor& d) noexcept { fields_of(d).checksum = ipc_checksum(fields_of(d)); }

/// This process's tag, random, made once (fork children share it: the pid tells them apart).
struct CUDAMEM_DETAIL_PROCESS_WIDE ipc_process_state {
  atomic<std::uint64_t> tag{0};
  atomic<std::uint64_t> pools{0};  // pools made: each gets a new id
};
inline std::uint64_t ipc_mix(std::uint64_t x) noexcept {  // splitmix64's finalizer
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
inline std::uint64_t ipc_process_tag() noexcept {
  ipc_process_state& state = process_wide<ipc_process_state>();
  std::uint64_t tag = state.tag.load(memory_order_acquire);
  if (tag != 0) return tag;
  timespec now{};
  (void)clock_gettime(CLOCK_REALTIME, &now);
  const std::uint64_t nanoseconds =
      static_cast<std::uint64_t>(now.tv_sec) * 1000000000ull + static_cast<std::uint64_t>(now.tv_nsec);
  std::uint64_t made =
      ipc_mix(nanoseconds ^ (static_cast<std::uint64_t>(::getpid()) << 40) ^ reinterpret_cast<std::uintptr_t>(&state));
  if (made == 0) made = 1;
  std::uint64_t expected = 0;
  return state.tag.compare_exchange_strong(expected, made, memory_order_acq_rel) ? made : expected;
}

/// A sealed descriptor of `kind` for the fields the caller gives (elements, device, handle); pid and tag are this
/// process's. Needs no device: the export calls fill `uuid` and `handle` from CUDA.
inline ipc_descriptor make_ipc_descriptor(ipc_kind kind, std::uint8_t type_class, std::size_t element_size,
                                          std::size_t element_align, std::uint64_t count, int device,
                                          const unsigned char (&uuid)[16], const void* handle,
                                          std::uint64_t offset_bytes = 0, std::uint64_t allocation_bytes = 0,
                                          std::uint64_t pool_id = 0) noexcept {
  ipc_descriptor d;
  ipc_fields& f = fields_of(d);
  f.magic = ipc_descriptor::magic_value;
  f.version = ipc_descriptor::current_version;
  f.kind = static_cast<std::uint8_t>(kind);
  f.type_class = type_class;
  f.element_size = static_cast<std::uint32_t>(element_size);
  f.element_align = static_cast<std::uint32_t>(element_align);
  f.device = device;
  f.pid = static_cast<std::uint32_t>(::getpid());
  f.process_tag = ipc_process_tag();
  f.pool_id = pool_id;
  f.count = count;
  f.offset_bytes = offset_bytes;
  f.allocation_bytes = allocation_bytes;
  std::memcpy(f.uuid, uuid, sizeof f.uuid);
  if (handle != nullptr) std::memcpy(f.handle, handle, sizeof f.handle);
  seal(d);
  return d;
}

/// The checks every descriptor passes before CUDA sees it: magic, version, checksum, a known kind, and `expected`
/// (an import of one kind names the call that imports the other). Needs no device.
inline status check_ipc_descriptor(const ipc_descriptor& d, ipc_kind expected, const char* api) noexcept {
  const ipc_fields& f = fields_of(d);
  if (f.magic != ipc_descriptor::magic_value)
    return error(errc::invalid_argument, api, "not a cudamem IPC descriptor (magic 0x%08x, expected 0x%08x)", f.magic,
                 ipc_descriptor::magic_value);
  if (f.version != ipc_descriptor::current_version)
    return error(errc::invalid_argument, api, "descriptor version %u; this cudamem reads version %u", f.version,
                 ipc_descriptor::current_version);
  if (const std::uint64_t sum = ipc_checksum(f); sum != f.checksum)
    return error(errc::invalid_argument, api,
                 "the descriptor is corrupted: its checksum is 0x%016llx, its bytes give 0x%016llx",
                 static_cast<unsigned long long>(f.checksum), static_cast<unsigned long long>(sum));
  const ipc_kind kind = ipc_kind(f.kind);
  if (f.kind < 1 || f.kind > 5) return error(errc::invalid_argument, api, "unknown descriptor kind %u", f.kind);
  if (kind != expected) {
    constexpr const char* importers[] = {"import_ipc", "imported_pool::import_memory", "imported_pool::import",
                                         "ipc_event::open", "the growable buffer's import"};
    return error(errc::invalid_argument, api, "the descriptor holds %s (import it with %s), not %s", to_string(kind),
                 importers[f.kind - 1], to_string(expected));
  }
  return {};
}
/// The element checks of a memory descriptor imported as `T` (size, class, alignment, extent). Needs no device.
inline status check_ipc_elements(const ipc_descriptor& d, std::size_t element_size, std::size_t element_align,
                                 std::uint8_t type_class, const char* api) noexcept {
  const ipc_fields& f = fields_of(d);
  if (f.element_size != element_size)
    return error(errc::invalid_argument, api, "exported with %u-byte elements; imported as %zu-byte elements",
                 f.element_size, element_size);
  if (f.type_class != 0 && type_class != 0 && f.type_class != type_class)
    return error(errc::invalid_argument, api, "exported as %s; imported as %s", ipc_type_class_name(f.type_class),
                 ipc_type_class_name(type_class));
  if (f.offset_bytes % element_align != 0)
    return error(errc::invalid_argument, api,
                 "the elements begin %llu bytes into the allocation, not a multiple of "
                 "the imported type's alignment (%zu)",
                 static_cast<unsigned long long>(f.offset_bytes), element_align);
  if (f.count > ~std::uint64_t{0} / element_size)
    return error(errc::size_overflow, api, "%llu elements of %zu bytes overflow",
                 static_cast<unsigned long long>(f.count), element_size);
  const std::uint64_t bytes = f.count * element_size;
  if (f.offset_bytes > f.allocation_bytes || bytes > f.allocation_bytes - f.offset_bytes)
    return error(errc::invalid_argument, api,
                 "%llu bytes from offset %llu lie outside the exported allocation of %llu bytes",
                 static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(f.offset_bytes),
                 static_cast<unsigned long long>(f.allocation_bytes));
  if (bytes > static_cast<std::uint64_t>(~std::size_t{0} >> 1))
    return error(errc::size_overflow, api, "%llu bytes do not fit this process's address space",
                 static_cast<unsigned long long>(bytes));
  return {};
}
/// invalid_argument when `d` came from this very process (CUDA opens IPC handles of other processes only).
inline status refuse_own_descriptor(const ipc_descriptor& d, const char* api) noexcept {
  const ipc_fields& f = fields_of(d);
  if (f.pid == static_cast<std::uint32_t>(::getpid()) && f.process_tag == ipc_process_tag())
    return error(errc::invalid_argument, api,
                 "the descriptor was exported by this process; CUDA imports only into other processes (use the "
                 "memory or event itself here)");
  return {};
}
/// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi prints a UUID, into `text` (41 bytes).
inline void format_uuid(const unsigned char (&uuid)[16], char (&text)[41]) noexcept {
  std::snprintf(text, sizeof text, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", uuid[0],
                uuid[1], uuid[2], uuid[3], uuid[4], uuid[5], uuid[6], uuid[7], uuid[8], uuid[9], uuid[10], uuid[11],
                uuid[12], uuid[13], uuid[14], uuid[15]);
}

/// The UUID of device `id`.
inline status device_uuid(device_id id, unsigned char (&uuid)[16], const char* api) noexcept {
  CUDAMEM_TRY(check_device(id, api));
  cudaDeviceProp properties{};
  CUDAMEM_TRY(check(cudaGetDeviceProperties(&properties, id.get()), api, "cudaGetDeviceProperties"));
  static_assert(sizeof properties.uuid.bytes == 16);
  std::memcpy(uuid, properties.uuid.bytes, 16);
  return {};
}
/// This process's ordinal of the device `d` was exported on, found by its UUID. Errors: invalid_argument when no
/// visible device has it (another machine, or hidden by CUDA_VISIBLE_DEVICES); CUDA's.
inline result<device_id> ipc_device_of(const ipc_descriptor& d, const char* api) noexcept {
  const ipc_fields& f = fields_of(d);
  auto count = device_count();
  if (!count) return count.error().with_api(api);
  for (int ordinal = 0; ordinal < *count; ++ordinal) {
    unsigned char uuid[16];
    CUDAMEM_TRY(device_uuid(device_id(ordinal), uuid, api));
    if (std::memcmp(uuid, f.uuid, 16) == 0) return device_id(ordinal);
  }
  char text[41];
  format_uuid(f.uuid, text);
  return error(errc::invalid_argument, api,
               "exported on device %d (%s) of process %u, which this process does not see (CUDA_VISIBLE_DEVICES?)",
               f.device, text, f.pid);
}
/// A CUDA failure of an import, with a note when the exporting process is gone (its memory may be gone with it).
inline error ipc_import_failure(cudaError_t code, const ipc_descriptor& d, const char* api, const char* call) noexcept {
  (void)detail::check(code, api, call);  // clears a non-sticky error from CUDA's last-error slot
  const unsigned pid = fields_of(d).pid;
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
    char description[160];
    std::snprintf(description, sizeof description, "%s (the exporting process %u has exited)", cudaGetErrorString(code),
                  pid);
    return error(error_domain::cuda, static_cast<int>(code), api, call, cudaGetErrorName(code), description);
  }
  return error(code, api, call);
}
/// The base and size of the allocation holding `address`, memory of device `id` (cuMemGetAddressRange). Errors:
/// not_supported without the driver's entry point; CUDA's (an address no allocation holds).
inline status allocation_range(const void* address, device_id id, void*& base, std::size_t& bytes,
                               const char* api) noexcept {
  const auto range = driver().mem_get_address_range;
  if (range == nullptr) return error(errc::not_supported, api, "the driver has no cuMemGetAddressRange");
  // The driver call needs the device's context current on this thread, which the pool imports do not make it:
  // cudaSetDevice does (CUDA 12 and later initialize the primary context there).
  CUDAMEM_TRY(check(cudaSetDevice(id.get()), api, "cudaSetDevice"));
  unsigned long long first = 0;
  const cudaError_t code = range(&first, &bytes, reinterpret_cast<std::uintptr_t>(address));
  // CUresult's codes are the runtime's for these calls' errors (invalid value, context); a new one still fails.
  if (code != cudaSuccess) return error(code, api, "cuMemGetAddressRange");
  base = reinterpret_cast<void*>(static_cast<std::uintptr_t>(first));
  return {};
}

/// One mapping of imported memory in this process, shared by every ipc_memory imported from the same handle.
struct ipc_mapping {
  unsigned char key[64];  // the handle or export data
  ipc_kind kind;
  int device;
  void* base;
  std::size_t bytes;  // the mapping's size, as the driver reports it
  std::size_t owners;
  void (*release)(void* base, int device) noexcept;  // closes or frees it: a new kind brings its own
};
struct CUDAMEM_DETAIL_PROCESS_WIDE ipc_mapping_table {
  mutex lock;
  vec<ipc_mapping> entries;
};
inline ipc_mapping_table& ipc_mappings() noexcept { return process_wide<ipc_mapping_table>(); }
/// The mapping of `key` on `device`, one more owner of it; the first opens it with `open(base)` (under the table's
/// lock: two threads never open one handle twice) and records `release` to close it when the last owner goes.
template <class Open>
result<ipc_mapping> acquire_ipc_mapping(ipc_kind kind, const unsigned char (&key)[64], device_id device,
                                        void (*release)(void*, int) noexcept, Open&& open, const char* api) noexcept {
  ipc_mapping_table& table = ipc_mappings();
  lock_guard<mutex> hold(table.lock);
  for (ipc_mapping& m : table.entries)
    if (m.kind == kind && m.device == device.get() && std::memcmp(m.key, key, 64) == 0) {
      ++m.owners;
      return m;
    }
  ipc_mapping made{};
  std::memcpy(made.key, key, 64);
  made.kind = kind;
  made.device = device.get();
  made.owners = 1;
  made.release = release;
  CUDAMEM_TRY(open(made.base));
  void* base = nullptr;
  if (auto range = allocation_range(made.base, device, base, made.bytes, api); !range) {
    release(made.base, made.device);
    return range.error();
  }
  table.entries.push_back(made);
  return made;
}
/// One owner less of the mapping at `base`; the last one releases it.
inline void release_ipc_mapping(ipc_kind kind, void* base, int device) noexcept {
  ipc_mapping_table& table = ipc_mappings();
  lock_guard<mutex> hold(table.lock);
  for (ipc_mapping& m : table.entries)
    if (m.kind == kind && m.device == device && m.base == base) {
      if (--m.owners == 0) {
        const ipc_mapping gone = m;
        table.entries.erase(&m);
        gone.release(gone.base, gone.device);
      }
      return;
    }
}
/// How many owners the mapping at `base` has in this process (0: none); for tests and diagnostics.
inline std::size_t ipc_mapping_owners(const void* base) noexcept {
  ipc_mapping_table& table = ipc_mappings();
  lock_guard<mutex> hold(table.lock);
  for (const ipc_mapping& m : table.entries)
    if (m.base == base) return m.owners;
  return 0;
}
// The releases of the two kinds of imported memory, with the device current and in no one's capture.
inline void close_ipc_memory(void* base, int device) noexcept {
  auto guard = device_guard::set(device_id(device));
  if (!guard) return report_release_failure(guard.error().with_api("ipc_memory"));
  relaxed_capture_scope relaxed;
  check_release(cudaIpcCloseMemHandle(base), "cudaIpcCloseMemHandle");
}
// An imported pool pointer is freed in stream order on a stream of its own, and waited for: the exporter's free must
// come after it (CUDA's rule), and no stream of the user's (one may be capturing) gets the library's work. cudaFree
// would do as well, but compute-sanitizer's leak check pairs an imported pointer with cudaFreeAsync only.
inline void free_pool_import(void* base, int device) noexcept {
  auto guard = device_guard::set(device_id(device));
  if (!guard) return report_release_failure(guard.error().with_api("ipc_memory"));
  relaxed_capture_scope relaxed;
  cudaStream_t own = nullptr;
  if (const cudaError_t made = cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking); made != cudaSuccess) {
    check_release(made, "cudaStreamCreateWithFlags");
    return check_release(cudaFree(base), "cudaFree");
  }
  check_release(cudaFreeAsync(base, own), "cudaFreeAsync");
  check_release(cudaStreamSynchronize(own), "cudaStreamSynchronize");
  check_release(cudaStreamDestroy(own), "cudaStreamDestroy");
}
template <class T>
struct ipc_import;  // makes ipc_memory<T>
}  // namespace detail

inline result<ipc_descriptor> ipc_descriptor::from_bytes(const void* bytes, std::size_t bytes_size) noexcept {
  constexpr const char* api = "ipc_descriptor::from_bytes";
  if (bytes == nullptr) return error(errc::invalid_argument, api, "null bytes");
  if (bytes_size != size)
    return error(errc::invalid_argument, api, "%zu bytes; a descriptor is %zu bytes", bytes_size, size);
  ipc_descriptor d;
  std::memcpy(&d.fields_, bytes, size);
  const ipc_kind kind = d.kind();
  CUDAMEM_TRY(detail::check_ipc_descriptor(d, kind, api));  // the kind checks itself: any known one
  return d;
}

/// Device memory another process exported, `size()` elements of T, mapped here; move-only, deep-const. It closes the
/// mapping (cudaIpcCloseMemHandle) or frees the imported pointer (cudaFreeAsync on a stream of its own, waited for:
/// this synchronizes with nothing else) when the last import of the same handle
/// in this process goes, with its device current; failures go to the release handler. The exporter must keep the
/// memory until every importer has let go (docs/ipc.md: the protocol).
template <class T>
class ipc_memory {
  static_assert(std::is_trivially_copyable_v<T>, "cudamem::ipc_memory<T>: T must be trivially copyable");

 public:
  using element_type = T;                    ///< T, with its const.
  using value_type = std::remove_cv_t<T>;    ///< T without const.
  using kind = cudamem::device;                       ///< Device memory.
  static constexpr bool owns_memory = true;  ///< Stream-ordered operations refuse a temporary.
  ipc_memory() noexcept = default;           ///< Owns nothing.
  ipc_memory(ipc_memory&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)),
        size_(std::exchange(other.size_, 0)),
        device_(other.device_),
        base_(std::exchange(other.base_, nullptr)),
        kind_(other.kind_) {}  ///< Takes over `other`'s import, leaving it empty.
  ipc_memory& operator=(ipc_memory&& other) noexcept {
    if (this != &other) {
      reset();
      data_ = std::exchange(other.data_, nullptr), size_ = std::exchange(other.size_, 0);
      device_ = other.device_, base_ = std::exchange(other.base_, nullptr), kind_ = other.kind_;
    }
    return *this;
  }  ///< Lets go of this import, then takes over `other`'s.
  ipc_memory(const ipc_memory&) = delete;
  ipc_memory& operator=(const ipc_memory&) = delete;
  ~ipc_memory() { reset(); }  ///< Lets go (see the class).

  [[nodiscard]] span<T, cudamem::device> view() & noexcept {
    return {data(), size_};
  }  ///< The elements, while it lives.
  [[nodiscard]] span<const T, cudamem::device> view() const& noexcept {
    return {data(), size_};
  }  ///< As view(), const.
  [[nodiscard]] device_ptr<T> data() & noexcept { return {data_, device_}; }  ///< The first element.
  [[nodiscard]] device_ptr<const T> data() const& noexcept { return {data_, device_}; }  ///< As data(), const.
  ///@{
  /// Converts to its view as view() does; not a temporary, whose view would dangle.
  CUDAMEM_DETAIL_OWNER_VIEWS((span<T, cudamem::device>), (span<const T, cudamem::device>));
  ///@}
  [[nodiscard]] std::size_t size() const noexcept { return size_; }  ///< The number of elements exported.
  [[nodiscard]] std::size_t size_bytes() const noexcept { return size_ * sizeof(T); }  ///< size() * sizeof(T).
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }  ///< True when size() is 0.
  [[nodiscard]] bool valid() const noexcept { return base_ != nullptr; }  ///< False when moved from.
  [[nodiscard]] device_id device() const noexcept { return device_; }  ///< This process's ordinal of its device.
  [[nodiscard]] ipc_kind handle_kind() const noexcept { return kind_; }  ///< device_memory or pool_memory.
  /// Lets go now (see the class); empty afterwards.
  void reset() noexcept {
    if (base_ != nullptr) detail::release_ipc_mapping(kind_, base_, device_.get());
    data_ = nullptr, size_ = 0, base_ = nullptr;
  }
  /// Equal when both view the same elements (both empty: equal).
  friend bool operator==(const ipc_memory& a, const ipc_memory& b) noexcept {
    return a.data_ == b.data_ && a.size_ == b.size_ && a.device_ == b.device_;
  }

 private:
  friend struct detail::ipc_import<T>;
  T* data_ = nullptr;
  std::size_t size_ = 0;
  device_id device_{0};
  void* base_ = nullptr;  // the mapping's base, the key of this process's table
  ipc_kind kind_ = ipc_kind::device_memory;
};

namespace detail {
template <class T>
struct ipc_import {
  /// Checks `d` as memory of T of `kind`, finds its device, and maps it (once per process: `open`).
  template <class Open>
  static result<ipc_memory<T>> run(const ipc_descriptor& d, ipc_kind kind, void (*release)(void*, int) noexcept,
                                   Open&& open, const char* api) noexcept {
    CUDAMEM_TRY(check_ipc_descriptor(d, kind, api));
    CUDAMEM_TRY(check_ipc_elements(d, sizeof(T), alignof(T), ipc_type_class<T>(), api));
    CUDAMEM_TRY(refuse_own_descriptor(d, api));
    auto where = ipc_device_of(d, api);
    if (!where) return where.error();
    auto guard = device_guard::set(*where);
    if (!guard) return guard.error().with_api(api);
    const ipc_fields& f = fields_of(d);
    auto mapped = acquire_ipc_mapping(kind, f.handle, *where, release, open, api);
    if (!mapped) return mapped.error();
    ipc_memory<T> made;  // owns the mapping from here: an error below lets go of it
    made.base_ = mapped->base, made.kind_ = kind, made.device_ = *where;
    const std::uint64_t bytes = f.count * sizeof(T);
    if (mapped->bytes < f.offset_bytes + bytes)
      return error(errc::invalid_argument, api,
                   "stale or forged descriptor: the mapped allocation is %zu bytes, the descriptor needs %llu",
                   mapped->bytes, static_cast<unsigned long long>(f.offset_bytes + bytes));
    made.data_ = reinterpret_cast<T*>(static_cast<unsigned char*>(mapped->base) + f.offset_bytes);
    made.size_ = static_cast<std::size_t>(f.count);
    return made;
  }
};
/// The allocation of `view` and the offset of its first element, checked for an export. Errors: invalid_argument
/// (null, or not device memory); out_of_range (the view leaves its allocation); CUDA's.
template <class T>
status export_range(span<T, device> view, void*& base, std::size_t& allocation_bytes, std::size_t& offset,
                    const char* api) noexcept {
  if (view.data().get() == nullptr) return error(errc::invalid_argument, api, "the span is null");
  cudaPointerAttributes attributes{};
  CUDAMEM_TRY(check(cudaPointerGetAttributes(&attributes, view.data().get()), api, "cudaPointerGetAttributes"));
  if (attributes.type != cudaMemoryTypeDevice)
    return error(errc::invalid_argument, api, "the span is not device memory (cudaMemoryType %d)",
                 static_cast<int>(attributes.type));
  if (attributes.device != view.device().get())
    return error(errc::invalid_argument, api, "the span says device %d; its memory is on device %d",
                 view.device().get(), attributes.device);
  CUDAMEM_TRY(allocation_range(view.data().get(), view.device(), base, allocation_bytes, api));
  offset = static_cast<std::size_t>(reinterpret_cast<const unsigned char*>(view.data().get()) -
                                    static_cast<const unsigned char*>(base));
  if (view.size_bytes() > allocation_bytes - offset)
    return error(errc::out_of_range, api, "the span's %zu bytes from offset %zu leave its allocation of %zu bytes",
                 view.size_bytes(), offset, allocation_bytes);
  return {};
}
}  // namespace detail

/// A descriptor of `view`, memory from cudaMalloc (any part of an allocation), for import_ipc<T> in another process.
/// The memory must stay allocated until every importer has let go. Does not synchronize: order the writes before the
/// import with an ipc_event. Errors: invalid_argument (null, not device memory); out_of_range; CUDA's
/// (cudaIpcGetMemHandle refuses memory from cudaMallocAsync and pools: export that from an ipc_pool).
template <class T>
[[nodiscard]] result<ipc_descriptor> export_ipc(span<T, device> view) noexcept {
  constexpr const char* api = "export_ipc";
  auto guard = device_guard::set(view.device());
  if (!guard) return guard.error().with_api(api);
  void* base = nullptr;
  std::size_t allocation_bytes = 0, offset = 0;
  CUDAMEM_TRY(detail::export_range(view, base, allocation_bytes, offset, api));
  cudaIpcMemHandle_t handle{};
  if (const cudaError_t code = cudaIpcGetMemHandle(&handle, base); code != cudaSuccess) {
    (void)detail::check(code, api, "cudaIpcGetMemHandle");
    return error(error_domain::cuda, static_cast<int>(code), api, "cudaIpcGetMemHandle", cudaGetErrorName(code),
                 "not cudaMalloc memory? (memory of a pool is exported by ipc_pool::export_memory)");
  }
  unsigned char uuid[16];
  CUDAMEM_TRY(detail::device_uuid(view.device(), uuid, api));
  return detail::make_ipc_descriptor(ipc_kind::device_memory, detail::ipc_type_class<T>(), sizeof(T), alignof(T),
                                     view.size(), view.device().get(), uuid, &handle, offset, allocation_bytes);
}
/// As export_ipc(span), of an owner's view (a device_buffer from cudaMalloc).
template <viewable V>
  requires std::is_same_v<typename V::kind, device>
[[nodiscard]] auto export_ipc(const V& owner) noexcept {
  return export_ipc(owner.view());
}

/// Maps memory that another process exported with export_ipc, as `count()` elements of T on the same device (found
/// by its UUID). A second import of the same allocation in this process shares the first's mapping. Does not
/// synchronize: wait for the exporter's ipc_event before reading. Errors: invalid_argument (not a descriptor,
/// corrupted, another kind, another element size or class, a device not visible here, exported by this process, a
/// mapping smaller than the descriptor says); CUDA's (a forged or unknown handle; the note says when the exporter has
/// exited).
template <class T>
[[nodiscard]] result<ipc_memory<T>> import_ipc(const ipc_descriptor& d) noexcept {
  constexpr const char* api = "import_ipc";
  return detail::ipc_import<T>::run(
      d, ipc_kind::device_memory, &detail::close_ipc_memory,
      [&d](void*& base) noexcept -> status {
        cudaIpcMemHandle_t handle;
        std::memcpy(&handle, detail::fields_of(d).handle, sizeof handle);
        detail::relaxed_capture_scope relaxed;
        const cudaError_t code = cudaIpcOpenMemHandle(&base, handle, cudaIpcMemLazyEnablePeerAccess);
        if (code != cudaSuccess) return detail::ipc_import_failure(code, d, api, "cudaIpcOpenMemHandle");
        return {};
      },
      api);
}

/// Options for ipc_pool::create.
struct ipc_pool_options {
  /// Bytes the pool keeps reserved when idle instead of giving them back at each synchronization
  /// (cudaMemPoolAttrReleaseThreshold); 0 releases at once.
  std::size_t release_threshold = 0;
};

/// A stream-ordered pool on one device whose memory other processes can import (cudaMemPoolCreate with POSIX file
/// descriptors): a memory resource, so buffers allocate from it (cudaMallocFromPoolAsync, cudaFreeAsync). share()
/// gives the pool's descriptor and file descriptor for another process (send_fd), export_memory() each allocation's.
/// Move-only; buffers from it keep a reference: it must outlive them and not move while they live.
class ipc_pool {
 public:
  using kind = cudamem::device;  ///< The kind it serves.
  /// Creates an exportable pool on `id`. Errors: out_of_range; not_supported (no memory pools, or no POSIX file
  /// descriptor handles on this device); CUDA's.
  [[nodiscard]] static result<ipc_pool> create(device_id id, ipc_pool_options options = {}) noexcept {
    constexpr const char* api = "ipc_pool::create";
    CUDAMEM_TRY(detail::check_device(id, api));
    CUDAMEM_TRY(detail::require_memory_pools(id, api));
    int handle_types = 0;
    CUDAMEM_TRY(
        detail::check(cudaDeviceGetAttribute(&handle_types, cudaDevAttrMemoryPoolSupportedHandleTypes, id.get()), api,
                      "cudaDeviceGetAttribute"));
    if ((handle_types & cudaMemHandleTypePosixFileDescriptor) == 0)
      return error(errc::not_supported, api, "device %d cannot export pools as POSIX file descriptors", id.get());
    cudaMemPoolProps properties{};
    properties.allocType = cudaMemAllocationTypePinned;
    properties.handleTypes = cudaMemHandleTypePosixFileDescriptor;
    properties.location.type = cudaMemLocationTypeDevice;
    properties.location.id = id.get();
    cudaMemPool_t handle = nullptr;
    CUDAMEM_TRY(detail::check(cudaMemPoolCreate(&handle, &properties), api, "cudaMemPoolCreate"));
    ipc_pool made(handle, id);
    std::uint64_t threshold = options.release_threshold;
    CUDAMEM_TRY(detail::check(cudaMemPoolSetAttribute(handle, cudaMemPoolAttrReleaseThreshold, &threshold), api,
                              "cudaMemPoolSetAttribute"));
    return made;
  }
  /// `bytes` from the pool, ordered on `s` (cudaMallocFromPoolAsync; capturable). Errors: as device_pool_resource's.
  [[nodiscard]] result<void*> allocate(stream_ref s, std::size_t bytes, std::size_t alignment) noexcept {
    return detail::allocate_from_pool(pool_.valid() ? pool_.get() : nullptr, s, bytes, alignment, "ipc_pool",
                                      device_.get());
  }
  /// Frees on `s` (cudaFreeAsync); every importer must have let go first. Failures: the release handler.
  void deallocate(stream_ref s, void* p, std::size_t, std::size_t) noexcept {
    detail::check_release(cudaFreeAsync(p, s.get()), "cudaFreeAsync");
  }
  /// A descriptor of `view`, memory allocated from this pool, for imported_pool::import_memory<T> elsewhere. The
  /// allocation must have completed (synchronize its stream, or have the importer wait for an ipc_event) and stay
  /// allocated until every importer has let go. Errors: invalid_argument (null, not device memory, not of this
  /// pool's device); out_of_range; CUDA's (cudaMemPoolExportPointer: not memory of an exportable pool).
  template <class T>
  [[nodiscard]] result<ipc_descriptor> export_memory(span<T, cudamem::device> view) const noexcept {
    constexpr const char* api = "ipc_pool::export_memory";
    if (!pool_.valid()) return detail::handle_moved_from(api, "pool");
    if (view.device() != device_)
      return error(errc::invalid_argument, api, "the span is on device %d; the pool on device %d", view.device().get(),
                   device_.get());
    auto guard = device_guard::set(device_);
    if (!guard) return guard.error().with_api(api);
    void* base = nullptr;
    std::size_t allocation_bytes = 0, offset = 0;
    CUDAMEM_TRY(detail::export_range(view, base, allocation_bytes, offset, api));
    cudaMemPoolPtrExportData data{};
    CUDAMEM_TRY(detail::check(cudaMemPoolExportPointer(&data, base), api, "cudaMemPoolExportPointer"));
    unsigned char uuid[16];
    CUDAMEM_TRY(detail::device_uuid(device_, uuid, api));
    return detail::make_ipc_descriptor(ipc_kind::pool_memory, detail::ipc_type_class<T>(), sizeof(T), alignof(T),
                                       view.size(), device_.get(), uuid, &data, offset, allocation_bytes, id_);
  }
  /// As export_memory(span), of an owner's view (a device_buffer allocated from this pool).
  template <viewable V>
    requires std::is_same_v<typename V::kind, cudamem::device>
  [[nodiscard]] auto export_memory(const V& owner) const noexcept {
    return export_memory(owner.view());
  }
  /// What another process needs to import the pool: a file descriptor (cudaMemPoolExportToShareableHandle) and a
  /// descriptor. Send both at once: send_fd(socket, share->fd.get(), &share->descriptor, ipc_descriptor::size).
  struct shared {
    unique_fd fd;               ///< The pool's file descriptor; close it (let it go) once sent.
    ipc_descriptor descriptor;  ///< Its ipc_kind::pool descriptor.
  };
  /// The pool's file descriptor and descriptor. Errors: invalid_argument (moved from); CUDA's.
  [[nodiscard]] result<shared> share() const noexcept {
    constexpr const char* api = "ipc_pool::share";
    if (!pool_.valid()) return detail::handle_moved_from(api, "pool");
    int fd = -1;
    CUDAMEM_TRY(
        detail::check(cudaMemPoolExportToShareableHandle(&fd, pool_.get(), cudaMemHandleTypePosixFileDescriptor, 0),
                      api, "cudaMemPoolExportToShareableHandle"));
    unique_fd owned(fd);
    unsigned char uuid[16];
    CUDAMEM_TRY(detail::device_uuid(device_, uuid, api));
    return shared{std::move(owned),
                  detail::make_ipc_descriptor(ipc_kind::pool, 0, 0, 1, 0, device_.get(), uuid, nullptr, 0, 0, id_)};
  }
  [[nodiscard]] cudaMemPool_t get() const noexcept { return pool_.get(); }  ///< The pool; null after a move.
  [[nodiscard]] device_id device() const noexcept { return device_; }      ///< Its device.
  [[nodiscard]] std::uint64_t id() const noexcept { return id_; }  ///< The id its descriptors carry, unique.
  [[nodiscard]] bool valid() const noexcept { return pool_.valid(); }  ///< False after a move.
  /// Equal when they are one pool (either frees what the other allocated).
  friend bool operator==(const ipc_pool& a, const ipc_pool& b) noexcept { return a.get() == b.get(); }

 private:
  ipc_pool(cudaMemPool_t handle, device_id id) noexcept
      : pool_(handle),
        device_(id),
        id_(detail::ipc_mix(detail::ipc_process_tag() +
                            detail::process_wide<detail::ipc_process_state>().pools.fetch_add(1) + 1)) {}
  detail::unique_handle<detail::mem_pool_handle> pool_;
  device_id device_;
  std::uint64_t id_;
};
static_assert(memory_resource_for<ipc_pool, device>);

/// Another process's ipc_pool, imported (cudaMemPoolImportFromShareableHandle): it imports that pool's allocations.
/// Move-only; destroying it while imports live is safe (CUDA keeps the memory until they are freed).
class imported_pool {
 public:
  imported_pool() noexcept = default;  ///< Holds no pool (a place to move one into).
  /// Imports the pool `pool_descriptor` (ipc_kind::pool) describes from `fd`, the file descriptor that came with it
  /// (it stays the caller's: close it after). Errors: invalid_argument (as import_ipc's, and a negative fd); CUDA's
  /// (an fd that is no pool's).
  [[nodiscard]] static result<imported_pool> import(const ipc_descriptor& pool_descriptor, int fd) noexcept {
    constexpr const char* api = "imported_pool::import";
    CUDAMEM_TRY(detail::check_ipc_descriptor(pool_descriptor, ipc_kind::pool, api));
    CUDAMEM_TRY(detail::refuse_own_descriptor(pool_descriptor, api));
    if (fd < 0) return error(errc::invalid_argument, api, "%d is not a file descriptor", fd);
    auto where = detail::ipc_device_of(pool_descriptor, api);
    if (!where) return where.error();
    auto guard = device_guard::set(*where);
    if (!guard) return guard.error().with_api(api);
    cudaMemPool_t handle = nullptr;
    const cudaError_t code = cudaMemPoolImportFromShareableHandle(
        &handle, reinterpret_cast<void*>(static_cast<std::intptr_t>(fd)), cudaMemHandleTypePosixFileDescriptor, 0);
    if (code != cudaSuccess)
      return detail::ipc_import_failure(code, pool_descriptor, api, "cudaMemPoolImportFromShareableHandle");
    return imported_pool(handle, *where, detail::fields_of(pool_descriptor).pool_id);
  }
  /// Maps an allocation of this pool that the exporter described with ipc_pool::export_memory, as import_ipc does
  /// (cudaMemPoolImportPointer; let go: cudaFreeAsync, waited for). Errors: as import_ipc's; invalid_argument (another
  /// pool's).
  template <class T>
  [[nodiscard]] result<ipc_memory<T>> import_memory(const ipc_descriptor& d) const noexcept {
    constexpr const char* api = "imported_pool::import_memory";
    if (!pool_.valid()) return detail::handle_moved_from(api, "pool");
    CUDAMEM_TRY(detail::check_ipc_descriptor(d, ipc_kind::pool_memory, api));
    if (detail::fields_of(d).pool_id != id_)
      return error(errc::invalid_argument, api, "the memory belongs to pool %016llx; this is pool %016llx",
                   static_cast<unsigned long long>(detail::fields_of(d).pool_id), static_cast<unsigned long long>(id_));
    cudaMemPool_t pool = pool_.get();
    return detail::ipc_import<T>::run(
        d, ipc_kind::pool_memory, &detail::free_pool_import,
        [&d, pool](void*& base) noexcept -> status {
          cudaMemPoolPtrExportData data;
          std::memcpy(&data, detail::fields_of(d).handle, sizeof data);
          detail::relaxed_capture_scope relaxed;
          const cudaError_t code = cudaMemPoolImportPointer(&base, pool, &data);
          if (code != cudaSuccess) return detail::ipc_import_failure(code, d, api, "cudaMemPoolImportPointer");
          return {};
        },
        api);
  }
  [[nodiscard]] cudaMemPool_t get() const noexcept { return pool_.get(); }  ///< The imported pool; null after a move.
  [[nodiscard]] device_id device() const noexcept { return device_; }  ///< This process's ordinal of its device.
  [[nodiscard]] std::uint64_t id() const noexcept { return id_; }  ///< The exporter's ipc_pool::id().
  [[nodiscard]] bool valid() const noexcept { return pool_.valid(); }  ///< False after a move.
  /// Equal when they hold the same imported pool.
  friend bool operator==(const imported_pool& a, const imported_pool& b) noexcept { return a.get() == b.get(); }

 private:
  imported_pool(cudaMemPool_t handle, device_id id, std::uint64_t pool_id) noexcept
      : pool_(handle), device_(id), id_(pool_id) {}
  detail::unique_handle<detail::mem_pool_handle> pool_;
  device_id device_{0};
  std::uint64_t id_ = 0;
};

/// An event shared between processes (cudaEventInterprocess | cudaEventDisableTiming): one process records it after
/// its writes, the other's stream waits for it (stream_ref::wait takes its ref()). A wait sees the last record made
/// before it was enqueued: tell the other process "recorded" (a byte on the socket) before it waits. Move-only;
/// destroyed with cudaEventDestroy (an opened one as well); converts to event_ref as event does.
class ipc_event {
 public:
  /// Creates an interprocess event on `id`; the current device stays. Errors: out_of_range; CUDA's.
  [[nodiscard]] static result<ipc_event> create(device_id id) noexcept {
    constexpr const char* api = "ipc_event::create";
    auto guard = device_guard::set(id);
    if (!guard) return guard.error().with_api(api);
    cudaEvent_t handle = nullptr;
    CUDAMEM_TRY(detail::check(cudaEventCreateWithFlags(&handle, cudaEventInterprocess | cudaEventDisableTiming), api,
                              "cudaEventCreateWithFlags"));
    return ipc_event(handle, id);
  }
  /// As create(device_id), on the current device.
  [[nodiscard]] static result<ipc_event> create() noexcept {
    auto id = current_device();
    return id ? create(*id) : id.error().with_api("ipc_event::create");
  }
  /// The event's descriptor, for ipc_event::open in another process. Errors: invalid_argument (moved from, or an
  /// opened event: export the original); CUDA's.
  [[nodiscard]] result<ipc_descriptor> export_handle() const noexcept {
    constexpr const char* api = "ipc_event::export_handle";
    if (!valid()) return detail::handle_moved_from(api, "event");
    cudaIpcEventHandle_t handle{};
    CUDAMEM_TRY(detail::check(cudaIpcGetEventHandle(&handle, handle_.get()), api, "cudaIpcGetEventHandle"));
    unsigned char uuid[16];
    CUDAMEM_TRY(detail::device_uuid(device_, uuid, api));
    return detail::make_ipc_descriptor(ipc_kind::event, 0, 0, 1, 0, device_.get(), uuid, &handle);
  }
  /// Opens the event another process exported (cudaIpcOpenEventHandle), on its device as this process numbers it.
  /// Each open is its own handle. Errors: invalid_argument (as import_ipc's); CUDA's.
  [[nodiscard]] static result<ipc_event> open(const ipc_descriptor& d) noexcept {
    constexpr const char* api = "ipc_event::open";
    CUDAMEM_TRY(detail::check_ipc_descriptor(d, ipc_kind::event, api));
    CUDAMEM_TRY(detail::refuse_own_descriptor(d, api));
    auto where = detail::ipc_device_of(d, api);
    if (!where) return where.error();
    auto guard = device_guard::set(*where);
    if (!guard) return guard.error().with_api(api);
    cudaIpcEventHandle_t handle;
    std::memcpy(&handle, detail::fields_of(d).handle, sizeof handle);
    cudaEvent_t opened = nullptr;
    const cudaError_t code = cudaIpcOpenEventHandle(&opened, handle);
    if (code != cudaSuccess) return detail::ipc_import_failure(code, d, api, "cudaIpcOpenEventHandle");
    return ipc_event(opened, *where);
  }
  [[nodiscard]] event_ref ref() const& noexcept { return event_ref::from_native_handle(handle_.get()); }  ///< Ref.
  event_ref ref() const&& = delete;  ///< Refused: it would dangle once the statement ends.
  operator event_ref() const& noexcept { return ref(); }  ///< As ref().
  operator event_ref() const&& = delete;  ///< Refused, as ref() of a temporary.
  [[nodiscard]] cudaEvent_t get() const noexcept { return handle_.get(); }  ///< The raw handle; null after a move.
  [[nodiscard]] device_id device() const noexcept { return device_; }  ///< Its device, in this process.
  [[nodiscard]] bool valid() const noexcept { return handle_.valid(); }  ///< False after a move.
  [[nodiscard]] status record(stream_ref s) const noexcept { return ref().record(s); }  ///< As event_ref's.
  [[nodiscard]] status synchronize() const noexcept { return ref().synchronize(); }  ///< As event_ref's: blocks.
  [[nodiscard]] result<bool> ready() const noexcept { return ref().ready(); }  ///< As event_ref's.
  /// Equal when they hold the same handle.
  friend bool operator==(const ipc_event& a, const ipc_event& b) noexcept { return a.get() == b.get(); }

 private:
  ipc_event(cudaEvent_t handle, device_id id) noexcept : handle_(handle), device_(id) {}
  detail::unique_handle<detail::event_handle> handle_;
  device_id device_;
};

}  // namespace cudamem
