"""One file of plain data and tensors: a skeleton pickled with no class resolvable (as the workers' messages,
run/wire.py) and one blob of every tensor's bytes, read at once, so that thousands of tensors come back in
milliseconds as views of it. The format of the store of expected values (stored.py)."""
from __future__ import annotations

import io
import os
import pickle
import stat
import tempfile
from pathlib import Path

import torch

from ..run.wire import DTYPES, PlainUnpickler, tensor_bytes

MAGIC = b"attnkit-expected-1\n"
ALIGN = 64  # every tensor's bytes start at a multiple: a view of any dtype over them is aligned
TENSOR = "__attnkit_stored_tensor__"


class Unstorable(TypeError):
    """A value the store does not keep (neither plain data nor a CPU tensor): the run's own values stand."""


def write(path: Path, values) -> None:
    """Write `values` (plain data and CPU tensors) to `path` at once (a temporary file renamed over it)."""
    blobs: list[bytes] = []
    offset = [0]

    def pack(obj):
        if isinstance(obj, torch.Tensor):
            t = obj.detach()
            if t.device.type != "cpu" or t.is_quantized or t.is_sparse or t.layout != torch.strided:
                raise Unstorable(f"a {t.device.type} {t.layout} tensor")
            raw = tensor_bytes(t)
            at = offset[0]
            pad = -len(raw) % ALIGN
            blobs.append(raw + b"\0" * pad)
            offset[0] += len(raw) + pad
            return {TENSOR: str(t.dtype).removeprefix("torch."), "shape": list(t.shape), "at": at, "n": len(raw)}
        if isinstance(obj, dict):
            return {k: pack(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return type(obj)(pack(v) for v in obj)
        if obj is None or type(obj) in (bool, int, float, str):
            return obj
        raise Unstorable(type(obj).__name__)

    skeleton = pickle.dumps(pack(values), protocol=pickle.HIGHEST_PROTOCOL)
    head = MAGIC + len(skeleton).to_bytes(8, "little")
    start = len(head) + len(skeleton)
    start += -start % ALIGN
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".writing-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(head + skeleton + b"\0" * (start - len(head) - len(skeleton)))
            for b in blobs:
                f.write(b)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read(path: Path):
    """The values in `path`, or None where it is missing, not a private file of this uid, or not one the store
    wrote. Read whole into memory (a mapping would fault if the file were cut short meanwhile), its tensors views
    of that one buffer."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb", buffering=0) as f:
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077 or not st.st_size:
                return None
            data = bytearray(st.st_size)
            if f.readinto(data) != st.st_size:
                return None
        except OSError:
            return None
    try:
        return _decode(data)
    except Exception:  # noqa: BLE001 - a damaged file is recomputed, whatever it holds
        return None


def _decode(data: bytearray):
    if data[:len(MAGIC)] != MAGIC:
        return None
    size = int.from_bytes(data[len(MAGIC):len(MAGIC) + 8], "little")
    begin = len(MAGIC) + 8
    skeleton = PlainUnpickler(io.BytesIO(data[begin:begin + size])).load()
    start = begin + size
    start += -start % ALIGN
    blob = torch.frombuffer(data, dtype=torch.uint8, offset=start) if len(data) > start else None

    def unpack(obj):
        if isinstance(obj, dict):
            if TENSOR in obj:
                dtype, shape, at, n = DTYPES[obj[TENSOR]], obj["shape"], obj["at"], obj["n"]
                if not n:
                    return torch.empty(shape, dtype=dtype)
                return blob[at:at + n].view(dtype).view(shape)
            return {k: unpack(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return type(obj)(unpack(v) for v in obj)
        return obj

    return unpack(skeleton)
