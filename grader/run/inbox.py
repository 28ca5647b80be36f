"""What comes back from a worker is untrusted data: frames read without blocking, a size cap, a bounded
decoder (wire.loads), and a strict schema for every message. Learner text (exception messages, printed
output) is cleaned on arrival: control characters (ANSI escapes included) dropped, length capped.

A violation fails that worker's problem alone, with a reason; it never blocks or crashes the grader.
"""
from __future__ import annotations

import json
import os
import re
import socket
import struct

# torch (wire.loads, tensors) is imported on first use: the sandbox's server is started with this module loaded,
# before the grader imports torch, so that the two imports overlap

MAX_FRAME = 256 << 20  # bytes: far above any honest result (outputs of a few thousand elements)
MAX_TEXT = 4000  # characters of learner text kept per string
# ANSI escape sequences (CSI, OSC with its string up to BEL or ST, other two-character ones), C0 and C1 controls
# but newline and tab, the invisible bidirectional overrides and marks that reorder what a terminal or an editor shows,
# and the other invisible characters that can make two texts look alike or hide one (zero-width spaces and joiners, the
# word joiner and invisible operators, the byte order mark, Unicode's tag characters)
_CONTROL = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]|"
                      r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069"
                      r"\ufeff\U000e0000-\U000e007f]")
_SPACES = re.compile(r"\s+")


class Malformed(Exception):
    """The worker sent something that is not one of our messages."""


def clean(text, limit: int = MAX_TEXT) -> str:
    """Learner text as plain text: no escape sequences or control characters (newlines and tabs kept), capped."""
    if not isinstance(text, str):
        raise Malformed(f"expected text, got {type(text).__name__}")
    text = _CONTROL.sub("", text)
    return text if len(text) <= limit else text[:limit] + f" ... ({len(text) - limit} more characters)"


def one_line(text, limit: int = 300) -> str:
    """Learner text (or anything holding some: a file name, an error line quoting one) for one line of a terminal
    or a log: cleaned as `clean` does, and every run of white space (newlines, tabs, Unicode line separators)
    made one space, so that it can neither start a line of its own nor hide in another; capped."""
    return clean(_SPACES.sub(" ", _CONTROL.sub("", str(text))).strip(), limit)


