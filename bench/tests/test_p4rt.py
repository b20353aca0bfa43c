"""Entities for the benchmark are built from P4Info names, canonically encoded, and checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.p4rt import EntityBuilder, P4RuntimeClientError, canonical, load_p4info

p4c = pytest.importorskip("supergw_controller.p4constants")
P4INFO = Path(__file__).resolve().parents[2] / "p4src" / "v1model" / "supergw.p4info.txtpb"


@pytest.mark.parametrize(("value", "expected"), [(0, b"\x00"), (1, b"\x01"), (255, b"\xff"), (256, b"\x01\x00")])
def test_canonical(value: int, expected: bytes) -> None:
    assert canonical(value) == expected


def test_canonical_rejects_negative() -> None:
    with pytest.raises(ValueError, match="negative"):
        canonical(-1)


def test_bucket_entry() -> None:
    b = EntityBuilder(load_p4info(P4INFO))
    e = b.table_entry(p4c.TABLE_BUCKETS, {p4c.MATCH_BUCKETS_BUCKET: 216}, p4c.ACTION_SET_GATEWAY,
                      {p4c.PARAM_SET_GATEWAY_PORT: 2, p4c.PARAM_SET_GATEWAY_GATEWAY_MAC: 0x02BE00000002})
    assert e.match[0].exact.value == b"\xd8"
    assert e.action.action.params[1].value == bytes.fromhex("02be00000002")


@pytest.mark.parametrize(
    ("table", "match", "action", "params", "message"),
    [
        ("no_such_table", {}, "SupergwIngress.bucket_dispatch.set_gateway", {}, "table 'no_such_table'"),
        ("SupergwIngress.bucket_dispatch.buckets", {"nope": 1}, "SupergwIngress.bucket_dispatch.set_gateway", {},
         "no match field 'nope'"),
        ("SupergwIngress.bucket_dispatch.buckets", {}, "SupergwIngress.bucket_dispatch.set_gateway", {"nope": 1},
         "no param 'nope'"),
        ("SupergwIngress.bucket_dispatch.buckets", {}, "SupergwIngress.l2_forwarding.set_output_port", {},
         "not an action of table"),
    ],
)
def test_bad_names_are_rejected(table: str, match: dict[str, int], action: str, params: dict[str, int],
                                message: str) -> None:
    with pytest.raises(P4RuntimeClientError, match=message):
        EntityBuilder(load_p4info(P4INFO)).table_entry(table, match, action, params)
