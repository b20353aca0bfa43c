"""bench/scale/gcpauses: a small run of every phase (both ways) completes with every host learned
and every GET and report answered, prints its pauses per phase, and fails when a GET fails."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from bench.scale import gcpauses

SMALL = ["--hosts", "300", "--gateways", "4", "--buckets", "64", "--seconds", "1"]


@pytest.fixture(autouse=True)
def thawed() -> Iterator[None]:
    """The policy may freeze this process's objects: thaw them after."""
    yield
    gc.unfreeze()


@pytest.mark.parametrize("mode", [[], ["--no-freeze"]])
def test_a_small_run_passes_and_prints_each_phase(mode: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert gcpauses.main(SMALL + mode) == 0
    out = capsys.readouterr().out
    for phase in ("adopt + learn", "an hour of history", "steady state"):
        assert f"GC pauses, {phase}" in out
    assert "300 hosts learned" in out and "/metrics" in out


def test_a_failing_get_fails_the_run(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(gcpauses, "READS", ("/status", "/no-such-route"))
    assert gcpauses.main(SMALL) == 1
    assert "GET /no-such-route: 404" in capsys.readouterr().err
