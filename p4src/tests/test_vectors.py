"""p4src/vectors/bucket-crc32.json is what real BMv2 computes, and it covers the cases the
bucket hash was changed for (sequential MACs)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

VECTORS_DIR = Path(__file__).resolve().parents[1] / "vectors"


def _generate() -> ModuleType:
    spec = importlib.util.spec_from_file_location("supergw_vectors_generate", VECTORS_DIR / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_committed_vectors_are_the_generators_macs() -> None:
    data = json.loads((VECTORS_DIR / "bucket-crc32.json").read_text())
    assert [v["mac"] for v in data["vectors"]] == _generate().vector_macs()
    macs = {v["mac"] for v in data["vectors"]}
    assert {f"02:00:00:00:00:{i:02x}" for i in range(64)} <= macs  # last byte sequential
    assert {f"02:00:00:00:{i:02x}:00" for i in range(64)} <= macs  # second-to-last byte


def test_bmv2_computes_the_committed_vectors() -> None:
    generate = _generate()
    try:
        built = generate.build()
    except generate.ToolMissing as e:
        pytest.skip(f"{e}: the vectors are only recomputed where BMv2 is installed")
    committed = json.loads((VECTORS_DIR / "bucket-crc32.json").read_text())
    assert built == committed, "BMv2 disagrees with p4src/vectors/bucket-crc32.json: run p4src/vectors/generate.py"
