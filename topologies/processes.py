"""Background processes of the emulation, tracked by pid (state.py keeps their records).

A process is identified by (pid, start time in clock ticks from /proc/<pid>/stat), so a
recycled pid is never mistaken for ours. Each runs in its own session (pgid = pid),
so stopping it also reaches helpers it forked, and nothing else.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ProcRecord:
    name: str
    pid: int
    start_ticks: int
    argv: list[str]
    log: str
    netns: str | None = None
    site: str = ""  # the prefix of the site it belongs to ("" for the shared parts)


def start_ticks(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # comm (field 2) may contain spaces; the fields after the closing paren are fixed.
    fields = stat.rpartition(")")[2].split()
    return int(fields[19])


def alive(rec: ProcRecord) -> bool:
    if start_ticks(rec.pid) != rec.start_ticks:
        return False
    try:
        state = Path(f"/proc/{rec.pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def start(
    name: str,
    argv: list[str],
    log: Path,
    netns: str | None = None,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    site: str = "",
) -> ProcRecord:
    """Start `argv` (inside `netns` if given) in the background, output appended to `log`."""
    full = ["ip", "netns", "exec", netns, *argv] if netns else argv
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        out.write(f"\n=== {time.strftime('%F %T')} start: {' '.join(full)}\n".encode())
        out.flush()
        # `ip netns exec` execs in place: the pid we get is the program's own.
        proc = subprocess.Popen(
            full,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, **(env or {})},
            cwd=cwd,
        )
    ticks = start_ticks(proc.pid)
    if ticks is None:
        raise RuntimeError(f"{name} exited immediately; see {log}")
    return ProcRecord(name=name, pid=proc.pid, start_ticks=ticks, argv=full, log=str(log), netns=netns, site=site)


def adopt(name: str, pid: int, argv: list[str], log: str, netns: str | None = None, site: str = "") -> ProcRecord | None:
    """A record of a process someone else started (charon by the gateway CLI, Mininet's
    nodes), so that `down` stops it by pid; None when it is gone already."""
    ticks = start_ticks(pid)
    if ticks is None:
        return None
    return ProcRecord(name=name, pid=pid, start_ticks=ticks, argv=argv, log=log, netns=netns, site=site)


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def stop(rec: ProcRecord, timeout: float = 5.0) -> str:
    """SIGTERM the process group, SIGKILL after `timeout`; returns what happened."""
    if not alive(rec):
        return "not running"
    try:
        os.killpg(rec.pid, signal.SIGTERM)
    except ProcessLookupError:
        return "not running"
    except PermissionError:
        os.kill(rec.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _reap(rec.pid)
        if not alive(rec):
            return "stopped"
        time.sleep(0.05)
    try:
        os.killpg(rec.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline and alive(rec):
        _reap(rec.pid)
        time.sleep(0.02)
    return "killed after timeout"
