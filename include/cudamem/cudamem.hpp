// SPDX-License-Identifier: MIT
/// \file
/// The umbrella header: every public header but those in interop/ and the opt-in ones, which a file that uses them
/// includes itself, so that the others do not pay their compile time (docs/decisions.md): copy_many.hpp (batched
/// copies: `<ranges>` and `<algorithm>`), statistics.hpp (the ledger: half the umbrella's own cost again),
/// trace.hpp (file output), growable.hpp, managed.hpp, location.hpp, host_pool.hpp, ipc.hpp, fd_passing.hpp,
/// unique_fd.hpp.
///
///     error, kind, device, stream, ptr, span, pitched_span       errors; kinds; devices; streams; views
///     resource, buffer, pitched, host_register, registry, pool   where memory comes from, and its owners
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
#include <cudamem/stream.hpp>
