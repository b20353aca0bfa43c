"""A topology file with some top-level keys changed, for the schema tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


def changed_topology(base: Path, tmp_path: Path, **changes: Any) -> Path:
    """`base` (a shipped topology file) with `changes` applied to its top level, as t.yaml."""
    data = yaml.safe_load(base.read_text())
    data.update(changes)
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(data))
    return path