class FrameReader:
    """multiprocessing's framing (a 4-byte big-endian length, or -1 and an 8-byte one, then the bytes), read
    from the connection's socket without blocking (MSG_DONTWAIT on each read: the grader's own sends on the
    same socket stay blocking): a partial frame waits for more bytes instead of blocking the grader."""

    def __init__(self, fd: int):
        self.sock = socket.socket(fileno=os.dup(fd))
        self.buffer, self.eof = bytearray(), False

    def close(self) -> None:
        self.sock.close()

    def read(self) -> list[bytes]:
        """Every complete frame available now (possibly none); sets `eof` when the worker closed its end. A
        socket whose peer closed with data of ours unread reports ECONNRESET once the frames before it are read
        (a worker that refused the submission said so, then exited without reading its calls)."""
        while True:
            try:
                chunk = self.sock.recv(1 << 20, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                break
            except ConnectionResetError:  # the worker ended with a batch of ours unread: what it said first counts
                self.eof = True
                break
            if not chunk:
                self.eof = True
                break
            self.buffer += chunk
            if len(self.buffer) > MAX_FRAME + 12:
                raise Malformed(f"a message larger than {MAX_FRAME >> 20} MB")
        frames, at, end = [], 0, len(self.buffer)
        view = memoryview(self.buffer)  # a frame is copied out once (a bytearray's slice would copy it twice)
        try:
            while end - at >= 4:
                (size,) = struct.unpack_from("!i", self.buffer, at)
                start = at + 4
                if size == -1:
                    if end - at < 12:
                        break
                    (size,) = struct.unpack_from("!Q", self.buffer, at + 4)
                    start = at + 12
                if size < 0 or size > MAX_FRAME:
                    raise Malformed(f"a frame of {size} bytes")
                if end < start + size:
                    break
                frames.append(bytes(view[start:start + size]))
                at = start + size
        finally:
            view.release()
            del self.buffer[:at]  # once per read: the frames taken (each frame's own delete moved the rest every time)
        return frames


def json_line(data) -> object:
    """A small JSON text from the sandbox (an exit report, a probe's line), decoded: Malformed for anything
    that is not JSON, whatever the decoder raises (deep nesting raises RecursionError, not ValueError)."""
    try:
        return json.loads(data)
    except Exception as exc:  # noqa: BLE001 - any decoding failure is the sender's
        raise Malformed(f"not JSON ({type(exc).__name__})") from None


def message(frame: bytes) -> dict:
    """A decoded, validated message: {"hello": ...}, {"loaded": ...} or {"key": ..., "result": ...}."""
    from .wire import loads

    try:
        msg = loads(frame)
    except Exception as exc:  # noqa: BLE001 - any decoding failure is the worker's
        raise Malformed(f"undecodable ({type(exc).__name__})") from None
    if not isinstance(msg, dict) or len(msg) not in (1, 2):
        raise Malformed("not a message")
    if set(msg) == {"hello"}:
        # the pid is said before any learner code runs, and only locates the worker for its cgroup (jail.host_pid)
        return {"hello": _dict(msg["hello"], {"cuda": bool}, {"pid": int})}
    if set(msg) == {"loaded"}:
        return {"loaded": None if msg["loaded"] is None else clean(msg["loaded"])}
    if set(msg) == {"key", "result"} and isinstance(msg["key"], str):
        return {"key": msg["key"], "result": result(msg["result"])}
    raise Malformed(f"unknown message {sorted(map(str, msg))[:3]}")


def hook_fields() -> dict:
    """Result field -> (required, optional) {name: type}: what the worker hooks add to a call's result."""
    from .hooks import HOOKS

    return {name: schema for h in HOOKS.values() for name, schema in h.fields.items()}


def result(res) -> dict:
    """One call's result, checked field by field; learner text cleaned."""
    if not isinstance(res, dict) or not isinstance(res.get("ok"), bool):
        raise Malformed("a result without ok")
    if not res["ok"]:
        err = _dict(res.get("error"), {"type": str, "text": str, "message": str, "value_error": bool})
        out = {"ok": False, "error": {k: clean(v) if isinstance(v, str) else v for k, v in err.items()}}
        if res.get("grader_error") is True:
            out["grader_error"] = True
        return out
    out = {"ok": True}
    for key, value in res.items():
        if key == "ok":
            continue
        if key in ("outputs", "earlier"):  # earlier: an inference call's earlier run, [as returned, as at the end]
            out[key] = _list(value, lambda run: _list(run, _tensor))
        elif key == "params":
            out[key] = {_str(n): _list(s, _int) for n, s in _dict(value).items()}
        elif key == "state":  # the module's state_dict names (learner text)
            out[key] = _list(value, _str)[:200]
        elif key == "devices":
            out[key] = _list(value, _str)
        elif key == "changed":
            out[key] = _list(value, _int)  # the worker's own claim: replaced by the grader's comparison
        elif key == "inputs":
            out[key] = _list(value, lambda d: None if d is None else _str(d))  # digests (wire.value_digest)
        elif key == "grads":
            out[key] = {_str(n): (None if g is None else _tensor(g)) for n, g in _dict(value).items()}
        elif key in hook_fields():  # a worker hook's own entry (run/hooks/), checked against its declared fields
            required, optional = hook_fields()[key]
            entry = _dict(value, required, optional)
            out[key] = {k: clean(v, 200) if isinstance(v, str) else v for k, v in entry.items()}
        else:
            raise Malformed(f"an unknown field {key!r:.40}")
    return out


def _dict(value, required=None, optional=None) -> dict:
    if not isinstance(value, dict):
        raise Malformed("expected a mapping")
    for name, kind in (required or {}).items():
        if not isinstance(value.get(name), kind) or (kind is int and isinstance(value.get(name), bool)):
            raise Malformed(f"field {name!r} missing or of the wrong type")
    if required is not None:
        allowed = set(required) | set(optional or {})
        if set(value) - allowed:
            raise Malformed(f"unexpected fields {sorted(set(value) - allowed)[:3]}")
        for name, kind in (optional or {}).items():
            if name in value and not isinstance(value[name], kind):
                raise Malformed(f"field {name!r} of the wrong type")
    return value


def _list(value, item) -> list:
    if not isinstance(value, list):
        raise Malformed("expected a list")
    return [item(v) for v in value]


def _tensor(value) -> "torch.Tensor":
    import torch

    if type(value) is not torch.Tensor:
        raise Malformed("expected a tensor")
    return value


def _int(value) -> int:
    if type(value) is not int:
        raise Malformed("expected an integer")
    return value


def _str(value) -> str:
    if not isinstance(value, str):
        raise Malformed("expected text")
    return clean(value, 200)
