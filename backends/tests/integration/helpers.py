"""Shared checks of the integration tests: real traffic, real captures, real strongSwan."""

from __future__ import annotations

import re
import subprocess
import time
from contextlib import contextmanager
from collections.abc import Iterator
from pathlib import Path

from supergw_gateway.lab import WAN_DEV, Lab
from supergw_gateway.runtime import Gateway
from supergw_gateway.tunnel import child_name

MARKER = b"SGW-PLAINTEXT-MARKER"


def ping(lab: Lab, count: int = 3, interval: float = 0.2, pattern: bytes | None = None, size: int = 56) -> tuple[int, int]:
    argv = ["ping", "-n", "-q", "-c", str(count), "-i", str(interval), "-W", "2", "-s", str(size)]
    if pattern:
        argv += ["-p", pattern[:16].hex()]
    out = lab.host("a").run([*argv, lab.sites["b"].host_ip], check=False, timeout=count * interval + 20).stdout
    m = re.search(r"(\d+) packets transmitted, (\d+) received", out)
    assert m, out
    return int(m.group(1)), int(m.group(2))


@contextmanager
def capture(lab: Lab, side: str = "b") -> Iterator[Path]:
    """tcpdump on a gateway's WAN veth (in its namespace) for the duration of the block."""
    pcap = Path(f"/tmp/sgw-gw-{lab.tag}-wan.pcap")
    pcap.unlink(missing_ok=True)
    p = subprocess.Popen(["ip", "netns", "exec", lab.gw_ns(side), "tcpdump", "-i", WAN_DEV, "-U", "-n", "-s", "0",
                          "-w", str(pcap)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert p.stderr is not None
    line = p.stderr.readline()  # "listening on ...": the capture is armed
    assert "listening on" in line, line
    time.sleep(0.2)
    try:
        yield pcap
    finally:
        time.sleep(0.5)
        p.terminate()
        p.wait(5)


def summarize(pcap: Path, bpf: str) -> list[str]:
    out = subprocess.run(["tcpdump", "-r", str(pcap), "-n", bpf], capture_output=True, text=True, check=False)
    return [line for line in out.stdout.splitlines() if line.strip()]


def assert_wan_encrypted(lab: Lab, encrypted_bpf: str) -> None:
    """Traffic carrying MARKER crosses the WAN only as ESP; the marker never appears there."""
    with capture(lab) as pcap:
        sent, received = ping(lab, count=10, interval=0.05, pattern=MARKER[:16], size=200)
    assert received == sent, f"tunnel lost traffic: {received}/{sent}"
    raw = pcap.read_bytes()
    assert MARKER[:16] not in raw, "plaintext marker seen on the WAN"
    ip_lines = summarize(pcap, "ip")
    esp_lines = summarize(pcap, encrypted_bpf)
    assert len(esp_lines) >= 2 * sent * 0.9, f"expected ESP on the WAN, saw: {ip_lines[:5]}"
    other = summarize(pcap, f"ip and not ({encrypted_bpf}) and not udp port 500")
    assert not other, f"non-ESP IP traffic on the WAN: {other[:5]}"
    assert not summarize(pcap, "icmp"), "plaintext ICMP on the WAN"


def child_spi(gw: Gateway) -> str:
    st = gw.status()
    spis = [c["spi_in"] for sa in st["sas"] for c in sa["children"] if c["state"] == "INSTALLED"]
    assert spis, st
    return spis[-1]


def assert_rekey_keeps_traffic(lab: Lab, gw: Gateway) -> None:
    before = child_spi(gw)
    p = subprocess.Popen(["ip", "netns", "exec", lab.host_ns("a"), "ping", "-n", "-q", "-c", "60", "-i", "0.05",
                          "-W", "1", lab.sites["b"].host_ip], stdout=subprocess.PIPE, text=True)
    time.sleep(1.0)
    with gw.vici() as v:
        v.rekey(child=child_name(gw.cfg))
    out, _ = p.communicate(timeout=30)
    m = re.search(r"(\d+) packets transmitted, (\d+) received", out)
    assert m, out
    sent, received = int(m.group(1)), int(m.group(2))
    after = child_spi(gw)
    assert after != before, "CHILD_SA was not rekeyed"
    assert received >= sent - 1, f"rekey interrupted traffic: {received}/{sent} received"


def read_all_knobs(gw: Gateway) -> dict[str, str | None]:
    """Every knob of the gateway profile (all groups), as the kernel reports it now."""
    from supergw_gateway.tuning.groups import GATEWAY_GROUPS
    from supergw_gateway.tuning.knobs import HANDLERS
    from supergw_gateway.tuning.lifecycle import profile_input
    from supergw_gateway.tuning.profile import build

    target = gw.tuning_target()
    knobs = build(profile_input(gw.cfg, "gateway", target, GATEWAY_GROUPS, {}, False)).knobs
    return {k.key: HANDLERS[k.kind].read(target.executor_for(k.where), k.params).value for k in knobs
            if k.where in ("here", "outer")}


def tune(cfg_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    import sys

    return subprocess.run([sys.executable, "-m", "supergw_gateway.cli", "tune", "-c", str(cfg_path), *args],
                          capture_output=True, text=True, timeout=120)


def assert_tune_roundtrip(gw: Gateway, cfg_path: Path) -> None:
    before = read_all_knobs(gw)
    dry = tune(cfg_path, "apply", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "[     change]" in dry.stdout and "[unsupported]" in dry.stdout
    assert read_all_knobs(gw) == before, "--dry-run changed something"
    ap = tune(cfg_path, "apply")
    assert ap.returncode == 0, ap.stdout + ap.stderr
    assert "[    applied]" in ap.stdout
    during = read_all_knobs(gw)
    assert during != before
    ver = tune(cfg_path, "verify")
    assert ver.returncode == 0 and "drift" not in ver.stdout.split("tune verify")[0], ver.stdout
    rv = tune(cfg_path, "revert")
    assert rv.returncode == 0, rv.stdout + rv.stderr
    assert read_all_knobs(gw) == before, "revert did not restore every value"
