"""What the remote-access unit tests share: a config with an outside switch, gateway reports
with clients, and the plan the lab uses (gateway k: ESP SPIs with top byte 0xc0 + k, IKE
label k + 1 in the SPI's top byte, pool 10.90.k.0/24)."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any

from supergw_controller.config import Config
from supergw_proto.replication import ReplicationState
from supergw_proto.reports import ClientSession, GatewayReport, IpsecBackend, RemoteAccessInfo, SaState

from corekit import make_config

PUBLIC_IP = "203.0.113.1"
OUTSIDE_PORTS = {"g1": 21, "g2": 22, "g3": 23}
UPLINK = 1


def ra_section(**over: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "public_ip": PUBLIC_IP,
        "public_mac": "02:50:00:00:00:01",
        "switch": {"address": "127.0.0.1:50710", "device_id": 710},
        "uplinks": [UPLINK],
        "gateways": {n: {"port": p, "mac": f"52:54:00:00:02:{p:02x}"} for n, p in OUTSIDE_PORTS.items()},
    }
    data.update(over)
    return data


def ra_config(tmp_path: Path, **over: Any) -> Config:
    return make_config(tmp_path, remote_access=ra_section(**over))


def ra_info(k: int, **over: Any) -> RemoteAccessInfo:
    data: dict[str, Any] = {
        "public_address": PUBLIC_IP,
        "pool": f"10.90.{k}.0/24",
        "esp_spi_min": (0xC0 + k) << 24,
        "esp_spi_max": ((0xC0 + k) << 24) | 0xFFFFFF,
        "ike_spi_label": (k + 1) << 56,
        "ike_spi_mask": 0xFF << 56,
        "caching": "none",
    }
    data.update(over)
    return RemoteAccessInfo.model_validate(data)


def client(ip: str, n: int = 1, port: int = 4500, vip: str | None = None) -> ClientSession:
    return ClientSession(
        ike_id=n,
        identity=f"client{n}",
        remote_host=ipaddress.IPv4Address(ip),
        remote_port=port,
        initiator_spi=f"{n:016x}",
        responder_spi=f"{(1 << 56) | n:016x}",
        vips=[ipaddress.IPv4Address(vip or f"10.90.0.{n % 250 + 2}")],
        established_at=1000.0,
        bytes_in=0,
        bytes_out=0,
        present=True,
        present_s=1.0,
    )


def endpoint(gateway: str) -> str:
    """The replication listener the lab's agent of `gateway` (g1, g2, ...) reports."""
    return f"10.255.70.{int(gateway[1:])}:4520"


def repl(gateway: str, **over: Any) -> ReplicationState:
    """A replication state as `gateway`'s agent reports it (its endpoint; the rest from `over`)."""
    return ReplicationState.model_validate({"endpoint": endpoint(gateway), **over})


def report(gateway: str, info: RemoteAccessInfo | None, clients: list[ClientSession] | None,
           replication: ReplicationState | None = None) -> GatewayReport:
    return GatewayReport(
        gateway=gateway,
        timestamp=1.0,
        backend=IpsecBackend.LIBIPSEC,
        cpu_percent=5,
        softirq_percent=0,
        charon_cpu_percent=1,
        tunnel_bytes_in=0,
        tunnel_bytes_out=0,
        tunnel_packets_in=0,
        tunnel_packets_out=0,
        # its site-to-site tunnel is up (else liveness judges it dead: reports.tunnel_up)
        sas=[SaState(name="net", kind="child", state="INSTALLED", established_s=1, bytes_in=0, bytes_out=0,
                     packets_in=0, packets_out=0)],
        remote_access=info,
        clients=clients,
        replication=replication,
    )
