"""Controller restarts and primary/backup takeover lose no traffic.

A host pings the remote site every 10 ms (ping's sequence numbers count every loss)
while the controller restarts, or while the primary controller is killed and the
backup (lower election id) takes over.
"""

from __future__ import annotations

import re
import signal
import subprocess
import time

import pytest

from sgwctl_harness import Controller, Heartbeats, Setup, TopologySpec
from sgwctl_topo import REMOTE_IP, Endpoint
from supergw_proto.bucket import bucket_of
from supergw_proto.rest import ApiError

K = 16
TOPOLOGY = TopologySpec(tag="r", index=2, hosts=2, gateways=2)


class PingStream:
    """`ping -i 0.01` from a host namespace for at least `seconds`; `result()` is
    (transmitted, received).

    A count, not a deadline (`-w`): at its deadline ping exits at once and counts the echo
    still in flight as lost, which on BMv2 (a few ms per round trip) happens often enough
    to fail a zero-loss assertion for a loss that never happened. With `-c` it waits up
    to `-W` for the last replies."""

    def __init__(self, host: Endpoint, seconds: float) -> None:
        count = str(int(seconds * 100))
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", host.ns, "ping", "-n", "-q", "-i", "0.01", "-c", count, "-W", "2", REMOTE_IP],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def result(self) -> tuple[int, int]:
        out, _ = self.proc.communicate(timeout=60)
        m = re.search(r"(\d+) packets transmitted, (\d+) received", out)
        assert m, out
        return int(m.group(1)), int(m.group(2))


def reconcile_line(c: Controller) -> str:
    lines = [ln for ln in c.log_path.read_text().splitlines() if 'msg="reconciled:' in ln]
    return lines[-1] if lines else ""


def test_controller_restart_loses_nothing(setup: Setup) -> None:
    c = setup.controller("r-ctl", api_port=18721)
    h = setup.topo.endpoints["h1"]
    with Heartbeats([c], ["g1", "g2"]):
        c.start()
        assert h.ping(REMOTE_IP, count=3, interval=0.1)[1] == 3  # learned, ARP resolved
        before = c.bucket_of_gateway()
        stream = PingStream(h, seconds=6)
        time.sleep(1.0)
        c.stop(signal.SIGTERM)
        time.sleep(0.5)  # the switch runs alone for a while
        c.start()
        sent, got = stream.result()
        after = c.bucket_of_gateway()
        hosts = {x.mac for x in c.client.hosts()}
    c.stop()
    assert sent >= 200 and got == sent, f"lost {sent - got} of {sent} packets across a controller restart"
    assert after == before, "a restart must not move buckets"
    assert h.mac in hosts, "hosts learned before the restart are adopted from the switch"
    assert "reconciled: 0 updates, settings unchanged" in reconcile_line(c), reconcile_line(c)


def test_backup_takes_over_within_a_second(setup: Setup) -> None:
    primary = setup.controller("r-primary", election_low=20, api_port=18722)
    backup = setup.controller("r-backup", election_low=10, api_port=18723)
    h = setup.topo.endpoints["h2"]
    with Heartbeats([primary, backup], ["g1", "g2"]):
        primary.start("primary")
        backup.start("backup")
        assert h.ping(REMOTE_IP, count=3, interval=0.1)[1] == 3
        with pytest.raises(ApiError) as refused:
            backup.client.rebalance()
        assert refused.value.status == 503, "a backup must refuse writes"
        time.sleep(0.6)  # the backup mirrors the switch's tables every counter poll
        assert backup.bucket_of_gateway() == primary.bucket_of_gateway()
        assert h.mac in {x.mac for x in backup.client.hosts()}
        stream = PingStream(h, seconds=4)
        time.sleep(1.0)
        killed_at = time.time()
        primary.stop(signal.SIGKILL)
        backup.wait_role("primary", timeout=10)
        # From the backup's own log, not from polling its REST API (slow under load).
        promoted_at = backup.log_time_of("switch role backup -> primary", after=killed_at - 0.01)
        assert promoted_at is not None, backup.log_tail()
        took = promoted_at - killed_at
        b = bucket_of(h.mac, K)
        other = "g2" if backup.client.bucket(b).gateway == "g1" else "g1"
        rx_before = setup.topo.endpoints[other].rx_packets()
        moved = backup.client.move(b, other)
        sent, got = stream.result()
        rx_after = setup.topo.endpoints[other].rx_packets()
    backup.stop()
    assert took < 1.0, f"backup became primary after {took:.2f}s"
    assert moved.gateway == other
    assert rx_after - rx_before > 50, "after the takeover, the new primary's write steers traffic"
    assert got == sent, f"lost {sent - got} of {sent} packets across the takeover"


def test_switch_restart_is_reconnected_and_reconciled(setup: Setup) -> None:
    c = setup.controller("r-sw", api_port=18724)
    h = setup.topo.endpoints["h1"]
    with Heartbeats([c], ["g1", "g2"]):
        c.start()
        assert h.ping(REMOTE_IP, count=2, interval=0.1)[1] == 2
        before = c.bucket_of_gateway()
        # finsy waits 10 s before reconnecting a switch that failed within 2 s of the session's
        # start (a crash-looping switch); this test is about a restart of a switch that served.
        time.sleep(2.0)
        setup.topo.stop_switch()
        c.wait_role("disconnected", timeout=5)
        setup.topo.start_switch()
        took = c.wait_role("primary", timeout=20)
        after = c.bucket_of_gateway()
        hosts_after = c.client.hosts()
        sent, got = h.ping(REMOTE_IP, count=5, interval=0.1)
    c.stop()
    assert took < 10, f"reconnect took {took:.1f}s"
    assert after == before, "the controller re-installs the same assignment on a fresh switch"
    assert h.mac in {x.mac for x in hosts_after}, "known hosts are re-installed on a fresh switch"
    assert got == sent == 5


def test_switch_restart_adopts_its_dataplane_and_loses_nothing(setup: Setup) -> None:
    """supergw-switch restarted (SIGTERM and a new one, as systemctl restart): the new one
    adopts the running data plane and its P4Runtime state, the controller's session
    reconnects, finds its cookie and entries and writes nothing, no bucket moves, and a 10 ms
    ping across it loses nothing."""
    if setup.topo.switch != "ebpf":
        pytest.skip("a BMv2 restart starts empty (the eBPF target alone keeps its data plane)")
    c = setup.controller("r-swa", api_port=18725)
    h = setup.topo.endpoints["h2"]
    with Heartbeats([c], ["g1", "g2"]):
        c.start()
        assert h.ping(REMOTE_IP, count=3, interval=0.1)[1] == 3
        before = c.bucket_of_gateway()
        moves_before = sum(c.client.status().moves_total.values())
        stream = PingStream(h, seconds=5)
        time.sleep(1.0)
        setup.topo.stop_switch(keep_dataplane=True)
        c.wait_role("disconnected", timeout=5)
        setup.topo.start_switch()
        c.wait_role("primary", timeout=20)
        sent, got = stream.result()
        after = c.bucket_of_gateway()
        moves_after = sum(c.client.status().moves_total.values())
    c.stop()
    assert sent >= 400 and got == sent, f"lost {sent - got} of {sent} packets across a switch restart"
    assert after == before and moves_after == moves_before, "a switch restart must not move buckets"
    assert "reconciled: 0 updates, settings unchanged" in reconcile_line(c), reconcile_line(c)
