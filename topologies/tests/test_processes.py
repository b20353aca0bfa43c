"""Processes are tracked by (pid, start time) and stopped with their helpers."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest

from topologies import processes


def test_start_alive_stop(tmp_path: Path) -> None:
    rec = processes.start("sleeper", ["sleep", "30"], tmp_path / "log")
    assert processes.alive(rec)
    assert processes.stop(rec) == "stopped"
    assert not processes.alive(rec)
    assert processes.stop(rec) == "not running"
    assert "start: sleep 30" in (tmp_path / "log").read_text()


def test_recycled_pid_is_not_ours(tmp_path: Path) -> None:
    rec = processes.start("sleeper", ["sleep", "30"], tmp_path / "log")
    try:
        impostor = dataclasses.replace(rec, start_ticks=rec.start_ticks - 1)
        assert not processes.alive(impostor)
        assert processes.stop(impostor) == "not running"
        assert processes.alive(rec)
    finally:
        processes.stop(rec)


def test_term_ignoring_process_is_killed(tmp_path: Path) -> None:
    rec = processes.start("stubborn", ["sh", "-c", "trap '' TERM; sleep 30"], tmp_path / "log")
    time.sleep(0.5)  # let sh install its trap
    assert processes.stop(rec, timeout=0.5) == "killed after timeout"
    assert not processes.alive(rec)
