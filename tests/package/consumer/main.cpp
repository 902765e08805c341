// SPDX-License-Identifier: MIT
// The program of the g++ consumers: host checks always, a device round trip when a device exists.
// Exits 0 when there is no device: these consumers check building and packaging, not a GPU.
#include "consumer_checks.hpp"

int main() {
  if (!consumer::host_checks()) return 1;
  if (!consumer::device_present()) {
    std::printf(PACKAGE_CONSUMER ": host checks passed (cudamem %d.%d.%d)\n", CUDAMEM_VERSION_MAJOR,
                CUDAMEM_VERSION_MINOR, CUDAMEM_VERSION_PATCH);
    return 0;
  }
  if (!consumer::device_round_trip()) return 1;
  std::printf(PACKAGE_CONSUMER ": host checks and device round trip passed (cudamem %d.%d.%d)\n", CUDAMEM_VERSION_MAJOR,
              CUDAMEM_VERSION_MINOR, CUDAMEM_VERSION_PATCH);
  return 0;
}
