"""`supergw-gateway pki`: certificate specs, and real certificates from strongSwan's pki
(their usages and names read back with openssl)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from supergw_gateway.cli import main
from supergw_gateway.errors import GatewayError
from supergw_gateway.pki import Leaf, make_pki, parse_leaf


def test_parse_leaf() -> None:
    assert parse_leaf("peer", "etcd-c1=10.0.0.11, c1.example") == Leaf("peer", "etcd-c1", "etcd-c1", ("10.0.0.11", "c1.example"))
    assert parse_leaf("client", "supergw") == Leaf("client", "supergw", "supergw")


@pytest.mark.parametrize(
    ("role", "spec", "says"),
    [
        ("server", "rest", "needs the names or addresses clients connect to"),
        ("peer", "etcd-c1=", "give names or addresses after '='"),
        ("client", "../x", "a file name without '/'"),
        ("client", "a,b", "give a plain name"),
        ("boss", "x", "unknown certificate role"),
    ],
)
def test_bad_specs_are_clear(role: str, spec: str, says: str) -> None:
    with pytest.raises(GatewayError, match=says):
        parse_leaf(role, spec)


def _ext(path: Path) -> str:
    p = subprocess.run(["openssl", "x509", "-in", str(path), "-noout", "-subject", "-ext", "extendedKeyUsage,subjectAltName"],
                       capture_output=True, text=True, check=True)
    return p.stdout


@pytest.mark.skipif(shutil.which("pki") is None or shutil.which("openssl") is None,
                    reason="needs strongSwan's pki (strongswan-pki) and openssl")
def test_issues_each_role_signed_by_one_ca_and_keeps_what_exists(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "pki"
    assert main(["pki", "--out", str(out), "--peer", "etcd-c1=10.0.0.11,c1.example", "--client", "supergw",
                 "--server", "rest=10.0.0.11", "gw1.example"]) == 0
    peer, client, server, gw = (_ext(out / f"{n}.crt") for n in ("etcd-c1", "supergw", "rest", "gw1.example"))
    assert "TLS Web Server Authentication, TLS Web Client Authentication" in peer
    assert "IP Address:10.0.0.11" in peer and "DNS:c1.example" in peer
    assert "CN = supergw" in client and "TLS Web Client Authentication" in client and "Server" not in client
    assert "TLS Web Server Authentication" in server and "Client" not in server
    assert "1.3.6.1.5.5.8.2.2" in gw or "ipsec Internet Key Exchange" in gw  # ikeIntermediate
    for n in ("etcd-c1", "supergw", "rest", "gw1.example"):
        verified = subprocess.run(["openssl", "verify", "-CAfile", str(out / "ca.crt"), str(out / f"{n}.crt")],
                                  capture_output=True, text=True)
        assert verified.returncode == 0, verified.stderr
        assert (out / f"{n}.key").stat().st_mode & 0o777 == 0o600
    before = (out / "rest.crt").read_bytes()
    make_pki(out, [Leaf("server", "rest", "rest", ("10.9.9.9",)), Leaf("client", "root", "root")])
    assert (out / "rest.crt").read_bytes() == before and (out / "root.crt").is_file()
    capsys.readouterr()
    assert main(["pki", "--out", str(out)]) == 2
    assert "nothing to issue" in capsys.readouterr().err
