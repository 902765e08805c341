# SPDX-License-Identifier: MIT
# The GPU architectures of cudamem's own examples, tests and benchmarks (not of projects that use
# cudamem: those choose their own CMAKE_CUDA_ARCHITECTURES). Included before enable_language(CUDA).
#
#  - CMAKE_CUDA_ARCHITECTURES (-D, or the CUDAARCHS environment variable) given: used for everything.
#  - Otherwise, when nvidia-smi reports GPUs: exactly their architectures (what `native` means), so
#    the examples and tests run on the GPUs of this machine and compile once per architecture.
#  - Otherwise (a build machine without a GPU): one architecture, PTX for Turing (75-virtual), for
#    the examples and the tests alike: one cheap compile per file (no ptxas), and the driver
#    compiles the PTX at load time for any GPU CUDA 13 supports (Blackwell included).
# Sets CUDAMEM_EXAMPLE_ARCHITECTURES (examples, benchmarks) and CMAKE_CUDA_ARCHITECTURES (the rest).
set(CUDAMEM_DEFAULT_EXAMPLE_ARCHITECTURES "75-virtual")
set(CUDAMEM_DEFAULT_TEST_ARCHITECTURES "75-virtual")

if(DEFINED CMAKE_CUDA_ARCHITECTURES OR DEFINED ENV{CUDAARCHS})
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES "$ENV{CUDAARCHS}")
  endif()
  set(CUDAMEM_EXAMPLE_ARCHITECTURES "${CMAKE_CUDA_ARCHITECTURES}")
  set(_cudamem_arch_origin "as given")
else()
  set(_cudamem_gpu_archs "")
  find_program(CUDAMEM_NVIDIA_SMI nvidia-smi)
  mark_as_advanced(CUDAMEM_NVIDIA_SMI)
  if(CUDAMEM_NVIDIA_SMI)
    execute_process(COMMAND "${CUDAMEM_NVIDIA_SMI}" --query-gpu=compute_cap --format=csv,noheader
                    OUTPUT_VARIABLE _cudamem_caps RESULT_VARIABLE _cudamem_smi_rc ERROR_QUIET TIMEOUT 30)
    if(_cudamem_smi_rc EQUAL 0)
      string(REGEX MATCHALL "[0-9]+\\.[0-9]+" _cudamem_caps "${_cudamem_caps}")
      foreach(_cap IN LISTS _cudamem_caps)
        string(REPLACE "." "" _cap "${_cap}")
        list(APPEND _cudamem_gpu_archs "${_cap}")
      endforeach()
      list(REMOVE_DUPLICATES _cudamem_gpu_archs)
    endif()
  endif()
  if(_cudamem_gpu_archs)
    set(CMAKE_CUDA_ARCHITECTURES "${_cudamem_gpu_archs}")
    set(CUDAMEM_EXAMPLE_ARCHITECTURES "${_cudamem_gpu_archs}")
    set(_cudamem_arch_origin "the GPUs of this machine")
  else()
    set(CMAKE_CUDA_ARCHITECTURES "${CUDAMEM_DEFAULT_TEST_ARCHITECTURES}")
    set(CUDAMEM_EXAMPLE_ARCHITECTURES "${CUDAMEM_DEFAULT_EXAMPLE_ARCHITECTURES}")
    set(_cudamem_arch_origin "no GPU found: portable defaults")
  endif()
endif()
message(STATUS "cudamem: CUDA architectures (${_cudamem_arch_origin}): examples ${CUDAMEM_EXAMPLE_ARCHITECTURES}, "
               "tests ${CMAKE_CUDA_ARCHITECTURES}; set CMAKE_CUDA_ARCHITECTURES to choose")
