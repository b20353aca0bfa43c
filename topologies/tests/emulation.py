"""What the emulation's integration tests share: their pytest marks, the CLI, booting a plan
for a test module (skipped when something runs here already; everything removed after),
waiting on a site's gateways, a packet capture for a block, and the failover allowance."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from topologies.emulation import Emulation
from topologies.network import existing_namespaces
from topologies.paths import REPO, SWITCH_BIN
from topologies.poll import Timeout
from topologies.site import Gateways, Site

# The longest silence an integration test accepts in a flow through a gateway that fails, from
# its last answer before the failure to its first answer after (bench/gaps.py): the
# controller's failover budget (3 missed 100 ms heartbeats; bench/probes.py GOAL_MS, 500 ms,
# is the goal the benchmarks measure on a quiet machine) plus the ping interval and the
# scheduling of a loaded 2-core machine; packaging/deploy_tests allows the same 2 s.
FAILOVER_GAP_S = 2.0

EMULATION_MARKS = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces and eBPF"),
    pytest.mark.skipif(not SWITCH_BIN.is_file(), reason="switch not built (make switch)"),
]


def run_topologies(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """`python -m topologies.run ARGS` (what `make run` / `make stop` run), its output captured."""
    return subprocess.run([sys.executable, "-m", "topologies.run", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout, check=False)


def skip_if_running(emu: Emulation) -> None:
    if emu.layout.state.exists() or existing_namespaces(emu.spec):
        pytest.skip("an emulation is already running here (make stop first)")


def assert_gone(emu: Emulation) -> None:
    """`down` left nothing: no namespace of the plan, no state file."""
    left = existing_namespaces(emu.spec)
    assert not left and not emu.layout.state.exists(), f"left behind: {left}, state {emu.layout.state.exists()}"


@contextmanager
def booted(emu: Emulation) -> Iterator[Emulation]:
    """`emu` up for the block (every stage ok), then down, leaving nothing behind."""
    skip_if_running(emu)
    try:
        assert emu.up(), f"stages failed: {emu.state.failed_stages()}"
        yield emu
    finally:
        emu.down(quiet=True)
    assert_gone(emu)


def until(site: Site, what: str, cond: Callable[[Gateways], bool], timeout: float) -> Gateways:
    """`site.wait_gateways`, failing the test with what the controller showed last."""
    try:
        return site.wait_gateways(cond, what, timeout)
    except Timeout as exc:
        pytest.fail(str(exc), pytrace=False)


def all_alive(gws: Gateways) -> bool:
    return all(g.state == "alive" for g in gws.values())


@contextmanager
def captured(netns: str, iface: str, pcap: Path, bpf: str) -> Iterator[None]:
    """tcpdump of `iface` in `netns` ("any": every interface there) into `pcap` for the block:
    listening before the block starts, every frame written when it ends. `--immediate-mode`:
    without it the kernel hands frames over in blocks retired after up to a second, and the
    frames of a block still open when SIGINT comes are never written."""
    with subprocess.Popen(["ip", "netns", "exec", netns, "tcpdump", "-i", iface, "-n", "-U", "--immediate-mode",
                           "-w", str(pcap), bpf],
                          stderr=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stderr is not None
            said = [proc.stderr.readline()]  # "listening on ...", after "data link type ..." with -i any
            while "listening on" not in said[-1] and said[-1]:
                said.append(proc.stderr.readline())
            assert "listening on" in said[-1], f"tcpdump in {netns} did not start: {''.join(said)}"
            yield
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=10)


_SUMMARY = re.compile(r"(\d+) packets transmitted, (\d+) received")


def ping_counts(out: str) -> tuple[int, int]:
    """(transmitted, received) from ping's summary line."""
    m = _SUMMARY.search(out)
    assert m, f"ping output not understood: {out[-300:]!r}"
    return int(m.group(1)), int(m.group(2))
