from __future__ import annotations

from typing import Any

import pytest


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
