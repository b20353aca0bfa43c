"""Finding BMv2 for the dataplane benchmark: the no-logging build first, a clear reason when
it or p4c is missing, and whether a binary has packet logging compiled in (rootless)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from bench.dataplane import bmv2
from bench.dataplane.runs import search_no_loss

PROGRAM = Path(__file__).resolve().parents[2] / "p4src" / "v1model" / "supergw.p4"


def _exe(path: Path, content: bytes = b"#!/bin/sh\nexit 0\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    path.chmod(0o755)
    return path


def test_logging_build_is_recognised(tmp_path: Path) -> None:
    assert bmv2.logging_compiled_in(_exe(tmp_path / "logs", b"\x7fELF..." + bmv2.PACKET_LOG_MARK + b"..."))
    assert not bmv2.logging_compiled_in(_exe(tmp_path / "quiet", b"\x7fELF... nothing to see"))


def test_missing_simple_switch_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bmv2, "P4TOOLS", tmp_path / "none")
    monkeypatch.setattr(bmv2, "PERF_BUILD", tmp_path / "none" / "perf" / "bin" / "simple_switch_grpc")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(bmv2.Bmv2Unavailable, match="simple_switch_grpc is not installed"):
        bmv2.prepare(PROGRAM, tmp_path / "out")


def test_missing_p4c_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    perf = _exe(tmp_path / "p4tools" / "perf" / "bin" / "simple_switch_grpc")
    monkeypatch.setattr(bmv2, "P4TOOLS", tmp_path / "p4tools")
    monkeypatch.setattr(bmv2, "PERF_BUILD", perf)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(bmv2.Bmv2Unavailable, match="p4c is not installed"):
        bmv2.prepare(PROGRAM, tmp_path / "out")


def test_perf_build_is_preferred_and_a_failing_p4c_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    perf = _exe(tmp_path / "p4tools" / "perf" / "bin" / "simple_switch_grpc")
    _exe(tmp_path / "path" / "simple_switch_grpc")
    _exe(tmp_path / "path" / "p4c", b"#!/bin/sh\n[ \"$1\" = --version ] && echo 'p4c 0.0' && exit 0\necho 'syntax error' >&2\nexit 1\n")
    monkeypatch.setattr(bmv2, "P4TOOLS", tmp_path / "p4tools")
    monkeypatch.setattr(bmv2, "PERF_BUILD", perf)
    monkeypatch.setenv("PATH", f"{tmp_path / 'path'}:/usr/bin:/bin")
    assert bmv2._tool("simple_switch_grpc", bmv2.PERF_BUILD) == perf
    with pytest.raises(bmv2.Bmv2Unavailable, match="p4c failed on supergw.p4: syntax error"):
        bmv2.prepare(PROGRAM, tmp_path / "out")


def _switch(capacity: float) -> Callable[[float], dict[str, float]]:
    """A switch that forwards up to `capacity` frames per second and drops the rest."""

    def trial(rate: float) -> dict[str, float]:
        return {"pps": min(rate, capacity), "delivered_share": min(1.0, capacity / rate)}

    return trial


@pytest.mark.parametrize("start", [5_000.0, 20_000.0, 90_000.0])
def test_no_loss_search_closes_in_on_the_capacity(start: float) -> None:
    best = search_no_loss(_switch(30_000.0), start, steps=9)
    assert best is not None
    assert 0.9 * 30_000 <= best <= 30_000 * 1.01


def test_no_loss_search_says_none_when_every_rate_loses() -> None:
    assert search_no_loss(lambda rate: {"pps": 1.0, "delivered_share": 0.5}, 10_000.0) is None


def test_no_loss_search_retries_a_rate_that_lost_once() -> None:
    """Another task on BMv2's core makes one run lose; the retry still finds the capacity."""
    seen: set[float] = set()
    clean = _switch(30_000.0)

    def flaky(rate: float) -> dict[str, float]:
        if rate not in seen:
            seen.add(rate)
            return {"pps": rate * 0.9, "delivered_share": 0.9}
        return clean(rate)

    best = search_no_loss(flaky, 20_000.0, steps=9)
    assert best is not None and 0.9 * 30_000 <= best <= 30_000 * 1.01
