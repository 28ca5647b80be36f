"""grade-batch on a Dask cluster (`--cluster tls://SCHEDULER:8786 --cluster-certs DIR`): one task per submission.

Dask's distributed scheduler does the distribution: it sends each task to a worker, and when a
worker dies it reschedules that worker's tasks on the others (up to its `allowed-failures`, 3 by
default; then the task fails with KilledWorker, and the submission gets an error row). A task
carries the submission itself (its bytes, zipped, at most MAX_BYTES), so workers need no shared
file system; each worker grades it exactly as `attnkit grade --untrusted` would, inside
bubblewrap (grade_bytes requires it whatever the task says, and answers an error row where bwrap
is unusable), and returns the JSON result. Results are written here, as each one arrives, exactly as
a local batch writes them, so an interrupted batch resumes the same way. A submission is sent only within
the limits its worker will unpack anyway (run/submission.py: files and bytes).

Security (docs/cluster.md): whoever reaches a Dask scheduler runs code on every worker, so the
connection is Dask's TLS with mutual authentication (`security`: certificates of the cluster's own CA,
made by `attnkit cluster certs DIR`); plain tcp:// only with --insecure-local, and only to a loopback
address. What comes back is checked like any untrusted message (`checked`): a result of the report's
shape (grader/report.schema.json, no other key, bounded size, consistent scores) or an error row,
else the row "the cluster returned a malformed result".
"""
from __future__ import annotations

import ipaddress
import io
import os
import re
import stat
import tempfile
import zipfile
from asyncio import CancelledError
from pathlib import Path

from ..errors import BadInput
from ..run.inbox import clean
from ..run.submission import MAX_MEMBERS, MAX_UNPACKED
from .cluster_results import MALFORMED, checked  # noqa: F401 - what comes back, checked there

CERTS_ENV = "ATTNKIT_CLUSTER_CERTS"
GRADING_KEYS = ("problem_ids", "seed", "timeout", "limits")  # what a task may set of grade()'s options


def pack(path: Path) -> bytes:
    """A submission as zip bytes: a .zip as it is, a directory zipped (regular files only, no link followed); within
    the limits a worker unpacks (more files or bytes: refused here, not sent)."""
    if path.is_file():
        if path.stat().st_size > MAX_UNPACKED:
            raise BadInput(f"{path.name}: more than {MAX_UNPACKED >> 20} MB")
        return path.read_bytes()
    buf, total, count = io.BytesIO(), 0, 0
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for f in sorted(path.rglob("*")):
            if f.is_symlink() or not f.is_file():
                continue
            total, count = total + f.stat().st_size, count + 1
            if total > MAX_UNPACKED or count > MAX_MEMBERS:
                raise BadInput(f"{path.name}: more than {MAX_MEMBERS} files or {MAX_UNPACKED >> 20} MB")
            z.write(f, f.relative_to(path).as_posix())
    return buf.getvalue()


def grade_bytes(name: str, data: bytes, grading: dict) -> dict:
    """On a worker: the submission's result (one.grade_one on the unpacked bytes), always inside bubblewrap: the
    sandbox is required here, whatever the task's `grading` says, and where bwrap is unusable on this worker the
    answer is an error row (nothing runs outside it)."""
    from ..run.jail import remedy, unusable
    from .one import grade_one

    why = unusable()
    if why is not None:
        return {"error": f"not graded: this cluster worker cannot sandbox ({why}: {remedy(why)})"}
    options = {k: v for k, v in (grading or {}).items() if k in GRADING_KEYS}
    options["sandbox"] = True  # required: decide(True) refuses rather than grade outside bwrap
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", Path(str(name)).stem)[:80].strip(".") or "submission"
    with tempfile.TemporaryDirectory(prefix="attnkit-task-") as tmp:
        archive = Path(tmp) / f"{stem}.zip"
        archive.write_bytes(data)
        return grade_one(archive, options)


# --- the connection: who may be talked to, and how -------------------------------------------------------------

_HOST_PORT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(?::([0-9]{1,5}))?$")


