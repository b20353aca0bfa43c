"""p4src/vectors/bucket-crc32.json and bucket-identity.json are what real BMv2 computes, and
they cover the cases the bucket hash was changed for (sequential MACs) and the clustering
paper's hosts (identity)."""

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


FILES = ("bucket-crc32.json", "bucket-identity.json")
CLIENT_FILES = ("client-crc32.json", "client-identity.json")


@pytest.mark.parametrize("name", CLIENT_FILES)
def test_the_committed_client_vectors_are_the_generators_addresses(name: str) -> None:
    data = json.loads((VECTORS_DIR / name).read_text())
    assert [v["ip"] for v in data["vectors"]] == _generate().vector_ips()
    ips = {v["ip"] for v in data["vectors"]}
    assert {f"198.51.100.{i}" for i in range(64)} <= ips  # last octet sequential
    assert {f"10.200.{i}.1" for i in range(64)} <= ips  # third octet sequential


def test_client_identity_vectors_reach_every_bit_of_the_largest_mask() -> None:
    vectors = json.loads((VECTORS_DIR / "client-identity.json").read_text())["vectors"]
    assert {v["bucket_k4096"] for v in vectors} >= {0, 4095}
    for bit in range(16):
        assert {(v["low16"] >> bit) & 1 for v in vectors} == {0, 1}, bit


@pytest.mark.parametrize("name", FILES)
def test_the_committed_vectors_are_the_generators_macs(name: str) -> None:
    data = json.loads((VECTORS_DIR / name).read_text())
    assert [v["mac"] for v in data["vectors"]] == _generate().vector_macs()
    macs = {v["mac"] for v in data["vectors"]}
    assert {f"02:00:00:00:00:{i:02x}" for i in range(64)} <= macs  # last byte sequential
    assert {f"02:00:00:00:{i:02x}:00" for i in range(64)} <= macs  # second-to-last byte
    assert {"00:00:03:00:18:00", "00:00:03:00:f7:00"} <= macs  # the paper's §4.3 hosts


def test_identity_vectors_reach_every_bit_of_the_largest_mask() -> None:
    vectors = json.loads((VECTORS_DIR / "bucket-identity.json").read_text())["vectors"]
    assert {v["bucket_k4096"] for v in vectors} >= {0, 4095}
    for bit in range(16):  # each of the 16 bits is set in one vector and clear in another
        assert {(v["low16"] >> bit) & 1 for v in vectors} == {0, 1}, bit


def test_bmv2_computes_the_committed_vectors() -> None:
    generate = _generate()
    try:
        built = generate.build()
    except generate.ToolMissing as e:
        pytest.skip(f"{e}: the vectors are only recomputed where BMv2 is installed")
    for path, data in built.items():
        committed = json.loads(path.read_text())
        assert data == committed, f"BMv2 disagrees with {path}: run p4src/vectors/generate.py"
    assert {p.name for p in built} == set(FILES + CLIENT_FILES)
