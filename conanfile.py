# SPDX-License-Identifier: MIT
"""Conan 2 recipe of cudamem (header-only). The package holds the headers and cudamem's own CMake
package files, so consumers write find_package(cudamem) and link cudamem::cudamem exactly as with
an installed cudamem; the CUDA toolkit comes from the system (CUDACXX, nvcc on PATH, or
/usr/local/cuda), as CUDA does not come from Conan Center.

    conan profile detect                              # once, if there is no default profile yet
    conan create .                                    # into the local cache, no network needed
    conan install --requires=cudamem/0.1.0 -g CMakeToolchain

find_package(cudamem COMPONENTS nccl) also gives the cudamem::nccl target. With compiler.cppstd=20
on CMake 3.25.0/3.25.1, see the README for the nvcc flag the toolchain needs.
"""
import os
import re

from conan import ConanFile
from conan.tools.files import copy, load


class CudamemConan(ConanFile):
    name = "cudamem"
    description = "Typed, kind-checked CUDA memory for C++20: pointers, spans, buffers, copies, streams"
    license = "MIT"
    topics = ("cuda", "gpu", "memory", "header-only")
    package_type = "header-library"
    no_copy_source = True
    exports_sources = ("CMakeLists.txt", "LICENSE", "cmake/*", "include/*")

    def set_version(self):
        text = load(self, os.path.join(self.recipe_folder, "include", "cudamem", "version.hpp"))
        parts = dict(re.findall(r"#define CUDAMEM_VERSION_(MAJOR|MINOR|PATCH) (\d+)", text))
        self.version = f"{parts['MAJOR']}.{parts['MINOR']}.{parts['PATCH']}"

    def package_id(self):
        self.info.clear()

    def package(self):
        # cudamem's own install: headers, cudamemConfig.cmake and friends, cudamem.pc.
        build = os.path.join(self.build_folder, "cudamem-install-build")
        options = " ".join(f"-D{name}=OFF" for name in
                           ("CUDAMEM_BUILD_TESTS", "CUDAMEM_BUILD_EXAMPLES", "CUDAMEM_BUILD_BENCH",
                            "CUDAMEM_BUILD_DOCS"))
        self.run(f'cmake -S "{self.source_folder}" -B "{build}" {options} '
                 f'-DCMAKE_INSTALL_PREFIX="{self.package_folder}" -DCMAKE_INSTALL_LIBDIR=lib')
        self.run(f'cmake --install "{build}"')
        copy(self, "LICENSE", self.source_folder, os.path.join(self.package_folder, "licenses"))

    def package_info(self):
        # Consumers use the package's own cudamemConfig.cmake (it finds the CUDA toolkit and adds
        # its CCCL directory), found through builddirs.
        self.cpp_info.set_property("cmake_find_mode", "none")
        self.cpp_info.builddirs = [os.path.join("lib", "cmake", "cudamem")]
        self.cpp_info.bindirs = []
        self.cpp_info.libdirs = []
        self.cpp_info.set_property("pkg_config_name", "cudamem")
