"""Throw-away X.509 material for TLS tests, made with the openssl CLI.

`make_pki(dir)` writes a CA, a server certificate for 127.0.0.1/localhost, a client
certificate, and a second, unrelated CA with its own client certificate (a caller whose
certificate no one here trusts). ECDSA P-256, valid for two days.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    rogue_ca: Path
    rogue_cert: Path
    rogue_key: Path


def openssl_missing() -> str | None:
    return None if shutil.which("openssl") else "the openssl CLI is not installed (apt-get install openssl)"


def _run(*args: str, cwd: Path) -> None:
    p = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)} failed: {p.stderr.strip()}")


def _ca(d: Path, name: str) -> None:
    _run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
         "-keyout", f"{name}.key", "-out", f"{name}.crt", "-days", "2", "-subj", f"/CN=supergw test {name}",
         "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)


def _leaf(d: Path, name: str, ca: str, ext: str) -> None:
    (d / f"{name}.ext").write_text(ext)
    _run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
         "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=d)
    _run("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key", "-CAcreateserial",
         "-out", f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext", cwd=d)


def make_pki(d: Path, server_ips: tuple[str, ...] = ()) -> Pki:
    """`server_ips`: addresses the server certificate is valid for besides 127.0.0.1."""
    d.mkdir(parents=True, exist_ok=True)
    _ca(d, "ca")
    _ca(d, "rogue-ca")
    san = ",".join(["IP:127.0.0.1", *(f"IP:{ip}" for ip in server_ips), "DNS:localhost"])
    _leaf(d, "server", "ca", f"subjectAltName={san}\nextendedKeyUsage=serverAuth\n")
    _leaf(d, "client", "ca", "extendedKeyUsage=clientAuth\n")
    _leaf(d, "rogue", "rogue-ca", "extendedKeyUsage=clientAuth\n")
    return Pki(
        ca=d / "ca.crt", server_cert=d / "server.crt", server_key=d / "server.key",
        client_cert=d / "client.crt", client_key=d / "client.key",
        rogue_ca=d / "rogue-ca.crt", rogue_cert=d / "rogue.crt", rogue_key=d / "rogue.key",
    )
