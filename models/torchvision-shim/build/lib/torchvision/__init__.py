"""CPU-test stand-in for torchvision (see models/torchvision-shim/README.md).

Only ``torchvision.transforms.ToPILImage`` is provided; every other attribute raises an error that
names this shim, so nothing silently depends on a torchvision that is not there.
"""
from __future__ import annotations

__version__ = "0.0.0+doodlepod.cpushim"
IS_DOODLEPOD_SHIM = True

from . import transforms  # noqa: E402  (re-exported like the real package does)

__all__ = ["transforms", "__version__", "IS_DOODLEPOD_SHIM"]


def __getattr__(name: str):
    raise AttributeError(
        f"torchvision.{name} is not available: this venv has doodlepod's CPU torchvision shim "
        "(models/torchvision-shim), which only provides transforms.ToPILImage"
    )
