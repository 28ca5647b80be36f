"""`attnkit cluster certs DIR`: the certificates of a secured Dask cluster (docs/cluster.md).

A certificate authority of the cluster's own (ca.pem, and ca-key.pem, which signs them and belongs
offline), and a key and a certificate it signed for each role: the scheduler, the workers and the
client (`grade-batch --cluster ... --cluster-certs DIR`). Dask's TLS (distributed.security.Security,
require_encryption) then authenticates both ends of every connection: a peer without a certificate
of this CA is refused. Dask checks the chain, not host names nor roles: whoever holds any of these keys
is trusted by the whole cluster, so the CA must be this cluster's alone.

Keys are ECDSA P-256, written 0600 in a folder created 0700; nothing is ever overwritten.
"""
from __future__ import annotations

import datetime
import os
import shlex
from pathlib import Path

from ..errors import BadInput

CA = ("ca.pem", "ca-key.pem")
ROLES = {"scheduler": ("scheduler.pem", "scheduler-key.pem"), "worker": ("worker.pem", "worker-key.pem"),
         "client": ("client.pem", "client-key.pem")}
NAMES = {"ca": "attnkit cluster CA", "scheduler": "attnkit scheduler", "worker": "attnkit worker",
         "client": "attnkit client"}
PORT = 8786  # Dask's scheduler port
DEFAULT_DAYS = 365


def files() -> list[str]:
    return [*CA, *(name for pair in ROLES.values() for name in pair)]


def make(directory, days: int = DEFAULT_DAYS) -> Path:
    """A CA and each role's certificate and key in `directory` (created 0700 if missing); BadInput when any of the
    files is already there (nothing is written then) or the folder cannot be made."""
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    except ImportError:
        raise BadInput('cluster certs needs the cryptography package: pip install -e ".[cluster]"') from None
    folder = Path(directory).expanduser()
    if folder.exists() and not folder.is_dir():
        raise BadInput(f"{directory}: not a directory")
    present = [name for name in files() if os.path.lexists(folder / name)]
    if present:
        raise BadInput(f"{folder / present[0]} already exists: certificates are never overwritten "
                       f"(choose another folder, or remove the old ones)")
    try:
        if not folder.is_dir():
            folder.parent.mkdir(parents=True, exist_ok=True)
            os.mkdir(folder, 0o700)
            os.chmod(folder, 0o700)  # whatever the umask
    except OSError as exc:
        raise BadInput(f"{directory}: cannot create it ({exc.strerror})") from None

    now = datetime.datetime.now(datetime.timezone.utc)
    start, end = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=days)  # 5 minutes: clock skew

    def name(role: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "attnkit"),
                          x509.NameAttribute(NameOID.COMMON_NAME, NAMES[role])])

    def usage(**on) -> x509.KeyUsage:
        flags = ("digital_signature", "content_commitment", "key_encipherment", "data_encipherment", "key_agreement",
                 "key_cert_sign", "crl_sign", "encipher_only", "decipher_only")
        return x509.KeyUsage(**{f: on.get(f, False) for f in flags})

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (x509.CertificateBuilder().subject_name(name("ca")).issuer_name(name("ca"))
               .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(start).not_valid_after(end)
               .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
               .add_extension(usage(digital_signature=True, key_cert_sign=True, crl_sign=True), critical=True)
               .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
               .sign(ca_key, hashes.SHA256()))
    made = {CA: (ca_cert, ca_key)}
    for role, pair in ROLES.items():
        key = ec.generate_private_key(ec.SECP256R1())
        # the scheduler and the workers both listen and connect; the client only connects
        purposes = [ExtendedKeyUsageOID.CLIENT_AUTH] + ([] if role == "client" else [ExtendedKeyUsageOID.SERVER_AUTH])
        cert = (x509.CertificateBuilder().subject_name(name(role)).issuer_name(ca_cert.subject)
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(start).not_valid_after(end)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(usage(digital_signature=True), critical=True)
                .add_extension(x509.ExtendedKeyUsage(purposes), critical=False)
                .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
                .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
                .sign(ca_key, hashes.SHA256()))
        made[pair] = (cert, key)
    for (cert_name, key_name), (cert, key) in made.items():
        _write(folder / key_name, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                    serialization.NoEncryption()), 0o600)
        _write(folder / cert_name, cert.public_bytes(serialization.Encoding.PEM), 0o644)
    return folder


def _write(path: Path, data: bytes, mode: int) -> None:
    """A new file (never one already there, nor through a link), with exactly `mode`."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    except FileExistsError:
        raise BadInput(f"{path} already exists: certificates are never overwritten") from None
    except OSError as exc:
        raise BadInput(f"{path}: cannot write it ({exc.strerror})") from None
    with os.fdopen(fd, "wb") as f:
        os.fchmod(fd, mode)  # whatever the umask
        f.write(data)


def commands(directory, host: str = "SCHEDULER_HOST", port: int = PORT) -> dict[str, list[str]]:
    """The command lines of a secured cluster whose certificates are in `directory`: `dask scheduler` on `host`,
    `dask worker` (each grading machine or container), and `attnkit grade-batch`."""
    d = Path(directory).expanduser().resolve()
    tls = {role: ["--tls-ca-file", str(d / CA[0]), "--tls-cert", str(d / cert), "--tls-key", str(d / key)]
           for role, (cert, key) in ROLES.items()}
    address = f"tls://{host}:{port}"
    return {
        # the dashboard's HTTP server (unauthenticated, read-only) listens on loopback alone
        "scheduler": ["dask", "scheduler", "--protocol", "tls", "--port", str(port),
                      "--dashboard-address", "127.0.0.1:8787", *tls["scheduler"]],
        "worker": ["dask", "worker", address, "--nthreads", "1", "--no-dashboard",
                   "--dashboard-address", "127.0.0.1:0", *tls["worker"]],
        "grade-batch": ["attnkit", "grade-batch", "SUBMISSIONS_DIR", "--out", "RESULTS_DIR", "--cluster", address,
                        "--cluster-certs", str(d)],
    }


def summary(directory, host: str = "SCHEDULER_HOST", port: int = PORT) -> str:
    """What `attnkit cluster certs` prints: the files, which machine gets which, and the command lines."""
    d = Path(directory).expanduser().resolve()
    lines = commands(d, host, port)
    role_files = {role: " ".join([CA[0], *pair]) for role, pair in ROLES.items()}
    return "\n".join([
        f"Certificates of a new cluster CA in {d} (keys 0600):",
        f"  scheduler:            {role_files['scheduler']}",
        f"  each worker:          {role_files['worker']}",
        f"  grade-batch (client): {role_files['client']}",
        f"  {CA[1]} signs certificates: keep it off the cluster (offline); no machine of the cluster needs it.",
        "Copy each machine its files (the same paths below, or change them), then:",
        "",
        f"# the scheduler, on {host}:",
        shlex.join(lines["scheduler"]),
        "# each worker (bubblewrap installed; add --nworkers N for N graders on one machine):",
        shlex.join(lines["worker"]),
        "# grade:",
        shlex.join(lines["grade-batch"]),
        "",
        "(`python -m dask scheduler` and `python -m dask worker` where the `dask` command is not on PATH; "
        "docs/cluster.md: deployment)",
    ])
