"""A flood of forged, malformed, replayed and unknown heartbeats on a real UDP socket does
not delay a real gateway's verdict: it stays alive while it beats, and is judged dead on
time when it stops.

What is timed: from the moment the real gateway's sender thread sent its last beat to the
moment the controller's gateway state reads "dead" (polled every 5 ms). The bound is
dead-after (interval x misses) plus SLACK_S: one watchdog tick (interval / 5), the poll,
and the scheduling delays of a loaded two-core machine. A verdict earlier than dead-after
would be a false death and fails too.

The flood comes from another process, so it competes for the CPU as an attacker's would,
from three sources: 127.0.0.2 and 127.0.0.3 (addresses that never sent a valid beat:
rate-limited after their burst) and 127.0.0.1, the real gateway's own address (what a
spoofer of its address would send: every datagram costs an HMAC, none is refused unread).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from supergw_controller.compose import ControllerCore
from supergw_proto.beats import encode

from corekit import make_config, running_core

KEYS = {"g1": b"unit-agent-g1-token", "g2": b"unit-agent-g2-token"}
INTERVAL_S = 0.1
MISSES = 3
DEAD_AFTER_S = INTERVAL_S * MISSES
SLACK_S = 0.2
FLOOD_RATE = 20_000  # datagrams per second the flooder aims at (it reports what it sent)

FLOODER = r"""
import json, socket, sys, time
port, rate, duration, replay = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), bytes.fromhex(sys.argv[4])
sys.path[:0] = sys.argv[5:]
from supergw_proto.beats import encode
socks = []
for ip in ("127.0.0.2", "127.0.0.3", "127.0.0.1"):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((ip, 0))
    socks.append(s)
now = time.time_ns()
kinds = [
    encode("g1", b"guessed-secret-000000", 9, 1, now, interval_ms=100),   # forged HMAC
    encode("g2", b"guessed-secret-000000", 9, 1, now, interval_ms=100),
    encode("nobody", b"guessed-secret-000000", 9, 1, now),                # unknown gateway
    b"SGHB" + bytes(40),                                                  # malformed
    replay,                                                               # a real beat, again
]
sent, t0, i, told = 0, time.monotonic(), 0, 0.0
print("ready", flush=True)
while (elapsed := time.monotonic() - t0) < duration:
    if elapsed - told >= 0.25:  # progress: the test kills this process when it has seen enough
        told = elapsed
        print(json.dumps({"sent": sent, "seconds": elapsed}), flush=True)
    if sent > elapsed * rate:
        time.sleep(0.0005)
        continue
    for _ in range(100):
        try:
            socks[i % 3].sendto(kinds[i % 5], ("127.0.0.1", port))
            sent += 1
        except OSError:
            pass
        i += 1
