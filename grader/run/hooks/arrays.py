"""NumPy arrays: the call receives NumPy copies of its tensors and must return floating-point NumPy arrays, which
come back as tensors. Options: True."""
from __future__ import annotations

import torch

from . import Hook, register


class Arrays(Hook):
    name = "arrays"
    noun = "NumPy array"

    def prepare(self, options, value):
        return value.detach().cpu().numpy().copy() if isinstance(value, torch.Tensor) else value

    def convert(self, options, value, label):
        import numpy as np

        if not isinstance(value, np.ndarray):
            raise ValueError(f"returned {_kind(value)} where a numpy.ndarray was expected")
        if value.dtype.kind != "f" or value.dtype.itemsize not in (2, 4, 8):
            raise ValueError(f"returned {label} as an array of dtype {value.dtype.name} where a floating-point array "
                             "(float16, float32 or float64: the inputs' dtype) was expected")
        return torch.from_numpy(np.array(value))


def _kind(v) -> str:
    return f"a {type(v).__module__}.{type(v).__qualname__}".replace("builtins.", "")


register(Arrays())
