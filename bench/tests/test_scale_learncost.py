"""bench/scale/learncost: a small cold start through the controller's learning path learns
every host with exactly its five entries, each digest list acked (what its timing rests on)."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Sequence
from pathlib import Path

import pytest

from bench.scale import learncost
from supergw_controller.southbound.entities import Update


def test_a_cold_start_learns_every_host_with_its_five_entries() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        out = asyncio.run(learncost.cold_start(learncost.site_config(Path(tmp)), 600, 0, None))
    s = out.session
    assert out.learned == out.ip6s == 600
    assert s.entries == learncost.ENTRIES_PER_HOST * 600 and s.acks == 1200
    assert 1 < s.requests < 1200  # gathered into batches, not one write per digest
    assert out.cpu_s > 0


def test_the_harness_fails_when_entries_go_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    """A session that drops every other write: the hosts are learned, their entries are not all written."""
    real = learncost.StandInSession.write

    async def lossy(self: learncost.StandInSession, updates: Sequence[Update], *, idempotent: bool = True) -> None:
        if self.requests % 2:
            self.requests += 1
            return
        await real(self, updates, idempotent=idempotent)

    monkeypatch.setattr(learncost.StandInSession, "write", lossy)
    assert learncost.main(["--hosts", "300", "--switch-rate", "0"]) == 1
