"""``ToPILImage`` for the CPU torchvision shim (see models/torchvision-shim/README.md)."""
from __future__ import annotations

from typing import Any

import numpy as np
from PIL import Image

__all__ = ["ToPILImage"]


class ToPILImage:
    """Convert a tensor (C, H, W) or an ndarray (H, W, C) / (H, W) to a ``PIL.Image``.

    Float inputs are taken to be in [0, 1] and scaled to uint8, as torchvision does.
    ``mode`` is passed to ``Image.fromarray``; ``None`` lets PIL infer it from the channel count.
    """

    def __init__(self, mode: str | None = None) -> None:
        self.mode = mode

    def __call__(self, pic: Any) -> Image.Image:
        if hasattr(pic, "detach"):  # torch.Tensor, CHW
            arr = pic.detach().cpu().numpy()
            if arr.ndim == 3:
                arr = np.transpose(arr, (1, 2, 0))
        else:
            arr = np.asarray(pic)
        if arr.ndim not in (2, 3):
            raise ValueError(f"pic should be 2 or 3 dimensional, got {arr.ndim} dimensions")
        if arr.ndim == 3 and arr.shape[2] == 1:
            arr = arr[:, :, 0]
        if np.issubdtype(arr.dtype, np.floating):
            arr = np.clip(arr * 255.0, 0, 255).astype(np.uint8)
        if self.mode is None:
            return Image.fromarray(arr)
        return Image.fromarray(arr).convert(self.mode)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(mode={self.mode!r})"


def __getattr__(name: str):
    raise AttributeError(
        f"torchvision.transforms.{name} is not available in doodlepod's CPU torchvision shim "
        "(models/torchvision-shim), which only provides ToPILImage"
    )
