# SPDX-License-Identifier: MIT
# C++20 for nvcc, in two parts. Included by the top-level CMakeLists.txt (cudamem's own build, and
# add_subdirectory/FetchContent) and by the installed cudamemConfig.cmake (find_package, Conan), so
# both run with the CMake of the consuming project.
#
# 1. CMake learned nvcc's C++20 flag in 3.25.2. On 3.25.0/3.25.1 a target whose CUDA standard is 20
#    (CUDA_STANDARD 20, or no CUDA_STANDARD and CXX_STANDARD 20, which CMake carries over to CUDA)
#    gets no flag at all, and with CMAKE_CXX_STANDARD_REQUIRED ON (what Conan's toolchain and many
#    projects set) configuring stops: 'Target "app" requires the language dialect "CUDA20"'. So
#    this file supplies the flag CMake lacks, as a cache variable: it reaches every directory of the
#    consuming project, whether enable_language(CUDA) ran before find_package or after.
if(CMAKE_VERSION VERSION_LESS 3.25.2 AND "${CMAKE_CUDA20_STANDARD_COMPILE_OPTION}" STREQUAL "")
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20" CACHE INTERNAL "nvcc's C++20 flag (CMake < 3.25.2 lacks it; set by cudamem)")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20" CACHE INTERNAL "nvcc's C++20 flag (CMake < 3.25.2 lacks it; set by cudamem)")
endif()

# 2. cudamem_require_cuda20(<target>): gives the .cu files of every consumer of <target> C++20, so
# that target_link_libraries(app PRIVATE cudamem::cudamem) is all a CUDA consumer writes. Not
# target_compile_features(cuda_std_20): on 3.25.0/3.25.1 that feature is an error. The target adds
# -std=c++20 to CUDA sources itself when the consuming target sets no CUDA_STANDARD and its
# CXX_STANDARD, which CMake carries over to CUDA, is not 20 or later: with neither, CMake adds no
# -std flag for nvcc (which compiles C++17); with CXX_STANDARD 17 (Conan's default profile, gnu17)
# CMake adds -std=c++17 and cudamem's -std=c++20 comes after it. A consumer that sets
# CUDA_STANDARD 17 explicitly keeps it (and gets cudamem's "needs C++20").
function(cudamem_require_cuda20 target)
  cmake_parse_arguments(PARSE_ARGV 1 _arg "BUILD_INTERFACE" "" "")
  get_target_property(_options ${target} INTERFACE_COMPILE_OPTIONS)
  if(_options AND "${_options}" MATCHES "cudamem-cuda20")
    return()  # already added (the build-tree package re-reads the target it exported)
  endif()
  set(_cxx "$<TARGET_PROPERTY:CXX_STANDARD>")
  set(_cxx20 "$<OR:$<STREQUAL:${_cxx},20>,$<STREQUAL:${_cxx},23>,$<STREQUAL:${_cxx},26>>")
  set(_when "$<AND:$<STREQUAL:$<TARGET_PROPERTY:CUDA_STANDARD>,>,$<NOT:${_cxx20}>>")
  # The empty $<0:cudamem-cuda20> marks the option as ours without changing the command line.
  set(_option "$<$<AND:$<COMPILE_LANGUAGE:CUDA>,${_when}>:-std=c++20>$<0:cudamem-cuda20>")
  if(_arg_BUILD_INTERFACE)
    set(_option "$<BUILD_INTERFACE:${_option}>")
  endif()
  set_property(TARGET ${target} APPEND PROPERTY INTERFACE_COMPILE_OPTIONS "${_option}")
endfunction()
