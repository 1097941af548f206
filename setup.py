"""Builds the compiled frame kernel of animator (animator/_raster.pyx); everything else about the
package is in pyproject.toml.

    pip install .                                   # a wheel: Cython compiles, the C compiler builds
    pip install -e . --no-build-isolation           # in place, as scripts/bootstrap.sh does
    python setup.py build_ext --inplace             # in place only (animator/_raster.*.so)

``-ffp-contract=off``: no fused multiply-add, so every float operation rounds as the kernel's
docstring defines it and frames are the same on every machine (FMA is the default on aarch64).
"""
from Cython.Build import cythonize
from setuptools import Extension, setup

KERNEL = Extension("animator._raster", ["animator/_raster.pyx"],
                   extra_compile_args=["-O3", "-ffp-contract=off"])

setup(ext_modules=cythonize([KERNEL], compiler_directives={"language_level": 3}, quiet=True))
