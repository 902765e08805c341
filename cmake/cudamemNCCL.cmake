# SPDX-License-Identifier: MIT
# NCCL for cudamem's own NCCL example, tests and benchmark rows (cudamem itself never needs it; only
# include/cudamem/interop/nccl.hpp does). Looked for next to the CUDA toolkit, in NCCL_ROOT or
# NCCL_HOME, and in the system's directories. When found: the imported target cudamem_nccl (nccl.h
# and libnccl) and CUDAMEM_NCCL_FOUND set to TRUE; else CUDAMEM_NCCL_FOUND is FALSE and the NCCL
# programs are not built (their tests report skipped). Safe to include from several directories.
if(NOT TARGET cudamem_nccl)
  find_path(CUDAMEM_NCCL_INCLUDE_DIR nccl.h
    HINTS ENV NCCL_ROOT ENV NCCL_HOME ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include)
  find_library(CUDAMEM_NCCL_LIBRARY nccl
    HINTS ENV NCCL_ROOT ENV NCCL_HOME ${CUDAToolkit_LIBRARY_DIR} PATH_SUFFIXES lib lib64)
  if(CUDAMEM_NCCL_INCLUDE_DIR AND CUDAMEM_NCCL_LIBRARY)
    add_library(cudamem_nccl INTERFACE IMPORTED GLOBAL)
    target_include_directories(cudamem_nccl INTERFACE "${CUDAMEM_NCCL_INCLUDE_DIR}")
    target_link_libraries(cudamem_nccl INTERFACE "${CUDAMEM_NCCL_LIBRARY}")
    message(STATUS "cudamem: NCCL: ${CUDAMEM_NCCL_LIBRARY}")
  else()
    message(STATUS "cudamem: NCCL not found (set NCCL_ROOT): the NCCL example, tests and benchmark rows are skipped")
  endif()
endif()
if(TARGET cudamem_nccl)
  set(CUDAMEM_NCCL_FOUND TRUE)
else()
  set(CUDAMEM_NCCL_FOUND FALSE)
endif()
