"""The gateway's liveness frames: what lets the switch itself fail this gateway over within
milliseconds (docs/pipeline-contract.md, "Gateway liveness"; the frame is
`supergw_proto.liveness`).

Why the agent's frame and not one the kernel sends by itself: the kernel keeps running (and
would keep sending) when what carries the traffic has stopped: with strongSwan's
kernel-libipsec, ESP is charon's, and a frozen or dead charon carries nothing while the
kernel is fine. So the frame says what the UDP heartbeat says, faster: this gateway's agent
runs, its charon runs (not stopped, not gone) and its partner site is not down. (Linux has
no periodic frame of its own at millisecond intervals either: no BFD, and pktgen is a module
this kernel does not load.)

A slow gateway must not look dead: the frames come from a small process of their own
(`python -m supergw_gateway.liveness`), not from the agent's threads, so neither the agent's
event loop nor Python's GIL stands between two frames. It runs under SCHED_FIFO, so CPU
saturated by IPsec (charon's threads, softirq work for a burst) cannot delay it beyond a
scheduler tick, and it is not in the gateway's CPU cgroup, so a CPU quota that throttles
charon never throttles it. Its frames leave with SO_PRIORITY TC_PRIO_CONTROL and bypass the
qdisc (PACKET_QDISC_BYPASS), so they never wait behind the gateway's own queued traffic. What
it could not get (SCHED_FIFO refused: a cgroup without real-time runtime) it says at start, and
the agent's /health shows it.

The sender checks the agent (its parent) and charon in /proc before every frame: a stopped
agent (SIGSTOP) or a stopped or gone charon sends nothing, so the switch's verdict follows
the controller's. The agent tells it the interval, charon's pid and whether the gateway may
serve (not when its partner is down) as JSON lines on its stdin; it dies with the agent
(PR_SET_PDEATHSIG, and its stdin closing).
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

from supergw_proto.liveness import encode

from supergw_gateway.beacon import process_running

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1
_SOL_PACKET = 263
_PACKET_QDISC_BYPASS = 20
_TC_PRIO_CONTROL = 7
FIFO_PRIORITY = 10  # low among real-time tasks: above every ordinary task, below the kernel's own
_REPORT_ERRORS_EVERY_S = 10.0


@dataclass
class Orders:
    """What the agent tells the sender (one JSON object per line on its stdin)."""

    interval_us: int
    charon_pid: int | None = None
    serving: bool = True

    def line(self) -> str:
        return json.dumps(asdict(self)) + "\n"


@dataclass
class SenderStatus:
    """What the sender says about itself (JSON lines on its stdout), for /health."""

    priority: str = "unknown"
    sent: int = 0
    withheld: int = 0
    errors: int = 0
    last_error: str | None = None
    exited: str | None = None


def frame_due(orders: Orders, agent_pid: int, proc: Path = Path("/proc")) -> bool:
    """Whether the next frame may go: frames on, the gateway may serve, and neither the agent
    nor charon is stopped or gone (charon only once the agent knows its pid)."""
    if not orders.interval_us or not orders.serving or not process_running(agent_pid, proc):
        return False
    return orders.charon_pid is None or process_running(orders.charon_pid, proc)


def _realtime() -> str:
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(FIFO_PRIORITY))
        return f"SCHED_FIFO {FIFO_PRIORITY}"
    except OSError as exc:
        return f"normal (SCHED_FIFO refused: {exc.strerror}; a cgroup without real-time runtime?)"


def _die_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _say(out: IO[str], **what: object) -> None:
    out.write(json.dumps(what) + "\n")
    out.flush()


def _open(ifname: str, fd: int, stdout: IO[str]) -> socket.socket | None:
    """A packet socket on `ifname`, waiting (and saying so once) while the interface does not
    exist yet; None when the agent went away meanwhile (`fd`, its orders, closed)."""
    said = False
    while True:
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
        try:
            sock.bind((ifname, 0))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_PRIORITY, _TC_PRIO_CONTROL)
            sock.setsockopt(_SOL_PACKET, _PACKET_QDISC_BYPASS, 1)
            return sock
        except OSError as exc:
            sock.close()
            if not said:
                _say(stdout, error=f"cannot send on {ifname} ({exc}); trying again every second")
                said = True
        if select.select([fd], [], [], 1.0)[0] and not os.read(fd, 4096):
            return None


def serve(ifname: str, gateway: str, agent_pid: int, stdin: IO[str], stdout: IO[str]) -> int:
    """The sender's loop: a frame every interval while `frame_due`; orders from `stdin`
    until it closes (the agent is gone)."""
    _die_with_parent()
    if os.getppid() != agent_pid:
        return 0  # the agent died before we could ask to die with it
    priority = _realtime()
    fd = stdin.fileno()
    sock = _open(ifname, fd, stdout)
    if sock is None:
        return 0
    src = sock.getsockname()[4]
    _say(stdout, priority=priority, interface=ifname, mac=src.hex(":"))
    orders = Orders(interval_us=0)
    seq = sent = withheld = errors = 0
    last_report = time.monotonic()
    next_at = time.monotonic()
    pending = b""
    while True:
        wait = max(0.0, next_at - time.monotonic()) if orders.interval_us else None
        ready, _, _ = select.select([fd], [], [], wait)
        if ready:
            # Raw reads: a buffered reader could hold a second line that select never reports.
            chunk = os.read(fd, 4096)
            if not chunk:
                return 0
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                new = Orders(**json.loads(line))
                if new.interval_us != orders.interval_us:
                    next_at = time.monotonic()
                orders = new
            continue
        now = time.monotonic()
        if frame_due(orders, agent_pid):
            seq += 1
            try:
                sock.send(encode(src, gateway, seq, orders.interval_us))
                sent += 1
            except OSError as exc:
                errors += 1
                if now - last_report >= _REPORT_ERRORS_EVERY_S:
                    _say(stdout, error=str(exc), errors=errors)
        else:
            withheld += 1
        if now - last_report >= _REPORT_ERRORS_EVERY_S:
            _say(stdout, sent=sent, withheld=withheld, errors=errors)
            last_report = now
        # A fixed cadence; after a pause (a stopped agent, a long stall) start afresh
        # rather than send the missed frames in a burst.
        next_at += orders.interval_us / 1e6
        if next_at < now:
            next_at = now + orders.interval_us / 1e6


class LivenessSender:
    """The agent's handle on the sender process: starts it, tells it what changed, reads
    what it says, stops it."""

    def __init__(self, ifname: str, gateway: str, interval_ms: int) -> None:
        self.ifname, self.gateway = ifname, gateway
        self.orders = Orders(interval_us=interval_ms * 1000)
        self.status = SenderStatus()
        self._proc: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "supergw_gateway.liveness", self.ifname, self.gateway, str(os.getpid())],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1,
        )
        threading.Thread(target=self._read, name=f"liveness-{self.gateway}", daemon=True).start()
        self._send()

    def update(self, *, interval_ms: int | None = None, charon_pid: int | None = None,
               serving: bool | None = None) -> None:
        """Change what the sender works with; only a change is sent."""
        with self._lock:
            new = Orders(
                interval_us=self.orders.interval_us if interval_ms is None else interval_ms * 1000,
                charon_pid=self.orders.charon_pid if charon_pid is None else charon_pid,
                serving=self.orders.serving if serving is None else serving,
            )
            if new == self.orders:
                return
            self.orders = new
        self._send()

    def _send(self) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None or proc.poll() is not None:
            return
        try:
            proc.stdin.write(self.orders.line())
            proc.stdin.flush()
        except OSError as exc:
            log.warning("liveness sender: %s", exc)

    def _read(self) -> None:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        for line in proc.stdout:
            try:
                said = json.loads(line)
            except ValueError:
                continue
            s = self.status
            if "priority" in said:
                s.priority = str(said["priority"])
                if not s.priority.startswith("SCHED_FIFO"):
                    log.warning("liveness frames on %s run at %s: a saturated CPU may delay them", self.ifname, s.priority)
            if "exited" in said:
                s.exited = str(said["exited"])
                log.error("liveness frames stopped: %s", s.exited)
            if "error" in said:
                s.last_error = str(said["error"])
                log.warning("liveness frame on %s: %s", self.ifname, s.last_error)
            for k in ("sent", "withheld", "errors"):
                if k in said:
                    setattr(s, k, int(said[k]))
        code = proc.wait()
        if self._proc is None:
            return  # stopped by the agent (stop), not a failure
        if self.status.exited is None and code != 0:
            self.status.exited = f"exit status {code}"
            log.error("liveness sender exited with status %d", code)

    def stop(self, timeout: float = 2.0) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.stdin is not None:
            try:
                proc.stdin.close()
            except OSError:
                pass
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def health(self) -> dict[str, object]:
        return {"interface": self.ifname, "interval_us": self.orders.interval_us, "serving": self.orders.serving,
                "charon_pid": self.orders.charon_pid, **asdict(self.status)}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3:
        print("usage: python -m supergw_gateway.liveness IFNAME GATEWAY AGENT_PID (started by the agent)", file=sys.stderr)
        return 2
    return serve(args[0], args[1], int(args[2]), sys.stdin, sys.stdout)


if __name__ == "__main__":
    sys.exit(main())
