"""Waiting for a condition on a running system: the one polling loop the emulation, its tests
and the benchmarks share. A check returns (ok, what it saw); a wait that runs out says what
it waited for, for how long, and what it saw last."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from topologies import processes
from topologies.processes import ProcRecord


class Timeout(RuntimeError):
    """The condition did not hold in time (or the process it depends on exited)."""


def log_tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join("    " + line for line in path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "    (no log)"


def wait_until(check: Callable[[], tuple[bool, str]], timeout: float, what: str, proc: ProcRecord | None = None,
               interval: float = 0.3) -> str:
    """Poll `check` every `interval` s until it is ok; returns its last detail. Raises Timeout
    with the last detail (and the log tail of `proc`) after `timeout` s, or as soon as `proc`
    has exited."""
    deadline = time.monotonic() + timeout
    detail = "not checked"
    while True:
        ok, detail = check()
        if ok:
            return detail
        if proc is not None and not processes.alive(proc):
            raise Timeout(f"{what}: process exited; last lines of {proc.log}:\n{log_tail(Path(proc.log))}")
        if time.monotonic() >= deadline:
            break
        time.sleep(interval)
    tail = f"\nlast lines of {proc.log}:\n{log_tail(Path(proc.log))}" if proc else ""
    raise Timeout(f"{what}: not ready after {timeout:.0f}s ({detail}){tail}")
