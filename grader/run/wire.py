"""Messages between the grader and its workers.

Tensors travel as (dtype name, shape, raw bytes) and everything else as plain Python
data, pickled; the loader's Unpickler resolves no class or function at all, so a
worker can send back nothing that runs code or pretends to be a tensor.
"""
import hashlib
import io
import pickle

import torch

TENSOR = "__attnkit_tensor__"


def _byte_view(t: torch.Tensor):
    """A CPU tensor's elements in order, as a NumPy array of bytes (its own memory where it is contiguous)."""
    return t.contiguous().reshape(-1).view(torch.uint8).numpy()


def tensor_bytes(t: torch.Tensor) -> bytes:
    """A CPU tensor's elements in order, as raw bytes (empty for no element)."""
    return _byte_view(t).tobytes() if t.numel() else b""


def value_digest(t: torch.Tensor) -> str:
    """A tensor's dtype, shape and values in one short text: equal for two tensors exactly when `judge/compare.same_values`
    calls them the same (NaN where NaN, -0.0 as 0.0). A worker says its inputs after a call this way, and the grader
    compares it with the digest of what it sent, instead of the inputs' bytes travelling back."""
    t = t.detach().cpu()
    if t.is_floating_point():  # one NaN and one zero: what same_values does not tell apart, the digest does not either
        t = t + 0  # -0.0 as 0.0 (a copy: the learner's tensor is left as it is)
        if t.isnan().any():
            t = torch.where(t.isnan(), torch.full((), float("nan"), dtype=t.dtype), t)
    return f"{str(t.dtype).removeprefix('torch.')}{list(t.shape)}:{hashlib.blake2b(_byte_view(t) if t.numel() else b'', digest_size=16).hexdigest()}"


def _elements(t: torch.Tensor):
    """A CPU tensor's elements in order, for pickle to write in place: a writable buffer, which protocol 5 writes (and
    reads back) as a bytearray, so that neither side copies the bytes once more (empty bytes for no element)."""
    if not t.numel():
        return b""
    return pickle.PickleBuffer(_byte_view(t))


def _pack(obj):
    if isinstance(obj, torch.Tensor):
        t = obj.detach().cpu()
        return {TENSOR: str(t.dtype).removeprefix("torch."), "shape": list(t.shape), "data": _elements(t)}
    if isinstance(obj, dict):
        return {k: _pack(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_pack(v) for v in obj]
    return obj


MAX_NODES, MAX_DEPTH = 200_000, 32
"""Bounds of a decoded message: pickle's shared references let a small message name one list a billion
times over (2^80 nodes in a few kB); counting every node visited stops that walk early."""


def _unpack(obj, budget=None, depth: int = 0):
    budget = budget if budget is not None else [MAX_NODES]
    budget[0] -= 1
    if budget[0] < 0 or depth > MAX_DEPTH:
        raise ValueError("a message too large or too deep (shared references?)")
    if isinstance(obj, dict):
        if TENSOR in obj:
            return _tensor(obj)
        return {k: _unpack(v, budget, depth + 1) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_unpack(v, budget, depth + 1) for v in obj]
    if obj is None or type(obj) in (bool, int, float, str):
        return obj
    raise ValueError(f"not plain data: {type(obj).__name__}")


DTYPES = {str(t).removeprefix("torch."): t for t in vars(torch).values() if isinstance(t, torch.dtype)}
"""The dtypes a message may name, by name (a fixed table: a name is looked up, never resolved as an attribute)."""


def _tensor(obj) -> torch.Tensor:
    dtype = DTYPES.get(obj.get(TENSOR)) if isinstance(obj.get(TENSOR), str) else None
    shape, data = obj.get("shape"), obj.get("data")
    if dtype is None or not isinstance(shape, list) or not isinstance(data, (bytes, bytearray)) \
            or not all(type(n) is int for n in shape) or (shape and min(shape) < 0):
        raise ValueError("not a tensor")
    count = 1
    for n in shape:
        count *= n
    if count * dtype.itemsize != len(data):
        raise ValueError("a tensor whose bytes do not match its shape")
    if not data:
        return torch.empty(shape, dtype=dtype)
    # read as bytes, then viewed: frombuffer straight into a quantized dtype crashes the process (a segfault); a
    # bytearray (what _elements sends) is the tensor's own memory from here, bytes (immutable) are copied first
    return torch.frombuffer(data if isinstance(data, bytearray) else bytearray(data), dtype=torch.uint8).view(dtype).reshape(shape)


class PlainUnpickler(pickle.Unpickler):
    """Pickle's loader with no class or function resolvable: plain data only (dicts, lists, tuples, numbers, text)."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")


def dumps(obj) -> bytes:
    return pickle.dumps(_pack(obj), protocol=pickle.HIGHEST_PROTOCOL)


def loads(data: bytes):
    return _unpack(PlainUnpickler(io.BytesIO(data)).load())