"""


def _free_udp_tcp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RealAgents:
    """g1's and g2's agents: one thread that beats every INTERVAL_S from 127.0.0.1; `stop_g1`
    silences g1 only and says when its last beat left."""

    def __init__(self, port: int) -> None:
        self.addr = ("127.0.0.1", port)
        self.g1 = threading.Event()
        self.g1.set()
        self.stop = threading.Event()
        self.last_g1 = 0.0
        self.epoch = time.time_ns()
        self.seq = 0
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.thread = threading.Thread(target=self._run, daemon=True)

    def datagram(self, name: str) -> bytes:
        self.seq += 1
        return encode(name, KEYS[name], self.epoch, self.seq, time.time_ns(), interval_ms=int(INTERVAL_S * 1000))

    def _run(self) -> None:
        planned = time.monotonic()
        while not self.stop.is_set():
            if self.g1.is_set():
                self.sock.sendto(self.datagram("g1"), self.addr)
                self.last_g1 = time.monotonic()
            self.sock.sendto(self.datagram("g2"), self.addr)
            planned += INTERVAL_S
            self.stop.wait(max(0.0, planned - time.monotonic()))

    def stop_g1(self) -> float:
        self.g1.clear()
        time.sleep(INTERVAL_S * 1.5)  # the thread is past its last g1 beat
        return self.last_g1


@contextlib.contextmanager
def flooding(port: int, seconds: float, replay: bytes) -> Iterator[subprocess.Popen[str]]:
    here = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(
        [sys.executable, "-c", FLOODER, str(port), str(FLOOD_RATE), str(seconds), replay.hex(), str(here / "proto")],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        yield proc
    finally:
        proc.kill()
        proc.wait()


async def _states(core: ControllerCore) -> dict[str, str]:
    return {g.name: g.state for g in await core.gateways()}


async def test_a_flood_delays_neither_a_real_gateways_life_nor_its_death(tmp_path: Path) -> None:
    port = _free_udp_tcp_port()
    cfg = make_config(
        tmp_path,
        timing={"heartbeat_interval_ms": int(INTERVAL_S * 1000), "missed_heartbeats": MISSES, "startup_grace_s": 0.3},
        api={"token": "unit-test-token", "listen": f"127.0.0.1:{port}"},
    )
    core, _ = await running_core(cfg, time.monotonic)
    live = asyncio.create_task(core.liveness.run(udp=True))
    agents = RealAgents(port)
    try:
        await asyncio.sleep(0.05)
        agents.thread.start()
        await asyncio.sleep(0.5)
        assert (await _states(core))["g1"] == "alive"
        flood_s = 3.0
        with flooding(port, flood_s + 2.0, agents.datagram("g1")) as proc:
            # 1. Under the flood, neither real gateway is ever judged anything but alive.
            t_end = time.monotonic() + flood_s
            while time.monotonic() < t_end:
                states = await _states(core)
                assert states["g1"] == "alive" and states["g2"] == "alive", f"false verdict under the flood: {states}"
                await asyncio.sleep(0.005)
            # 2. g1 stops; the flood goes on. Dead within dead-after + slack of its last beat.
            last = await asyncio.to_thread(agents.stop_g1)
            while (await _states(core))["g1"] == "alive":
                assert time.monotonic() - last < DEAD_AFTER_S + 2.0, "g1 never judged dead"
                await asyncio.sleep(0.005)
            verdict = time.monotonic() - last
            assert (await _states(core))["g2"] == "alive"
            proc.kill()
            out, _ = proc.communicate()
        rejected = dict(core.liveness.receiver.rejected)
        st = await core.status()
    finally:
        agents.stop.set()
        live.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await live
    assert DEAD_AFTER_S * 0.9 <= verdict <= DEAD_AFTER_S + SLACK_S, (
        f"g1 judged dead {verdict * 1000:.0f} ms after its last beat; bound {DEAD_AFTER_S * 1000:.0f} ms "
        f"+ {SLACK_S * 1000:.0f} ms slack (refused: {rejected})"
    )
    total = sum(rejected.values())
    # The flood was real: thousands per second, every kind counted under its reason, and the
    # status the REST API shows says the same.
    assert total >= 5_000 * flood_s, f"only {total} datagrams refused in {flood_s}s: not a flood {rejected}"
    assert {"rate_limited", "bad_mac", "malformed", "unknown_gateway", "replayed"} <= set(rejected), rejected
    assert st.heartbeats_rejected.keys() == rejected.keys()
    flood = json.loads(out.strip().splitlines()[-1])
    rate = flood["sent"] / flood["seconds"]
    assert rate >= 5_000, f"the flooder sent only {rate:.0f} datagrams/s"
    print(f"flood {rate:.0f}/s, refused {rejected}, silence verdicts deferred "
          f"{core.liveness.silence_verdicts_deferred}, g1 dead {verdict * 1000:.0f} ms after its last beat")


@pytest.fixture(autouse=True)
def _loopback_aliases() -> None:
    """127.0.0.2 and .3 are the flooder's other sources (all of 127/8 is local on Linux)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.bind(("127.0.0.2", 0))
        except OSError as exc:
            pytest.skip(f"cannot send from 127.0.0.2 on this host ({exc}): the flood needs other sources than 127.0.0.1")
