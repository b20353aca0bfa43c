"""Load one of `.ci`'s extension-less Python scripts as a module, for its tests."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]


def load_script(name: str) -> ModuleType:
    module_name = name.replace("-", "_")
    loader = importlib.machinery.SourceFileLoader(module_name, str(REPO / ".ci" / name))
    spec = importlib.util.spec_from_loader(module_name, loader)
    assert spec is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = mod  # dataclasses look their module up
    loader.exec_module(mod)
    return mod
