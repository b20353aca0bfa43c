"""A demo CA and gateway certificates, made with strongSwan's `pki` tool."""

from __future__ import annotations

import subprocess
from pathlib import Path

from supergw_gateway.errors import CommandError, GatewayError


def _pki(args: list[str], stdin: bytes | None = None) -> bytes:
    try:
        p = subprocess.run(["pki", *args], input=stdin, capture_output=True, timeout=30)
    except FileNotFoundError:
        raise GatewayError("strongSwan's `pki` tool is missing: install strongswan-pki") from None
    if p.returncode != 0:
        raise CommandError(["pki", *args], p.returncode, p.stderr.decode(errors="replace"))
    return p.stdout


def make_demo_pki(out: Path, ids: list[str], ca_cn: str = "supergw demo CA") -> dict[str, Path]:
    """CA key+cert and, per identity, an ECDSA key and a cert with the identity as SAN.

    Returns a map of names ("ca.crt", "<id>.key", "<id>.crt") to paths. Existing files are kept.
    """
    out.mkdir(parents=True, exist_ok=True)
    files: dict[str, Path] = {"ca.key": out / "ca.key", "ca.crt": out / "ca.crt"}
    if not files["ca.key"].exists():
        files["ca.key"].write_bytes(_pki(["--gen", "--type", "ecdsa", "--size", "256", "--outform", "pem"]))
        files["ca.key"].chmod(0o600)
    if not files["ca.crt"].exists():
        files["ca.crt"].write_bytes(_pki(["--self", "--ca", "--lifetime", "3650", "--in", str(files["ca.key"]),
                                          "--type", "ecdsa", "--dn", f"CN={ca_cn}", "--outform", "pem"]))
    for ident in ids:
        key, crt = out / f"{ident}.key", out / f"{ident}.crt"
        if not key.exists():
            key.write_bytes(_pki(["--gen", "--type", "ecdsa", "--size", "256", "--outform", "pem"]))
            key.chmod(0o600)
        if not crt.exists():
            pub = _pki(["--pub", "--in", str(key), "--type", "ecdsa"])
            crt.write_bytes(_pki(["--issue", "--lifetime", "365", "--cacert", str(files["ca.crt"]),
                                  "--cakey", str(files["ca.key"]), "--dn", f"CN={ident}", "--san", ident,
                                  "--flag", "serverAuth", "--flag", "ikeIntermediate", "--outform", "pem"],
                                 stdin=pub))
        files[f"{ident}.key"], files[f"{ident}.crt"] = key, crt
    return files
