"""P4Runtime over mutual TLS: the real controller and the real switch, with certificates
made by the test. The switch takes simple_switch_grpc's TLS flags, so the same command line
runs the eBPF target and BMv2 (`SGW_SWITCH=ebpf|bmv2` picks one).

- the controller (its CLI, `switch.tls` with a client certificate) becomes primary and
  pushes its pipeline over mTLS;
- a client without a certificate, with one from another CA, or speaking plaintext is
  refused: the client gets a TLS error, and the eBPF switch logs the peer and the reason;
- a controller without a client certificate never gets a role and says why in its log.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from finsy.proto import p4r, p4r_grpc
from sgwctl_harness import skip_reason, switches
from sgwctl_topo import Topology, python, stop_process, wait_tcp
from supergw_proto.p4constants import CPU_PORT
from supergw_proto.rest import ApiError, ControllerClient
from tlscerts import Pki, make_pki, openssl_missing
from topologies.bmv2 import stale_json
from topologies.paths import BMV2_JSON, P4INFO
from topologies.switch import SwitchCommand

TOKEN = "p4rt-tls-admin-token"
INDEX = 61  # mgmt subnet 10.207.61.0/30, gRPC port 50761, device id 761


@dataclass
class TlsSwitch:
    topo: Topology
    pki: Pki
    proc: subprocess.Popen[bytes]
    log: Path

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


def tls_flags(pki: Pki) -> list[str]:
    return [
        "--grpc-server-ssl",
        "--grpc-server-cert", str(pki.server_cert),
        "--grpc-server-key", str(pki.server_key),
        "--grpc-server-cacert", str(pki.ca),
        "--grpc-server-with-client-auth",
    ]  # fmt: skip


@pytest.fixture(scope="module", params=switches())
def tls_switch(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsSwitch]:
    switch = request.param
    if reason := skip_reason(switch) or openssl_missing() or (stale_json() if switch == "bmv2" else None):
        pytest.skip(reason)
    tmp = tmp_path_factory.mktemp(f"p4rt-tls-{switch}")
    topo = Topology(tag="t", index=INDEX, prefix="sgw-tls", log_dir=tmp, switch=switch)
    pki = make_pki(tmp / "pki", server_ips=(topo.mgmt_sw_ip,))
    topo.create(hosts=1, gateways=1)
    cmd = SwitchCommand(switch, topo.device_id, topo.grpc_addr, CPU_PORT, topo.lab.ports(),
                        pin_dir=topo.pin_dir if switch == "ebpf" else None, log_level="info" if switch == "ebpf" else None,
                        target_options=tuple(tls_flags(pki))).argv()
    log = tmp / "switch.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen(["ip", "netns", "exec", topo.sw_ns, *cmd], stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_tcp(topo.grpc_addr, 15, proc)
        yield TlsSwitch(topo, pki, proc, log)
    finally:
        stop_process(proc)
        topo.destroy()
        subprocess.run(["rm", "-rf", str(topo.pin_dir)], check=False)


def capabilities(addr: str, creds: grpc.ChannelCredentials | None) -> str:
    """Call P4Runtime.Capabilities; return the API version, or raise grpc.RpcError."""
    channel = grpc.secure_channel(addr, creds) if creds is not None else grpc.insecure_channel(addr)
    with channel:
        stub = p4r_grpc.P4RuntimeStub(channel)
        reply = stub.Capabilities(p4r.CapabilitiesRequest(), timeout=5)
        return str(reply.p4runtime_api_version)


def creds(pki: Pki, cert: Path | None = None, key: Path | None = None, ca: Path | None = None) -> grpc.ChannelCredentials:
    return grpc.ssl_channel_credentials(
        root_certificates=(ca or pki.ca).read_bytes(),
        private_key=None if key is None else key.read_bytes(),
        certificate_chain=None if cert is None else cert.read_bytes(),
    )


def test_client_with_a_valid_certificate(tls_switch: TlsSwitch) -> None:
    s = tls_switch
    assert capabilities(s.topo.grpc_addr, creds(s.pki, s.pki.client_cert, s.pki.client_key))


@pytest.mark.parametrize(
    ("client", "switch_says"),
    [
        ("no certificate", "client didn't provide a certificate"),
        ("certificate of another CA", "certificate signed by unknown authority"),
        ("plaintext", "first record does not look like a TLS handshake"),
    ],
)
def test_client_without_a_valid_certificate_is_refused(tls_switch: TlsSwitch, client: str, switch_says: str) -> None:
    s = tls_switch
    c = {
        "no certificate": creds(s.pki),
        "certificate of another CA": creds(s.pki, s.pki.rogue_cert, s.pki.rogue_key),
        "plaintext": None,
    }[client]
    t0 = time.monotonic()
    with pytest.raises(grpc.RpcError) as ei:
        capabilities(s.topo.grpc_addr, c)
    assert ei.value.code() == grpc.StatusCode.UNAVAILABLE, ei.value
    assert time.monotonic() - t0 < 5  # refused at once, not after a timeout
    # gRPC's client-side text is generic under TLS 1.3 ("Unwrap failed"): the switch names the reason.
    if s.topo.switch == "ebpf":  # BMv2 leaves it to gRPC's own (silent by default) log
        deadline = time.monotonic() + 3
        while switch_says not in s.log_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "P4Runtime TLS handshake refused" in s.log_text() and switch_says in s.log_text(), s.log_text()[-2000:]


def test_switch_rejects_a_server_it_cannot_verify(tls_switch: TlsSwitch) -> None:
    """The other direction: a client trusting another CA refuses the switch's certificate."""
    s = tls_switch
    with pytest.raises(grpc.RpcError) as ei:
        capabilities(s.topo.grpc_addr, creds(s.pki, s.pki.client_cert, s.pki.client_key, ca=s.pki.rogue_ca))
    assert ei.value.code() == grpc.StatusCode.UNAVAILABLE


