"""A CA and the certificates a deployment needs, made with strongSwan's `pki` tool.

One CA (`ca.crt`, `ca.key`) signs every certificate in the directory; each kind of
certificate is one `Leaf` role (what it authenticates as, and so its extendedKeyUsage):

- `gateway`: IKE identities of the gateways (serverAuth + ikeIntermediate, the id as CN and SAN);
- `server`: a TLS server (REST API, the switch's P4Runtime): serverAuth, the given names
  and addresses as SANs;
- `client`: a TLS client (the controller to etcd, whose etcd user is the CN; the controller
  to the switch's P4Runtime): clientAuth, the name as CN;
- `peer`: an etcd member, which is a server to clients and to other members and a client
  to other members: serverAuth + clientAuth.

Existing files are kept, so a second run adds what is missing and changes nothing else.
Keys are ECDSA P-256, written mode 0600.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from supergw_gateway.errors import CommandError, GatewayError

FLAGS = {
    "gateway": ("serverAuth", "ikeIntermediate"),
    "server": ("serverAuth",),
    "client": ("clientAuth",),
    "peer": ("serverAuth", "clientAuth"),
}
LEAF_DAYS = 825  # what browsers and Go still accept for a server certificate
CA_DAYS = 3650


@dataclass(frozen=True)
class Leaf:
    """One certificate to issue: files `<name>.crt`/`<name>.key`, subject CN `cn`, SANs `sans`."""

    role: str
    name: str
    cn: str
    sans: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.role not in FLAGS:
            raise GatewayError(f"unknown certificate role {self.role!r}: one of {', '.join(FLAGS)}")
        if not self.name or "/" in self.name or self.name.startswith("."):
            raise GatewayError(f"certificate name {self.name!r}: a file name without '/' (e.g. etcd-c1)")
        if not self.cn or any(c in self.cn for c in ",=+\"\\"):
            raise GatewayError(f"certificate CN {self.cn!r}: give a plain name (no , = + quotes or backslashes)")


def parse_leaf(role: str, spec: str) -> Leaf:
    """`NAME` or `NAME=SAN[,SAN...]` -> a Leaf (CN NAME); GatewayError says what is wrong."""
    name, sep, rest = spec.partition("=")
    sans = tuple(s.strip() for s in rest.split(",") if s.strip()) if sep else ()
    if sep and not sans:
        raise GatewayError(f"{spec!r}: give names or addresses after '=', e.g. {name}=10.0.0.11,{name}.example")
    if role in ("server", "peer") and not sans:
        raise GatewayError(
            f"{spec!r}: a {role} certificate needs the names or addresses clients connect to: {name}=ADDRESS[,NAME]"
        )
    return Leaf(role, name, name, sans)


def _pki(args: list[str], stdin: bytes | None = None) -> bytes:
    try:
        p = subprocess.run(["pki", *args], input=stdin, capture_output=True, timeout=30)
    except FileNotFoundError:
        raise GatewayError("strongSwan's `pki` tool is missing: install strongswan-pki") from None
    if p.returncode != 0:
        raise CommandError(["pki", *args], p.returncode, p.stderr.decode(errors="replace"))
    return p.stdout


def _new_key(path: Path) -> None:
    path.touch(mode=0o600, exist_ok=True)
    path.chmod(0o600)
    path.write_bytes(_pki(["--gen", "--type", "ecdsa", "--size", "256", "--outform", "pem"]))


def make_ca(out: Path, cn: str = "supergw CA") -> dict[str, Path]:
    """ca.key (0600) and a self-signed ca.crt in `out`, unless they exist."""
    out.mkdir(parents=True, exist_ok=True)
    key, crt = out / "ca.key", out / "ca.crt"
    if not key.exists():
        _new_key(key)
    if not crt.exists():
        crt.write_bytes(_pki(["--self", "--ca", "--lifetime", str(CA_DAYS), "--in", str(key),
                              "--type", "ecdsa", "--dn", f"CN={cn}", "--outform", "pem"]))  # fmt: skip
    return {"ca.key": key, "ca.crt": crt}


def issue(out: Path, leaf: Leaf) -> dict[str, Path]:
    """`<name>.key` and `<name>.crt` signed by the CA in `out` (make_ca first), unless they exist."""
    ca_key, ca_crt = out / "ca.key", out / "ca.crt"
    if not ca_key.exists() or not ca_crt.exists():
        raise GatewayError(f"no CA in {out} (ca.crt and ca.key): make it first")
    key, crt = out / f"{leaf.name}.key", out / f"{leaf.name}.crt"
    if not key.exists():
        _new_key(key)
    if not crt.exists():
        args = ["--issue", "--lifetime", str(LEAF_DAYS), "--cacert", str(ca_crt), "--cakey", str(ca_key),
                "--dn", f"CN={leaf.cn}", "--outform", "pem"]  # fmt: skip
        for san in leaf.sans:
            args += ["--san", san]
        for flag in FLAGS[leaf.role]:
            args += ["--flag", flag]
        crt.write_bytes(_pki(args, stdin=_pki(["--pub", "--in", str(key), "--type", "ecdsa"])))
    return {f"{leaf.name}.key": key, f"{leaf.name}.crt": crt}


def make_pki(out: Path, leaves: list[Leaf], ca_cn: str = "supergw CA") -> dict[str, Path]:
    """The CA and every leaf; returns names ("ca.crt", "<name>.key", ...) -> paths."""
    names = [leaf.name for leaf in leaves]
    if dup := sorted({n for n in names if names.count(n) > 1}):
        raise GatewayError(f"certificate name given twice: {', '.join(dup)}")
    files = make_ca(out, ca_cn)
    for leaf in leaves:
        files |= issue(out, leaf)
    return files


def make_demo_pki(out: Path, ids: list[str], ca_cn: str = "supergw demo CA") -> dict[str, Path]:
    """CA key+cert and, per gateway identity, a key and a cert with the identity as CN and SAN."""
    return make_pki(out, [Leaf("gateway", i, i, (i,)) for i in ids], ca_cn)
