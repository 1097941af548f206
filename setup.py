"""Builds the compiled kernels of animator (animator/_*.pyx: frames, mesh steps, ARAP steps,
frame scans); everything else about the package is in pyproject.toml.

    pip install .                                   # a wheel: Cython compiles, the C compiler builds
    pip install -e . --no-build-isolation           # in place, as scripts/bootstrap.sh does
    python setup.py build_ext --inplace             # in place only (animator/_*.so)

``-ffp-contract=off``: no fused multiply-add, so every float operation rounds as the kernel's
docstring defines it and frames are the same on every machine (FMA is the default on aarch64).
"""
from pathlib import Path

from Cython.Build import cythonize
from setuptools import Extension, setup

KERNELS = [Extension(f"animator.{path.stem}", [str(path)], extra_compile_args=["-O3", "-ffp-contract=off"])
           for path in sorted(Path("animator").glob("_*.pyx"))]

setup(ext_modules=cythonize(KERNELS, compiler_directives={"language_level": 3}, quiet=True))
