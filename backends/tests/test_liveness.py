"""The agent's liveness frames (`supergw_gateway.liveness`): when a frame may go, and the
real sender process on `lo` (root: a packet socket): its cadence and priority, silence while
charon is stopped or the gateway may not serve, frames again after, its end with its stdin."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from supergw_proto import p4constants as pc
from supergw_proto.liveness import decode
from supergw_gateway.liveness import LivenessSender, Orders, frame_due


def fake_proc(tmp_path: Path, states: dict[int, str]) -> Path:
    for pid, state in states.items():
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "stat").write_text(f"{pid} (some name) with) {state} 1 2 3\n")
    return tmp_path


@pytest.mark.parametrize(
    ("orders", "states", "due"),
    [
        (Orders(5000, 20), {10: "S", 20: "R"}, True),
        (Orders(5000, None), {10: "S"}, True),  # charon's pid not known yet: the agent alone decides
        (Orders(5000, 20), {10: "T", 20: "S"}, False),  # the agent is stopped
        (Orders(5000, 20), {10: "S", 20: "T"}, False),  # charon is stopped
        (Orders(5000, 20), {10: "S", 20: "Z"}, False),  # charon is a zombie
        (Orders(5000, 20), {10: "S"}, False),  # charon is gone
        (Orders(5000, 20, serving=False), {10: "S", 20: "S"}, False),  # partner down
        (Orders(0, 20), {10: "S", 20: "S"}, False),  # frames off
    ],
)
def test_frame_due(tmp_path: Path, orders: Orders, states: dict[int, str], due: bool) -> None:
    assert frame_due(orders, 10, fake_proc(tmp_path, states)) is due


def _capture(sock: socket.socket, seconds: float) -> list[tuple[float, int]]:
    """(arrival, seq) of every liveness frame seen on lo for `seconds`."""
    out: list[tuple[float, int]] = []
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            data = sock.recv(2048)
        except TimeoutError:
            break
        if len(data) >= 14 and int.from_bytes(data[12:14], "big") == pc.ETHERTYPE_LIVENESS:
            f = decode(data)
            if f.gateway == "lo-test":
                out.append((time.monotonic(), f.seq))
    return out


def _drain(sock: socket.socket) -> None:
    """Drop what the socket queued so far: frames sent before a change took effect (the
    sender checks, then sends; a stop may land between) are not frames after it."""
    sock.setblocking(False)
    try:
        while True:
            sock.recv(2048)
    except BlockingIOError:
        pass
    finally:
        sock.setblocking(True)


@pytest.mark.skipif(os.geteuid() != 0, reason="a packet socket needs root")
def test_the_sender_process_on_lo() -> None:
    sniff = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(pc.ETHERTYPE_LIVENESS))
    sniff.bind(("lo", 0))
    charon = subprocess.Popen(["sleep", "60"])
    sender = LivenessSender("lo", "lo-test", 5)
    try:
        sender.update(charon_pid=charon.pid)
        sender.start()
        got = _capture(sniff, 0.5)
        assert 60 <= len(got) <= 110, f"{len(got)} frames in 0.5 s at 5 ms"
        gaps = [b[0] - a[0] for a, b in zip(got, got[1:])]
        assert max(gaps) < 0.05, f"longest gap {max(gaps) * 1000:.1f} ms"
        assert [s for _, s in got] == list(range(got[0][1], got[0][1] + len(got))), "sequence numbers in order"
        assert sender.status.priority.startswith("SCHED_FIFO"), sender.status.priority

        os.kill(charon.pid, signal.SIGSTOP)
        time.sleep(0.02)
        _drain(sniff)
        assert _capture(sniff, 0.3) == [], "frames while charon is stopped"
        os.kill(charon.pid, signal.SIGCONT)
        assert len(_capture(sniff, 0.2)) >= 20

        sender.update(serving=False)
        time.sleep(0.02)
        _drain(sniff)
        assert _capture(sniff, 0.2) == [], "frames while the gateway may not serve"
        sender.update(serving=True, interval_ms=10)
        assert 10 <= len(_capture(sniff, 0.3)) <= 40, "the new interval"
    finally:
        proc = sender._proc
        sender.stop()
        charon.kill()
        charon.wait()
        sniff.close()
    assert proc is not None and proc.poll() is not None, "the sender ends when the agent closes its orders"


def _children(pid: int) -> list[int]:
    tasks = Path(f"/proc/{pid}/task")
    kids: list[int] = []
    for task in tasks.iterdir() if tasks.exists() else ():
        kids += [int(k) for k in (task / "children").read_text().split()]
    return kids


@pytest.mark.skipif(os.geteuid() != 0, reason="a packet socket needs root")
def test_sigterm_stops_the_agent_and_reaps_its_sender(gw_dict: dict[str, Any], tmp_path: Path) -> None:
    """systemd's stop (SIGTERM to the agent): the agent stops its liveness sender, reaps it and
    exits 0. Killed at once instead, it left the sender to PID 1, and systemd on cgroup v1 in a
    container waited out the unit's TimeoutStopSec (the deploy test's gateway machines)."""
    gw_dict["interfaces"][0]["device"] = "lo"
    gw_dict["controller"] = {"url": "http://127.0.0.1:9", "token": "agent-test-token"}
    gw_dict["state_dir"] = str(tmp_path / "state")
    conf = tmp_path / "gw1.yaml"
    conf.write_text(yaml.safe_dump(gw_dict))
    agent = subprocess.Popen([sys.executable, "-m", "supergw_gateway.cli", "agent", "-c", str(conf)],
                             stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while not (kids := _children(agent.pid)):
            assert agent.poll() is None, f"the agent exited with {agent.returncode}: {agent.stderr.read() if agent.stderr else ''}"
            assert time.monotonic() < deadline, "the agent started no liveness sender in 20 s"
            time.sleep(0.1)
        sender = kids[0]
        agent.send_signal(signal.SIGTERM)
        code = agent.wait(10)
        assert code == 0, f"the agent ended with {code} on SIGTERM (not a clean stop)"
        assert not Path(f"/proc/{sender}").exists(), "the sender outlived the agent (left for PID 1 to reap)"
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
