"""Messages between the grader and its workers.

Tensors travel as (dtype name, shape, raw bytes) and everything else as plain Python
data, pickled; the loader's Unpickler resolves no class or function at all, so a
worker can send back nothing that runs code or pretends to be a tensor.
"""
import io
import pickle

import torch

TENSOR = "__attnkit_tensor__"


def _pack(obj):
    if isinstance(obj, torch.Tensor):
        t = obj.detach().cpu().contiguous()
        raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        return {TENSOR: str(t.dtype).removeprefix("torch."), "shape": list(t.shape), "data": raw}
    if isinstance(obj, dict):
        return {k: _pack(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_pack(v) for v in obj]
    return obj


def _unpack(obj):
    if isinstance(obj, dict):
        if TENSOR in obj:
            dtype = getattr(torch, obj[TENSOR])
            if not isinstance(dtype, torch.dtype):
                raise ValueError(f"not a dtype: {obj[TENSOR]!r}")
            if not obj["data"]:
                return torch.empty(obj["shape"], dtype=dtype)
            return torch.frombuffer(bytearray(obj["data"]), dtype=torch.uint8).view(dtype).reshape(obj["shape"])
        return {k: _unpack(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_unpack(v) for v in obj]
    return obj


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")


def dumps(obj) -> bytes:
    return pickle.dumps(_pack(obj), protocol=pickle.HIGHEST_PROTOCOL)


def loads(data: bytes):
    return _unpack(_PlainUnpickler(io.BytesIO(data)).load())
