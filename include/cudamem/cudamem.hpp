// SPDX-License-Identifier: MIT
/// \file
/// The umbrella header: every public header but those in interop/, trace.hpp (file output: include it where you record
/// a trace) and copy_many.hpp (batched copies), which a file
/// that makes batched copies includes itself: it needs `<ranges>` and `<algorithm>`, which would cost every other file
/// that includes the umbrella about two seconds of compile time (docs/decisions.md).
///
///     error, kind, device, stream, ptr, span, pitched_span       errors; kinds; devices; streams; views
///     resource, buffer, pitched, host_register, registry, pool   where memory comes from, and its owners
///     statistics                                                 the ledger: usage per device, stream, source
///     copy, peer                                                 copies and fills; peer access
#pragma once

#include <cudamem/version.hpp>

/// \namespace cudamem
/// Typed, kind-checked CUDA memory. Everything public lives here; `cudamem::detail` is internal.

#include <cudamem/buffer.hpp>
#include <cudamem/copy.hpp>
#include <cudamem/device.hpp>
#include <cudamem/error.hpp>
#include <cudamem/host_register.hpp>
#include <cudamem/kind.hpp>
#include <cudamem/peer.hpp>
#include <cudamem/pitched.hpp>
#include <cudamem/pitched_span.hpp>
#include <cudamem/pool.hpp>
#include <cudamem/ptr.hpp>
#include <cudamem/registry.hpp>
#include <cudamem/resource.hpp>
#include <cudamem/span.hpp>
#include <cudamem/statistics.hpp>
#include <cudamem/stream.hpp>
