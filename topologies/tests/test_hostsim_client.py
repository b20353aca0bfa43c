"""hostsim_client without root: its protocol handling against a unix socket that answers as
supergw-hostsim does, `run_loss`, the command line the topology builds, and the model's checks
of `simulated_hosts`."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from topologies import simhosts
from topologies.hostsim_client import HostsimClient, HostsimError, HostsimProcess, run_loss
from topologies.model import SimulatedHostsSpec
from topologies.paths import RunLayout
from topologies.schema import TWO_SITE_PAPER_TOPOLOGY, TWO_SITE_TOPOLOGY, load


def _serve(path: Path, answers: list[bytes]) -> tuple[threading.Thread, list[dict[str, Any]]]:
    """Answer one connection per canned answer; record the requests."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen()
    seen: list[dict[str, Any]] = []

    def loop() -> None:
        with srv:
            for answer in answers:
                conn, _ = srv.accept()
                with conn:
                    seen.append(json.loads(conn.makefile("rb").readline()))
                    conn.sendall(answer)

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    return t, seen


@pytest.fixture
def sock(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "h.sock"


def test_requests_are_json_lines_and_errors_carry_the_programs_reason(sock: Path) -> None:
    t, seen = _serve(sock, [b'{"ok": true, "run": 3, "flows": 2}\n',
                            b'{"ok": false, "error": "rate_pps 0 is outside (0, 10e6]"}\n',
                            b"not json\n", b""])
    c = HostsimClient(sock, timeout=2)
    assert c.start(rate_pps=10, frame_bytes=64, duration_s=1, destinations=["10.61.0.100"])["run"] == 3
    with pytest.raises(HostsimError, match=r"hostsim start: rate_pps 0 is outside"):
        c.start(rate_pps=0, frame_bytes=64, duration_s=1, destinations=["10.61.0.100"])
    with pytest.raises(HostsimError, match="not JSON"):
        c.status()
    with pytest.raises(HostsimError, match="closed without an answer"):
        c.status()
    t.join(2)
    assert seen[0] == {"cmd": "start", "rate_pps": 10, "frame_bytes": 64, "duration_s": 1,
                       "destinations": ["10.61.0.100"], "mode": "pairs", "dst_port": 5001}


def test_a_missing_program_is_named(sock: Path) -> None:
    with pytest.raises(HostsimError, match="no hostsim control socket"):
        HostsimClient(sock).status()
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(sock))
    dead.close()  # the file stays, nobody listens
    with pytest.raises(HostsimError, match="nobody listens"):
        HostsimClient(sock).status()


def test_wait_ready_names_the_unresolved_hosts(sock: Path) -> None:
    status = b'{"ok": true, "hosts": 2, "resolved": 1, "ready": false, "run": {"state": "idle"}}\n'
    hosts = (b'{"ok": true, "totals": {}, "run": {}, "hosts": [{"ip": "10.60.0.100", "gateway_mac": "02:5e:60:00:00:01"},'
             b' {"ip": "10.60.0.101", "gateway_mac": null}]}\n')
    _serve(sock, [status, status, hosts])
    with pytest.raises(HostsimError, match=r"1 of 2 simulated hosts did not resolve IP_G .*10\.60\.0\.101"):
        HostsimClient(sock).wait_ready(timeout=0.1)


def test_wait_ready_names_the_hosts_without_the_gateways_ipv6_address(sock: Path) -> None:
    status = b'{"ok": true, "hosts": 2, "resolved": 2, "resolved6": 1, "ready": false, "run": {"state": "idle"}}\n'
    hosts = (b'{"ok": true, "totals": {}, "run": {}, "hosts": [{"ip": "10.60.0.100", "gateway_mac": "02:5e:60:00:00:01",'
             b' "ip6": "fd00:60::64", "gateway_mac6": "02:5e:60:00:00:01"}, {"ip": "10.60.0.101", "gateway_mac":'
             b' "02:5e:60:00:00:02", "ip6": "fd00:60::65", "gateway_mac6": null}]}\n')
    _serve(sock, [status, status, hosts])
    with pytest.raises(HostsimError, match=r"1 of 2 simulated hosts did not resolve the gateway's IPv6 address .*fd00:60::65"):
        HostsimClient(sock).wait_ready(timeout=0.1)


def _flows(run: int, tx: list[tuple[str, int]], rx: list[tuple[str, int, int]]) -> tuple[dict[str, Any], dict[str, Any]]:
    t = {"run": {"id": run}, "flows_tx": [{"flow": i, "src": "a", "dst": d, "sent": n} for i, (d, n) in enumerate(tx)]}
    r = {"flows_rx": [{"flow": i, "src": "a", "dst": d, "run": run, "received": n, "duplicates": dup, "max_gap_ms": 1.5 * i}
                      for i, (d, n, dup) in enumerate(rx)]
         + [{"flow": 0, "src": "a", "dst": "x", "run": run - 1, "received": 999, "duplicates": 0, "max_gap_ms": 99.0}]}
    return t, r


