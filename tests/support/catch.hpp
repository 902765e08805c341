// SPDX-License-Identifier: MIT
// The tests build against Catch2 3 where the system has it (Ubuntu 24.04, Debian 13) and against
// Catch2 2.13 where that is what it ships (Debian 12). Test sources include this header only.
// With Catch2 3 it includes just the parts the tests use: catch_all.hpp takes nvcc's front end
// minutes per file.
#pragma once

#if defined(CUDAMEM_CATCH2_V3)
#include <catch2/catch_session.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#else
#include <catch2/catch.hpp>
#endif
