"""The tally of bad inputs a test tried at one interface, and what came of them.

The bad-input tests (REST fuzzing, malformed heartbeats and beacons, config fuzzing, a
misbehaving switch's stream) each write one JSON file with this shape; the chaos report
(`bench/results/chaos.*`) reads them all from one folder:

    {"interface": "rest", "variant": "admin", "tried": 2975,
     "outcomes": {"2xx": 310, "4xx": 2665}, "crashes": 0, "server_errors": 0,
     "state_changes_on_refusal": 0, "detail": {...}}

`tried` counts inputs sent; `outcomes` splits them by what the interface answered (HTTP
status class, or a refusal reason); the three goal-0 counts are what the report checks.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# Where the tests write their tallies unless SUPERGW_BADINPUT_DIR says otherwise (make runs
# the tests from the repository root, beside $(RESULTS) = build/test-results).
DEFAULT_DIR = Path("build/test-results/bad-input")


@dataclass
class Tally:
    interface: str  # rest | heartbeat-udp | pair-beacon | agent-report | config-yaml | p4rt-stream
    variant: str = ""  # e.g. the token kind for rest, the file kind for config-yaml
    tried: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    crashes: int = 0
    server_errors: int = 0
    state_changes_on_refusal: int = 0
    detail: dict[str, Any] = field(default_factory=dict)

    def count(self, outcome: str, n: int = 1) -> None:
        self.tried += n
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + n

    @property
    def file_name(self) -> str:
        return f"{self.interface}-{self.variant}.json" if self.variant else f"{self.interface}.json"

    def write(self, directory: Path | None = None) -> Path:
        """Write the tally (replacing an older one of the same interface and variant)."""
        out = directory or tally_dir()
        out.mkdir(parents=True, exist_ok=True)
        path = out / self.file_name
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=1, sort_keys=True) + "\n")
        tmp.replace(path)
        return path


def tally_dir() -> Path:
    """Where tallies are written and read: $SUPERGW_BADINPUT_DIR, else DEFAULT_DIR."""
    return Path(os.environ.get("SUPERGW_BADINPUT_DIR", DEFAULT_DIR))


def read_all(directory: Path) -> list[Mapping[str, Any]]:
    """Every tally in `directory`, by file name (for the chaos report)."""
    return [json.loads(p.read_text()) for p in sorted(directory.glob("*.json"))]
