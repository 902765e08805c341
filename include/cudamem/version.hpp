// SPDX-License-Identifier: MIT
/// \file
/// cudamem's version, as macros (usable in `#if`). Included by every cudamem header; needs no
/// CUDA and no C++20. CMake, Conan and the single-header generator read the version from here.
#pragma once

/// The major version: incremented by changes that break source compatibility.
#define CUDAMEM_VERSION_MAJOR 0
/// The minor version: incremented by additions (in 0.x, also by breaking changes).
#define CUDAMEM_VERSION_MINOR 1
/// The patch version: incremented by fixes.
#define CUDAMEM_VERSION_PATCH 0
/// The version as one number, MAJOR * 10000 + MINOR * 100 + PATCH (0.1.0 is 100), for `#if` comparisons.
#define CUDAMEM_VERSION (CUDAMEM_VERSION_MAJOR * 10000 + CUDAMEM_VERSION_MINOR * 100 + CUDAMEM_VERSION_PATCH)
