from __future__ import annotations

import copy

from pathlib import Path
from typing import Any

import os

import pytest
from hypothesis import settings

# As controller/tests: hypothesis derandomized under CI (CI=true), so a landing run is reproducible.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI") == "true":
    settings.load_profile("ci")


@pytest.fixture
def gw_dict() -> dict[str, Any]:
    return {
        "name": "gw1",
        "interfaces": [
            {"role": "lan", "device": "lan0", "address": "10.1.0.1/24"},
            {"role": "wan", "device": "wan0", "address": "192.0.2.1/24"},
        ],
        "local": {"address": "192.0.2.1", "subnets": ["10.1.0.0/24"]},
        "remote": {"address": "192.0.2.2", "subnets": ["10.2.0.0/24"]},
        "auth": {"method": "psk", "psk": "0123456789abcdef"},
    }


@pytest.fixture
def ra_dict(gw_dict: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    """gw_dict with a remote_access section (placeholder PEM files)."""
    for name in ("ca.crt", "vpn.crt", "vpn.key"):
        (tmp_path / name).write_text("PEM")
    gw_dict["remote_access"] = {
        "public": {"address": "203.0.113.1"},
        "pool": "10.90.0.0/24",
        "spi": {"esp_min": "0xc1000000", "esp_max": 0xC1FFFFFF, "ike_label": 0x0100000000000000,
                "ike_mask": "0xff00000000000000"},
        "auth": {"cacert": str(tmp_path / "ca.crt"), "cert": str(tmp_path / "vpn.crt"),
                 "key": str(tmp_path / "vpn.key"), "id": "vpn.example"},
    }
    return gw_dict


def with_value(d: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    """A deep copy of `d` with the value at `path` (keys and list indices) replaced."""
    out = copy.deepcopy(d)
    node: Any = out
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = value
    return out
