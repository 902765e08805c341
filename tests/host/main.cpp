// SPDX-License-Identifier: MIT
// Test runner for the host tests (Catch2 2 and 3 alike: CATCH_CONFIG_RUNNER is ignored by 3).
#define CATCH_CONFIG_RUNNER
#include "catch.hpp"

int main(int argc, char* argv[]) { return Catch::Session().run(argc, argv); }
