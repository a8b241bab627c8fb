"""Builds grammarc's compiled core (grammarc._core, C++ via pybind11); the rest of the
package metadata lives in pyproject.toml."""

from glob import glob

from pybind11.setup_helpers import ParallelCompile, Pybind11Extension, build_ext
from setuptools import setup

ParallelCompile("GRAMMARC_BUILD_JOBS", default=0).install()  # one compiler per core

setup(
    ext_modules=[Pybind11Extension("grammarc._core", sorted(glob("csrc/*.cpp")), cxx_std=17,
                                   extra_compile_args=["-O3"],
                                   depends=sorted(glob("csrc/*.hpp")))],  # rebuilt on edits
    cmdclass={"build_ext": build_ext},
)
