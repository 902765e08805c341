# SPDX-License-Identifier: MIT
# NCCL, for include/cudamem/interop/nccl.hpp (the rest of cudamem never needs it). Looked for next to
# the CUDA toolkit (CUDAToolkit_INCLUDE_DIRS and CUDAToolkit_LIBRARY_DIR: where the toolkit's own
# installer and NVIDIA's packages put it), in NCCL_ROOT or NCCL_HOME, and in the system's
# directories. When found: the imported target cudamem::nccl (nccl.h and libnccl; also named
# cudamem_nccl in cudamem's own build) and CUDAMEM_NCCL_FOUND set to TRUE; else CUDAMEM_NCCL_FOUND
# is FALSE. Needs CUDAToolkit found first. Included by the top-level CMakeLists.txt and, for
# find_package(cudamem COMPONENTS nccl), by the installed cudamemConfig.cmake. Safe to include from
# several directories.
if(NOT TARGET cudamem_nccl)
  find_path(CUDAMEM_NCCL_INCLUDE_DIR nccl.h
    HINTS ENV NCCL_ROOT ENV NCCL_HOME ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include)
  find_library(CUDAMEM_NCCL_LIBRARY nccl
    HINTS ENV NCCL_ROOT ENV NCCL_HOME ${CUDAToolkit_LIBRARY_DIR} PATH_SUFFIXES lib lib64)
  if(CUDAMEM_NCCL_INCLUDE_DIR AND CUDAMEM_NCCL_LIBRARY)
    add_library(cudamem_nccl INTERFACE IMPORTED GLOBAL)
    target_include_directories(cudamem_nccl INTERFACE "${CUDAMEM_NCCL_INCLUDE_DIR}")
    target_link_libraries(cudamem_nccl INTERFACE "${CUDAMEM_NCCL_LIBRARY}")
    add_library(cudamem::nccl ALIAS cudamem_nccl)
    message(STATUS "cudamem: NCCL: ${CUDAMEM_NCCL_LIBRARY}")
  elseif(CUDAMEM_BUILD_TESTS OR CUDAMEM_BUILD_EXAMPLES OR CUDAMEM_BUILD_BENCH)
    message(STATUS "cudamem: NCCL not found (set NCCL_ROOT): the NCCL example, tests and benchmark rows are skipped")
  else()
    message(STATUS "cudamem: NCCL not found (set NCCL_ROOT): no cudamem::nccl target")
  endif()
endif()
if(TARGET cudamem_nccl)
  set(CUDAMEM_NCCL_FOUND TRUE)
else()
  set(CUDAMEM_NCCL_FOUND FALSE)
endif()
