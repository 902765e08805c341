// The tests build against Catch2 3 where the system has it (Ubuntu 24.04, Debian 13) and against
// Catch2 2.13 where that is what it ships (Debian 12). Test sources include this header only.
#pragma once

#if defined(CUDAMEM_CATCH2_V3)
#include <catch2/catch_all.hpp>
#else
#include <catch2/catch.hpp>
#endif
