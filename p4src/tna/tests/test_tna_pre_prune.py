"""pre_prune.py writes the PRE prune entries that FloodPruning's XIDs select.

bfrt_python is only on an SDE switch; here a recording stand-in for `bfrt.pre` checks
the calls, and the XID mapping is checked against the expression in flood_pruning.p4.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from tna_scripts import TNA, load


pre_prune = load("pre_prune")
DEV_PORTS = [pipe << 7 | port for pipe in range(4) for port in range(72)]


def test_xids_are_the_compact_port_numbers() -> None:
    xids = [pre_prune.l2_xid(p) for p in DEV_PORTS]
    assert sorted(xids) == list(range(288))
    assert pre_prune.l2_xid(0) == 0 and pre_prune.l2_xid(128) == 72 and pre_prune.l2_xid(2 << 7 | 7) == 151


def test_the_p4_program_computes_the_same_xid() -> None:
    src = (TNA / "include" / "control" / "flood_pruning.p4").read_text()
    assert re.search(r"pipe = \(L2ExclusionId_t\)ig_intr_md\.ingress_port\[8:7\];", src)
    assert re.search(r"port_in_pipe = \(L2ExclusionId_t\)ig_intr_md\.ingress_port\[6:0\];", src)
    assert "level2_exclusion_id = (pipe << 6) + (pipe << 3) + port_in_pipe;" in src
    for p in DEV_PORTS:  # the P4 expression, in 9-bit arithmetic
        pipe, port_in_pipe = p >> 7, p & 0x7F
        assert ((pipe << 6) + (pipe << 3) + port_in_pipe) & 0x1FF == pre_prune.l2_xid(p)


@pytest.mark.parametrize("bad", [-1, 72, 200, 512, 4 << 7])
def test_non_ports_are_refused(bad: int) -> None:
    with pytest.raises(ValueError, match="not a Tofino device port"):
        pre_prune.l2_xid(bad)


def test_port_list_parsing() -> None:
    assert pre_prune.parse_ports("132, 140 0x94") == [132, 140, 148]
    with pytest.raises(ValueError, match="SUPERGW_PORTS is empty"):
        pre_prune.parse_ports(" ")
    with pytest.raises(ValueError, match="not a Tofino device port"):
        pre_prune.parse_ports("132,200")


class _Entry:
    def __init__(self, calls: list[tuple[str, dict[str, Any]]], fields: dict[str, Any], fail: bool) -> None:
        self.calls, self.fields, self.fail = calls, fields, fail

    def push(self) -> None:
        if self.fail:
            raise RuntimeError("already exists")
        self.calls.append(("add", self.fields))


class _Prune:
    def __init__(self, existing: set[int]) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.existing = existing

    def entry(self, **fields: Any) -> _Entry:
        return _Entry(self.calls, fields, fields["MULTICAST_L2_XID"] in self.existing)

    def mod(self, **fields: Any) -> None:
        self.calls.append(("mod", fields))


class _Pre:
    def __init__(self, existing: set[int]) -> None:
        self.prune = _Prune(existing)


def test_program_adds_and_modifies_existing_entries() -> None:
    pre = _Pre(existing={72})
    pre_prune.program(pre, [132, 128])
    assert pre.prune.calls == [
        ("add", {"MULTICAST_L2_XID": 76, "DEV_PORT": [132]}),
        ("mod", {"MULTICAST_L2_XID": 72, "DEV_PORT": [128]}),
    ]
