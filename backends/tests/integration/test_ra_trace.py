"""The analyser on a trace recorded from real charon sessions.

A gateway without a cache (every connection a full exchange) and its session recorder
(`ClientMonitor`: VICI events and polls, as the agent runs it); alice connects three times
(traffic only in the first connection), bob once. The session log and the gateway's charon
log must both give back those four connections, and the analyser the answers worked out below.
"""

from __future__ import annotations

import ipaddress
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from supergw_gateway.ra import gateway as ra_gateway
from supergw_gateway.ra.client import RemoteClient
from supergw_gateway.ra.ikecache import needed, read_charon_log, read_session_log
from supergw_gateway.ra.ikecache_cli import main as ike_cache
from supergw_gateway.ra.lab import LabGateway, RaLab
from supergw_gateway.ra.sessions import ClientMonitor, monitor_for
from supergw_gateway.runtime import Gateway
from tests.integration.conftest import require_root_strongswan

pytestmark = pytest.mark.integration

PINGS, SIZE = 10, 1000


@pytest.fixture(scope="module")
def recorded() -> Iterator[tuple[Gateway, Path]]:
    require_root_strongswan()
    lab = RaLab("rt", [LabGateway(ipaddress.IPv4Address("203.0.113.5"))], clients=2, state_dir=Path("/run/sgw-ra-rt"))
    lab.create()
    gw = Gateway(lab.gateway_config(0), print)
    clients: list[RemoteClient] = []
    monitor: ClientMonitor | None = None
    stop = threading.Event()
    try:
        log = gw.cfg.run_dir / "ra-sessions.jsonl"
        for old in (log, gw.cfg.run_dir / "charon.log"):  # charon appends: start from an empty log
            old.unlink(missing_ok=True)
        gw.up()
        monitor = monitor_for(gw.cfg, gw.connect)
        monitor.start()

        def poll_every_300ms(m: ClientMonitor) -> None:  # as the agent does every report period
            while not stop.wait(0.3):
                m.poll()

        poller = threading.Thread(target=poll_every_300ms, args=(monitor,))
        poller.start()
        time.sleep(0.5)  # the event session is registered
        alice, bob = (RemoteClient(lab.client_config(i, 0)) for i in range(2))
        clients += [alice, bob]
        for c in clients:
            c.start()
        for n in range(3):
            alice.connect()
            if n == 0:
                assert alice.ping(lab.host_ip(0), count=PINGS, interval=0.05, size=SIZE)[1] == PINGS
            time.sleep(0.5)
            alice.disconnect()
            time.sleep(1.0)
        bob.connect()
        time.sleep(0.5)
        bob.disconnect()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(log.read_text().splitlines() if log.exists() else []) < 4:
            time.sleep(0.2)
        stop.set()
        poller.join(5)
        yield gw, log
    finally:
        stop.set()
        if monitor is not None:
            monitor.stop()
        for c in clients:
            c.stop()
        gw.down()
        lab.destroy()


def test_session_log_of_real_sessions(recorded: tuple[Gateway, Path]) -> None:
    gw, log = recorded
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(records) == 4, records
    assert [r["identity"] for r in records] == ["rt-c0.sgw.test"] * 3 + ["rt-c1.sgw.test"]
    assert all(r["end_reason"] == "deleted" and r["full_exchange"] for r in records)
    assert all(0.3 <= r["ended_at"] - r["established_at"] <= 5 for r in records)
    first = records[0]
    # ESP payload both ways: PINGS echo requests and replies of SIZE + 28 bytes each.
    assert first["bytes_in"] >= PINGS * (SIZE + 28) and first["bytes_out"] >= PINGS * (SIZE + 28)
    assert all(r["bytes_in"] == r["bytes_out"] == 0 for r in records[1:])
    assert int(first["responder_spi"], 16) >> 56 == 1  # gateway 0's IKE SPI label


def test_analyser_on_the_recorded_trace(recorded: tuple[Gateway, Path], tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    gw, log = recorded
    conns = read_session_log(log)
    # Actual: 4 full exchanges (every connection; the gateway caches nothing).
    # clocked/established 1h: alice 3 connections within seconds -> 1, bob 1 -> 2 needed.
    # clocked 1ms: no connection starts within 1 ms of the last exchange -> 4.
    # data 1 byte: alice's 1st connection carried traffic -> her 2nd needs an exchange; it carried
    #   none (0 < 1) -> her 3rd resumes; bob 1 -> 3.  data 1 GB: 2.
    assert sum(c.full_exchange for c in conns) == 4
    assert needed(conns, "clocked", 3600) == 2 and needed(conns, "established", 3600) == 2
    assert needed(conns, "clocked", 0.001) == 4
    assert needed(conns, "data", 1) == 3 and needed(conns, "data", 10**9) == 2
    png = tmp_path / "fig6.png"
    assert ike_cache([str(log), "--json", "--lifetimes", "1h", "--data-lifetimes", "1,1G", "--png", str(png)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["actual"] == 4 and doc["time"][0]["clocked"] == 2
    assert [d["data"] for d in doc["data"]] == [3, 2]
    assert png.read_bytes()[:4] == b"\x89PNG"
    # The gateway's own charon log tells the same story (no byte counts for the data strategy).
    from_log = read_charon_log(gw.cfg.run_dir / "charon.log", conn=ra_gateway.conn_name(gw.cfg))
    assert sorted(c.client for c in from_log) == sorted(c.client for c in conns)
    assert needed(from_log, "clocked", 3600) == 2 and needed(from_log, "clocked", 0.001) == 4
