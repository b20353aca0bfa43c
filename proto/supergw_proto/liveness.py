"""The gateway liveness frame: what each gateway's agent sends out of its LAN port every few
milliseconds so that the switch itself notices a gateway that stops, and fails its buckets
over to the backup the controller chose in advance (docs/pipeline-contract.md, "Gateway
liveness").

The switch looks at nothing but the ethertype (`ETHERTYPE_LIVENESS`, generated from
p4src/common/defines.p4) and the port it came in on: a gateway is its port, and only the
gateway behind a port can send on it. The payload is for people and tools (tcpdump, tests):
who sent it, its sequence number and the interval it is sent at. It carries no secret: a
forged frame could only come from the gateway's own port.

Layout (network byte order), after the Ethernet header (dst `LIVENESS_DST`, src = the
gateway's LAN MAC, ethertype)::

    magic "SGWL" | version u8 | 0 u8 | name length u8 | 0 u8 | seq u32 | interval_us u32
    | name (UTF-8) | zero padding to the 60-byte minimum frame

The destination is the IEEE 802.1D "nearest bridge" group address: an ordinary bridge
between a gateway and the switch never forwards it, so a wrongly cabled gateway cannot
flood the LAN with it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from supergw_proto.addresses import mac_to_bytes
from supergw_proto.p4constants import ETHERTYPE_LIVENESS

LIVENESS_DST = "01:80:c2:00:00:0e"
MAGIC = b"SGWL"
VERSION = 1
MAX_NAME = 64
_ETH = struct.Struct("!6s6sH")
_BODY = struct.Struct("!4sBxBxII")
MIN_FRAME = 60  # the Ethernet minimum without FCS: veths and NICs pad to it anyway


class BadLivenessFrame(ValueError):
    """Not a liveness frame of this version; the message says why."""


@dataclass(frozen=True)
class LivenessFrame:
    src_mac: bytes
    gateway: str
    seq: int
    interval_us: int


def encode(src_mac: str | bytes, gateway: str, seq: int, interval_us: int) -> bytes:
    """The whole Ethernet frame (without FCS)."""
    name = gateway.encode()
    if not 0 < len(name) <= MAX_NAME:
        raise ValueError(f"gateway name {gateway!r}: 1 to {MAX_NAME} bytes of UTF-8")
    if not 0 < interval_us < 1 << 32:
        raise ValueError(f"interval_us {interval_us}: must be 1 .. 2^32 - 1")
    frame = (
        _ETH.pack(mac_to_bytes(LIVENESS_DST), mac_to_bytes(src_mac), ETHERTYPE_LIVENESS)
        + _BODY.pack(MAGIC, VERSION, len(name), seq & 0xFFFFFFFF, interval_us)
        + name
    )
    return frame + bytes(max(0, MIN_FRAME - len(frame)))


def decode(frame: bytes) -> LivenessFrame:
    """Parse a frame `encode` built (trailing padding allowed)."""
    if len(frame) < _ETH.size + _BODY.size:
        raise BadLivenessFrame(f"{len(frame)} bytes: shorter than the liveness header")
    _dst, src, ethertype = _ETH.unpack_from(frame)
    if ethertype != ETHERTYPE_LIVENESS:
        raise BadLivenessFrame(f"ethertype {ethertype:#06x}, want {ETHERTYPE_LIVENESS:#06x}")
    magic, version, name_len, seq, interval_us = _BODY.unpack_from(frame, _ETH.size)
    if magic != MAGIC or version != VERSION:
        raise BadLivenessFrame(f"magic {magic!r} version {version}, want {MAGIC!r} version {VERSION}")
    start = _ETH.size + _BODY.size
    name = frame[start : start + name_len]
    if len(name) != name_len or not name_len:
        raise BadLivenessFrame(f"name of {name_len} bytes does not fit the frame")
    try:
        gateway = name.decode()
    except UnicodeDecodeError as exc:
        raise BadLivenessFrame(f"name is not UTF-8: {exc}") from exc
    return LivenessFrame(src_mac=src, gateway=gateway, seq=seq, interval_us=interval_us)