def _host(rest: str, address: str, scheme: str) -> str:
    m = _HOST_PORT.match(rest)
    if not m or (m.group(2) is not None and not 0 < int(m.group(2)) < 65536):
        raise BadInput(f"--cluster {address}: expected {scheme}://HOST:PORT")
    return m.group(1).strip("[]")


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1, or the name localhost (nothing is resolved: any other name is not loopback here)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def connection(address: str, certs: str | None, insecure_local: bool = False):
    """(the address to connect to, Dask's Security for it or None): TLS with this cluster's certificates (`certs`,
    else $ATTNKIT_CLUSTER_CERTS) to a tls:// address; without certificates only with `insecure_local`, and only
    to a loopback address over tcp://. Anything else: BadInput, before any work."""
    scheme, sep, rest = address.partition("://")
    if not sep:
        scheme, rest = "", address
    scheme = scheme.lower()
    if insecure_local:
        if certs:
            raise BadInput("--insecure-local connects without certificates: give it or --cluster-certs, not both")
        if scheme == "tls":
            raise BadInput(f"--cluster {address}: tls:// needs the cluster's certificates (--cluster-certs DIR), "
                           f"not --insecure-local")
        if scheme not in ("", "tcp"):
            raise BadInput(f"--cluster {address}: --insecure-local takes tcp://127.0.0.1:PORT (a loopback address)")
        if not is_loopback(_host(rest, address, "tcp")):
            raise BadInput(f"--cluster {address}: --insecure-local is only for a scheduler on this machine "
                           f"(127.0.0.1, localhost, [::1]); a remote cluster needs --cluster-certs DIR and tls://")
        return f"tcp://{rest}", None
    certs = certs or os.environ.get(CERTS_ENV) or None
    if certs is None:
        raise BadInput(f"--cluster {address}: an unauthenticated scheduler runs anyone's code on its workers: give "
                       f"--cluster-certs DIR (or ${CERTS_ENV}; `attnkit cluster certs DIR` makes them) and a tls:// "
                       f"address, or --insecure-local for a scheduler on 127.0.0.1")
    if scheme != "tls":
        raise BadInput(f"--cluster {address}: with certificates the address is tls://HOST:PORT")
    _host(rest, address, "tls")
    return f"tls://{rest}", security(certs)


def security(certs, roles: tuple[str, ...] = ("client",)):
    """Dask's Security for `roles` (the client's by default) from the folder `certs` that `attnkit cluster certs`
    wrote: TLS required, both ends authenticated by the cluster's CA. BadInput when a file is missing, a key is
    readable by other users, or they do not load."""
    from .cluster_certs import CA, ROLES

    try:
        from distributed.security import Security
    except ImportError:
        raise BadInput('--cluster needs Dask\'s distributed: pip install -e ".[cluster]"') from None
    folder = Path(certs).expanduser()
    if not folder.is_dir():
        raise BadInput(f"--cluster-certs {certs}: not a directory (`attnkit cluster certs DIR` makes one)")
    fields = {"tls_ca_file": folder / CA[0]}
    for role in roles:
        cert, key = ROLES[role]
        fields[f"tls_{role}_cert"], fields[f"tls_{role}_key"] = folder / cert, folder / key
    for field, path in fields.items():
        try:
            mode = path.stat().st_mode
        except OSError as exc:
            raise BadInput(f"--cluster-certs {certs}: {path.name}: {exc.strerror} "
                           f"(`attnkit cluster certs DIR` makes the files)") from None
        if field.endswith("_key") and mode & 0o077:
            raise BadInput(f"--cluster-certs {certs}: {path.name} is readable by other users "
                           f"(chmod 600 {path}): whoever holds it runs code on the cluster")
        if not stat.S_ISREG(mode):
            raise BadInput(f"--cluster-certs {certs}: {path.name}: not a file")
    sec = Security(require_encryption=True, **{field: str(path) for field, path in fields.items()})
    try:
        for role in roles:
            sec.get_connection_args(role)  # loads the CA, the certificate and the key now: a clear line if they fail
    except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
        raise BadInput(f"--cluster-certs {certs}: the certificates do not load ({clean(str(exc), 200)})") from None
    return sec


def _why(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001 - the exception came from the cluster
        text = ""
    return f"{type(exc).__name__}: {clean(text, 200)}"


def grade_all(address: str, todo: list[Path], record, grading: dict, security=None) -> None:
    """Each submission of `todo` graded on the cluster at `address` (connected with `security`, Dask's TLS
    settings, or None for tcp:// on loopback); record(path, result) as each one ends, each result checked."""
    try:
        from distributed import Client, as_completed
        import jsonschema  # noqa: F401 - the results' check (`checked`), before anything is sent
    except ImportError:
        raise BadInput('--cluster needs Dask\'s distributed (and jsonschema): pip install -e ".[cluster]"') from None
    if security is None:  # without TLS, only a scheduler on this machine (as --insecure-local), whoever calls
        address, _ = connection(address, None, insecure_local=True)
    try:
        client = Client(address, timeout="20s", security=security)
    except (OSError, TimeoutError, ValueError, TypeError) as exc:
        refused = ", or the TLS handshake failed (certificates of another CA?)" if security is not None else ""
        raise BadInput(f"--cluster {address}: no Dask scheduler answers there{refused} "
                       f"({type(exc).__name__})") from None
    grading = dict(grading, sandbox=True)
    try:
        futures = {}
        for p in todo:
            try:
                data = pack(p)
            except (BadInput, OSError) as exc:
                record(p, {"error": str(exc)})
                continue
            futures[client.submit(grade_bytes, p.name, data, grading, pure=False)] = p
        for future in as_completed(futures):
            p = futures[future]
            try:
                result = future.result()
            except (Exception, CancelledError) as exc:  # noqa: BLE001 - a lost task (KilledWorker after retries)
                record(p, {"error": f"could not be graded on the cluster ({_why(exc)})"})
                continue
            try:
                row = checked(result, grading)
            except Exception:  # noqa: BLE001 - whatever the check missed is still no grade
                row = {"error": MALFORMED}
            record(p, row)
    finally:
        client.close()
