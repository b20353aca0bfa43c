"""What the emulation's integration tests share: their pytest marks and `python -m topologies.run`."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from topologies.components import SWITCH_BIN

REPO = Path(__file__).resolve().parents[2]

EMULATION_MARKS = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces and eBPF"),
    pytest.mark.skipif(not SWITCH_BIN.is_file(), reason="switch not built (make switch)"),
]


def run_topologies(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """`python -m topologies.run ARGS` from the repository, its output captured."""
    return subprocess.run([sys.executable, "-m", "topologies.run", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout, check=False)


Gateways = dict[str, dict[str, Any]]


def wait_for_gateways(read: Callable[[], Gateways], what: str, cond: Callable[[Gateways], bool], timeout: float) -> None:
    """Poll the controller's /gateways view (`read`) until `cond` holds; fail with what it showed last."""
    deadline = time.monotonic() + timeout
    seen: Any = None
    while time.monotonic() < deadline:
        gws = read()
        if cond(gws):
            return
        seen = {n: (g["state"], g["buckets"], g.get("tunnel_up"), g.get("unhealthy")) for n, g in gws.items()}
        time.sleep(0.2)
    pytest.fail(f"{what}: not within {timeout:.0f}s; gateways (state, buckets, tunnel_up, unhealthy): {seen}")
