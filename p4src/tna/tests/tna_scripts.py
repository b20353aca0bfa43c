"""The scripts beside the TNA program (not a package), loaded by path for their tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

TNA = Path(__file__).resolve().parents[1]


def load(name: str) -> ModuleType:
    """p4src/tna/<name>.py as module `supergw_tna_<name>` (registered, so dataclasses work)."""
    module_name = f"supergw_tna_{name}"
    spec = importlib.util.spec_from_file_location(module_name, TNA / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(module_name, module)
    spec.loader.exec_module(module)
    return module
