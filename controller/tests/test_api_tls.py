"""The real `supergw-controller` process serves its REST API over TLS (api.tls), and the
real gateway agent verifies it with its ca_file. Certificates are made by the test."""

from __future__ import annotations

import asyncio
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from corekit import P4INFO
from tlscerts import Pki, make_pki, openssl_missing

TOKEN = "tls-test-admin-token"
AGENT = "tls-test-agent-g1-token"


def trust(ca: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(ca))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    reason = openssl_missing()
    if reason:
        pytest.skip(reason)
    return make_pki(tmp_path_factory.mktemp("pki"))


def write_config(tmp_path: Path, port: int, tls: dict[str, str]) -> Path:
    data: dict[str, Any] = {
        # Nothing listens there: the core keeps retrying the switch, the API serves.
        "switch": {"address": f"127.0.0.1:{free_port()}", "device_id": 772},
        "pipeline": {"p4info": str(P4INFO)},
        "gateway_ip": "10.0.0.1",
        "buckets": 16,
        "vmac_base": "02:5e:00:00:00:00",
        "ports": {1: "host", 11: "gateway"},
        "gateways": [{"name": "g1", "port": 11, "mac": "52:54:00:00:01:01", "agent_token": AGENT}],
        "api": {"listen": f"127.0.0.1:{port}", "token": TOKEN, "tls": tls},
        "state_db": str(tmp_path / "state.sqlite3"),
    }
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture
def controller(tmp_path: Path, pki: Pki) -> Iterator[str]:
    port = free_port()
    cfg = write_config(tmp_path, port, {"cert": str(pki.server_cert), "key": str(pki.server_key)})
    proc = subprocess.Popen(
        [sys.executable, "-m", "supergw_controller.cli", "--config", str(cfg)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    url = f"https://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            assert proc.poll() is None, proc.communicate()
            try:
                httpx.get(url + "/healthz", verify=trust(pki.ca), timeout=1)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline, "the TLS REST API never came up"
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
    assert "https://127.0.0.1" in out, out
    assert TOKEN not in out + err and AGENT not in out + err


def test_https_with_the_ca(controller: str, pki: Pki) -> None:
    r = httpx.get(controller + "/api/v1/status", headers={"Authorization": f"Bearer {TOKEN}"}, verify=trust(pki.ca))
    assert r.status_code == 200 and r.json()["buckets"] == 16


def test_untrusted_server_certificate_is_refused(controller: str, pki: Pki) -> None:
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(controller + "/healthz", verify=trust(pki.rogue_ca))


def test_plain_http_gets_no_answer(controller: str) -> None:
    with pytest.raises(httpx.HTTPError):
        r = httpx.get(controller.replace("https://", "http://") + "/api/v1/status", timeout=3)
        r.raise_for_status()


def test_agent_verifies_the_controller_with_its_ca_file(controller: str, pki: Pki) -> None:
    gw = pytest.importorskip("supergw_gateway.agent")
    from supergw_gateway.config import Controller

    async def beat(ctl: Controller) -> None:
        link = gw.ControllerLink(controller, "g1", ctl, gw.AgentState())
        try:
            body = '{"gateway": "g1", "timestamp": 1.0}'
            await link._post(link.hb_http, "/gateways/g1/heartbeat", body)  # noqa: SLF001 - the link's own POST
        finally:
            await link.aclose()

    trusted = Controller(url=controller, token=AGENT, ca_file=pki.ca)  # type: ignore[arg-type]
    asyncio.run(beat(trusted))
    untrusted = Controller(url=controller, token=AGENT)  # type: ignore[arg-type]
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        asyncio.run(beat(untrusted))


def test_agent_ca_file_must_be_a_ca_bundle(tmp_path: Path) -> None:
    pytest.importorskip("supergw_gateway.config")
    from pydantic import ValidationError
    from supergw_gateway.config import Controller

    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    with pytest.raises(ValidationError, match="is not a usable PEM CA bundle"):
        Controller(url="https://127.0.0.1:1", token=AGENT, ca_file=junk)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="file not found: .*nope.pem: copy there the ca.crt"):
        Controller(url="https://127.0.0.1:1", token=AGENT, ca_file=tmp_path / "nope.pem")  # type: ignore[arg-type]


def test_bad_certificate_is_a_clear_startup_error(tmp_path: Path, pki: Pki) -> None:
    # A key that does not belong to the certificate.
    cfg = write_config(tmp_path, free_port(), {"cert": str(pki.server_cert), "key": str(pki.client_key)})
    p = subprocess.run([sys.executable, "-m", "supergw_controller.cli", "--config", str(cfg)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert "api.tls: cannot use certificate" in p.stderr and "Traceback" not in p.stderr


def test_missing_certificate_is_a_config_error(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, free_port(), {"cert": str(tmp_path / "nope.crt"), "key": str(tmp_path / "nope.key")})
    p = subprocess.run([sys.executable, "-m", "supergw_controller.cli", "--config", str(cfg), "--check"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "api.tls.cert: file not found" in p.stderr


def test_server_refuses_a_client_that_speaks_no_tls(controller: str) -> None:
    host, port = controller.removeprefix("https://").split(":")
    with socket.create_connection((host, int(port)), timeout=3) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        data = s.recv(100)
    assert b"200 OK" not in data  # a plain request never reaches the app