def controller_config(tmp: Path, s: TlsSwitch, api_port: int, tls: dict[str, str] | None) -> Path:
    pipeline: dict[str, str] = {"p4info": str(P4INFO)}
    if s.topo.switch == "bmv2":
        pipeline["device_config"] = str(BMV2_JSON)
    data: dict[str, Any] = {
        "switch": {"address": s.topo.grpc_addr, "device_id": s.topo.device_id, **({"tls": tls} if tls else {})},
        "pipeline": pipeline,
        "gateway_ip": "10.0.0.1",
        "buckets": 16,
        "vmac_base": "02:5e:00:00:00:00",
        "ports": {1: "host", 11: "gateway"},
        "gateways": [{"name": "g1", "port": 11, "mac": "52:54:00:3d:01:01", "heartbeat": False}],
        "api": {"listen": f"127.0.0.1:{api_port}", "token": TOKEN},
        "state_db": str(tmp / "state.sqlite3"),
    }
    path = tmp / "controller.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def run_controller(tmp: Path, s: TlsSwitch, tls: dict[str, str] | None, until: float) -> tuple[str | None, str]:
    """Start the controller CLI; return (its role once primary or at `until` s, its stderr)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen(
        [python(), "-m", "supergw_controller.cli", "--config", str(controller_config(tmp, s, port, tls)),
         "--log-level", "info"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    role = None
    api = ControllerClient(f"http://127.0.0.1:{port}", TOKEN)
    try:
        deadline = time.monotonic() + until
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                role = api.status().role
                if role == "primary":
                    break
            except ApiError:
                pass
            time.sleep(0.2)
    finally:
        stop_process(proc)
        _, err = proc.communicate()
    return role, err.decode(errors="replace")


def test_controller_over_mutual_tls(tls_switch: TlsSwitch, tmp_path: Path) -> None:
    s = tls_switch
    tls = {"cacert": str(s.pki.ca), "cert": str(s.pki.client_cert), "key": str(s.pki.client_key)}
    role, err = run_controller(tmp_path, s, tls, until=40)
    assert role == "primary", err[-3000:]


@pytest.mark.parametrize(
    ("case", "says"),
    [
        ("no client certificate", "it requires a client certificate (--grpc-server-with-client-auth): set switch.tls.cert"),
        ("wrong CA", "the switch's certificate does not verify against switch.tls.cacert"),
        ("plaintext", "if it runs with --grpc-server-ssl, set switch.tls"),
    ],
)
def test_controller_that_cannot_connect_says_why(tls_switch: TlsSwitch, tmp_path: Path, case: str, says: str) -> None:
    s = tls_switch
    tls: dict[str, Any] | None = {
        "no client certificate": {"cacert": str(s.pki.ca)},
        "wrong CA": {"cacert": str(s.pki.rogue_ca), "cert": str(s.pki.client_cert), "key": str(s.pki.client_key)},
        "plaintext": None,
    }[case]
    role, err = run_controller(tmp_path, s, tls, until=8)
    assert role == "disconnected"
    line = next((x for x in err.splitlines() if f"no P4Runtime channel to {s.topo.grpc_addr}: " in x), "")
    assert says in line, err[-3000:]
