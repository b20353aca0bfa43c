"""P4Runtime field values on the wire (P4Runtime 1.4 §8.4, bytestrings)."""

from __future__ import annotations

Value = int | bytes
"""A field value: an int is encoded canonically and range-checked; bytes are sent as
given (negative tests use that to send what does not fit)."""


def encode(value: Value, bitwidth: int) -> bytes:
    """Canonical (shortest, at least one byte) big-endian encoding of `value` in bit<bitwidth>."""
    if isinstance(value, bytes):
        return value
    if value < 0 or value.bit_length() > bitwidth:
        raise ValueError(f"{value:#x} does not fit in bit<{bitwidth}>")
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def decode(data: bytes) -> int:
    return int.from_bytes(data, "big")
