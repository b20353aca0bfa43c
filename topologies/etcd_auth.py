"""etcd with TLS, client certificates and auth, as docs/deploy-linux.md sets it up: the
certificates from `supergw-gateway pki`, then etcdctl (as `root`, by its client
certificate) adds the users `root` and `supergw`, a role `supergw` with readwrite on the
store prefix only, and enables auth. With `--client-cert-auth`, etcd takes the user from
the client certificate's CN: no passwords anywhere.

Used by the HA emulation (`make run HA=1`) and by the controller's etcd TLS tests.
"""

from __future__ import annotations

import os
import ssl
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from supergw_gateway.pki import Leaf, make_pki

ETCDCTL = "etcdctl"
ROOT = "root"
USER = "supergw"  # the controllers' etcd user: the CN of their client certificate
ROLE = "supergw"
SERVER_NAME = "etcd.supergw"  # in every member's certificate: the name clients of several members check


class EtcdAuthError(RuntimeError):
    """etcdctl failed while setting up auth."""


@dataclass(frozen=True)
class EtcdPki:
    """The files one etcd cluster and its clients use, all signed by `ca`."""

    dir: Path

    @property
    def ca(self) -> Path:
        return self.dir / "ca.crt"

    def member(self, name: str) -> tuple[Path, Path]:
        return self.dir / f"etcd-{name}.crt", self.dir / f"etcd-{name}.key"

    def client(self, user: str) -> tuple[Path, Path]:
        return self.dir / f"{user}.crt", self.dir / f"{user}.key"


def make_etcd_pki(d: Path, members: Mapping[str, object], users: Sequence[str] = (ROOT, USER)) -> EtcdPki:
    """A CA, one peer certificate per member (name -> IP) and one client certificate per user."""
    leaves = [Leaf("peer", f"etcd-{n}", f"etcd-{n}", (str(ip), SERVER_NAME, "localhost")) for n, ip in members.items()]
    leaves += [Leaf("client", u, u) for u in users]
    make_pki(d, leaves, ca_cn="supergw etcd CA")
    return EtcdPki(d)


def member_tls_flags(pki: EtcdPki, name: str, peers: bool = True) -> list[str]:
    """etcd flags: TLS with client certificates towards clients and (`peers`: their URLs
    are https) towards the other members."""
    cert, key = pki.member(name)
    flags = ["--cert-file", str(cert), "--key-file", str(key), "--trusted-ca-file", str(pki.ca), "--client-cert-auth=true"]
    if peers:
        flags += ["--peer-cert-file", str(cert), "--peer-key-file", str(key),
                  "--peer-trusted-ca-file", str(pki.ca), "--peer-client-cert-auth=true"]  # fmt: skip
    return flags


def client_ssl_context(pki: EtcdPki, user: str = ROOT) -> ssl.SSLContext:
    """For HTTP calls to a member (its /health): verify it, present `user`'s certificate."""
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    cert, key = pki.client(user)
    ctx.load_cert_chain(str(cert), str(key))
    return ctx


def etcdctl(pki: EtcdPki, endpoints: str, *args: str, user: str = ROOT, netns: str | None = None) -> str:
    cert, key = pki.client(user)
    argv = [ETCDCTL, "--endpoints", endpoints, "--cacert", str(pki.ca), "--cert", str(cert), "--key", str(key), *args]
    if netns is not None:
        argv = ["ip", "netns", "exec", netns, *argv]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ETCDCTL_")} | {"ETCDCTL_API": "3"}
    p = subprocess.run(argv, capture_output=True, text=True, timeout=30, env=env)
    if p.returncode != 0:
        raise EtcdAuthError(f"etcdctl {' '.join(args)} failed: {(p.stderr or p.stdout).strip()}")
    return p.stdout


def enable_auth(pki: EtcdPki, endpoints: str, prefix: str, netns: str | None = None) -> None:
    """Users root and supergw (no passwords: their certificates' CNs), role supergw with
    readwrite on `prefix` only, auth on (docs/deploy-linux.md, "etcd")."""
    for args in (
        ("user", "add", ROOT, "--no-password"),
        ("user", "grant-role", ROOT, "root"),
        ("user", "add", USER, "--no-password"),
        ("role", "add", ROLE),
        ("role", "grant-permission", ROLE, "--prefix=true", "readwrite", prefix + "/"),
        ("user", "grant-role", USER, ROLE),
        ("auth", "enable"),
    ):
        etcdctl(pki, endpoints, *args, netns=netns)
