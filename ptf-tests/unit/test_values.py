"""Canonical P4Runtime value encoding and the P4Info name index (rootless)."""

from __future__ import annotations

from pathlib import Path

import pytest
from supergw_ptf.p4runtime import P4InfoIndex, decode, encode, load_p4info

P4INFO = Path(__file__).resolve().parents[2] / "p4src" / "v1model" / "supergw.p4info.txtpb"


@pytest.mark.parametrize(
    ("value", "bits", "wire"),
    [(0, 16, b"\x00"), (1, 16, b"\x01"), (0x100, 16, b"\x01\x00"), (0x0A000001, 32, b"\x0a\x00\x00\x01"), (0x025E00000003, 48, b"\x02\x5e\x00\x00\x00\x03")],
)
def test_encode_is_canonical(value: int, bits: int, wire: bytes) -> None:
    assert encode(value, bits) == wire
    assert decode(wire) == value


@pytest.mark.parametrize(("value", "bits"), [(256, 8), (-1, 8), (1 << 48, 48)])
def test_encode_rejects_what_does_not_fit(value: int, bits: int) -> None:
    with pytest.raises(ValueError, match="does not fit"):
        encode(value, bits)


def test_bytes_pass_through_unchanged() -> None:
    assert encode(b"\x00\x01\xff", 8) == b"\x00\x01\xff"


def test_names_resolve_by_full_name_and_unique_suffix() -> None:
    idx = P4InfoIndex(load_p4info(P4INFO))
    full = idx.id("tables", "SupergwIngress.bucket_dispatch.buckets")
    assert idx.id("tables", "buckets") == full
    assert idx.id("tables", "bucket_dispatch.buckets") == full
    assert idx.match_field("buckets", "bucket").bitwidth == 16
    with pytest.raises(KeyError, match="no unique table"):
        idx.id("tables", "no_such_table")
