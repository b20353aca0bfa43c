"""What the emulation's integration tests share: their pytest marks and `python -m topologies.run`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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