def test_run_loss_compares_what_was_sent_with_what_arrived_of_the_same_run() -> None:
    tx, rx = _flows(2, [("x", 100), ("y", 50), ("z", 10)], [("x", 100, 0), ("y", 47, 2)])
    loss = run_loss(tx, rx)
    # y: 47 received of which 2 duplicates -> 5 lost; z: nothing arrived -> 10 lost; run 1 ignored
    assert (loss.sent, loss.received, loss.lost) == (160, 145, 15)
    assert loss.loss_ratio == pytest.approx(15 / 160)
    assert run_loss({"run": {"id": 1}, "flows_tx": []}, {"flows_rx": []}).loss_ratio == 0.0


def test_the_topology_starts_hostsim_with_the_sites_ranges(tmp_path: Path) -> None:
    a, b = load(TWO_SITE_PAPER_TOPOLOGY).sites
    argv = simhosts.argv(a, tmp_path / "s.sock")
    assert argv[argv.index("--first-ip") + 1] == "192.168.203.24"
    assert argv[argv.index("--first-mac") + 1] == "00:00:03:00:18:00"
    assert argv[argv.index("--mac-step") + 1] == "256"
    assert argv[argv.index("--count") + 1] == "224" and argv[argv.index("--gateway-ip") + 1] == "192.168.203.1"
    assert argv[argv.index("--iface") + 1] == "hsim0"
    assert HostsimProcess.argv("x", tmp_path, "1.1.1.1", "1.1.1.2", "00:00:00:00:00:01", 1, netns="n")[:4] == \
        ["ip", "netns", "exec", "n"]
    assert RunLayout(Path("/r")).site(b.prefix, several=True).hostsim_socket == Path("/r/sgw-b/hostsim.sock")
    assert "--gateway-ip6" not in argv and not a.dual_stack  # the paper's LANs are IPv4 only
    # vmac(bucket(mac)) with the site's identity hash and K = 4096: mac & 0xfff
    assert simhosts.expected_gateway_mac(a, "00:00:03:00:18:00") == "02:88:88:88:08:00"
    assert simhosts.expected_gateway_mac(b, "00:00:04:00:f7:00") == "02:88:88:88:07:00"


@pytest.mark.parametrize("bad", [
    {"count": 0, "port": 1, "first_ip": "10.0.0.2", "first_mac": "02:00:00:00:00:01"},
    {"count": 1, "port": 1, "first_ip": "10.0.0.2", "first_mac": "01:00:00:00:00:01"},
    {"count": 1, "port": 1, "first_ip": "nope", "first_mac": "02:00:00:00:00:01"},
    {"count": 1, "port": -1, "first_ip": "10.0.0.2", "first_mac": "02:00:00:00:00:01"},
])
def test_simulated_hosts_spec_refuses_bad_values(bad: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        SimulatedHostsSpec.model_validate(bad)


def test_the_site_refuses_simulated_hosts_overlapping_its_hosts(tmp_path: Path) -> None:
    from topologies.model import Topology

    a, _b = load(TWO_SITE_TOPOLOGY).sites
    data = a.model_dump(mode="json")
    data["simulated_hosts"] = {"count": 4, "port": 200, "first_ip": str(a.hosts[0].ip), "first_mac": "02:77:00:00:00:01"}
    with pytest.raises(ValidationError, match="overlaps a host"):
        Topology.model_validate(data)
    data["simulated_hosts"] = {"count": 200, "port": 200, "first_ip": "10.60.0.100", "first_mac": "02:77:00:00:00:01"}
    with pytest.raises(ValidationError, match="runs past the LAN subnet"):
        Topology.model_validate(data)
    data["simulated_hosts"] = {"count": 4, "port": a.gateways[0].port, "first_ip": "10.60.0.100",
                               "first_mac": "02:77:00:00:00:01"}
    with pytest.raises(ValidationError, match="switch ports used twice"):
        Topology.model_validate(data)


def test_a_dual_stack_site_starts_hostsim_with_the_twins_of_its_addresses(tmp_path: Path) -> None:
    a, b = load(TWO_SITE_TOPOLOGY).sites
    sim = a.simulated_hosts
    assert sim is not None and a.dual_stack
    argv = simhosts.argv(a, tmp_path / "s.sock")
    # the router's link-local address (the RAs' source), host 0's IPv4 address's twin
    assert argv[argv.index("--gateway-ip6") + 1] == "fe80::1"
    assert argv[argv.index("--first-ip6") + 1] == str(a.lan6(sim.first_ip)) == "fd00:60::64"
    six = simhosts.ip6s(b)
    assert six[0] == b.lan6(b.simulated_hosts.ips()[0]) and six[1] == six[0] + 1  # type: ignore[union-attr]
