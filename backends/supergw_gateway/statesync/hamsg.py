"""strongSwan `ha` plugin sync messages (charon 5.9.x, message version 3): just enough to
relay them, keep each SA's history and speak to charon.

A message is `version(1) type(1)` and attributes, each `id(1)` and a value whose length the id
implies (`src/libcharon/plugins/ha/ha_message.c`). We read every attribute's extent, and the
values of the few we act on: the IKE SA id, the config name, the inbound SPI. Everything else
is carried as the bytes charon gave us. Parsing never trusts a length beyond the buffer.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from enum import IntEnum

VERSION = 3
SEGMENT = 1  # every SA is in segment 1: the gateways run `segment_count = 1`


class MsgType(IntEnum):
    IKE_ADD = 1
    IKE_UPDATE = 2
    IKE_MID_INITIATOR = 3
    IKE_MID_RESPONDER = 4
    IKE_DELETE = 5
    CHILD_ADD = 6
    CHILD_DELETE = 7
    SEGMENT_DROP = 8
    SEGMENT_TAKE = 9
    STATUS = 10
    RESYNC = 11
    IKE_IV = 12


class Attr(IntEnum):
    IKE_ID = 1
    IKE_REKEY_ID = 2
    LOCAL_ID = 3
    REMOTE_ID = 4
    REMOTE_EAP_ID = 5
    LOCAL_ADDR = 6
    REMOTE_ADDR = 7
    CONFIG_NAME = 8
    CONDITIONS = 9
    EXTENSIONS = 10
    LOCAL_VIP = 11
    REMOTE_VIP = 12
    PEER_ADDR = 13
    INITIATOR = 14
    NONCE_I = 15
    NONCE_R = 16
    SECRET = 17
    OLD_SKD = 18
    ALG_PRF = 19
    ALG_OLD_PRF = 20
    ALG_ENCR = 21
    ALG_ENCR_LEN = 22
    ALG_INTEG = 23
    ALG_DH = 24
    IPSEC_MODE = 25
    IPCOMP = 26
    INBOUND_SPI = 27
    OUTBOUND_SPI = 28
    INBOUND_CPI = 29
    OUTBOUND_CPI = 30
    LOCAL_TS = 31
    REMOTE_TS = 32
    MID = 33
    SEGMENT = 34
    ESN = 35
    IKE_VERSION = 36
    LOCAL_DH = 37
    REMOTE_DH = 38
    PSK = 39
    IV = 40
    AUTH_METHOD = 41


_IKE_ID_LEN = 18  # ike_version(1) initiator_spi(8) responder_spi(8) initiator(1), packed
_FIXED = {
    Attr.IKE_ID: _IKE_ID_LEN, Attr.IKE_REKEY_ID: _IKE_ID_LEN,
    **{a: 1 for a in (Attr.IKE_VERSION, Attr.INITIATOR, Attr.IPSEC_MODE, Attr.IPCOMP)},
    **{a: 2 for a in (Attr.ALG_DH, Attr.ALG_PRF, Attr.ALG_OLD_PRF, Attr.ALG_ENCR, Attr.ALG_ENCR_LEN, Attr.ALG_INTEG,
                      Attr.INBOUND_CPI, Attr.OUTBOUND_CPI, Attr.SEGMENT, Attr.ESN, Attr.AUTH_METHOD)},
    **{a: 4 for a in (Attr.CONDITIONS, Attr.EXTENSIONS, Attr.INBOUND_SPI, Attr.OUTBOUND_SPI, Attr.MID)},
}
_CHUNKS = frozenset({Attr.NONCE_I, Attr.NONCE_R, Attr.SECRET, Attr.LOCAL_DH, Attr.REMOTE_DH, Attr.PSK, Attr.IV,
                     Attr.OLD_SKD})
_SECRETS = frozenset({Attr.NONCE_I, Attr.NONCE_R, Attr.SECRET, Attr.PSK, Attr.OLD_SKD})
_IDS = frozenset({Attr.LOCAL_ID, Attr.REMOTE_ID, Attr.REMOTE_EAP_ID})
_HOSTS = frozenset({Attr.LOCAL_ADDR, Attr.REMOTE_ADDR, Attr.LOCAL_VIP, Attr.REMOTE_VIP, Attr.PEER_ADDR})
_TS = frozenset({Attr.LOCAL_TS, Attr.REMOTE_TS})
_AF_INET, _AF_INET6 = 2, 10
_TS_IPV4_RANGE, _TS_IPV6_RANGE = 7, 8


class HaMessageError(ValueError):
    """Bytes that are not a sync message we understand."""


@dataclass(frozen=True)
class IkeSaId:
    """An IKE SA as charon names it in sync messages: its SPIs (as charon stores them) and
    whether this side initiated it."""

    raw: bytes  # the 18 encoded bytes, compared and relayed as they are

    def spi_hex(self, responder: bool) -> str:
        """The SPI as charon's VICI prints it (16 hex digits, wire order)."""
        return self.raw[9:17].hex() if responder else self.raw[1:9].hex()

    def __str__(self) -> str:
        return f"{self.spi_hex(False)}_i {self.spi_hex(True)}_r"


@dataclass(frozen=True)
class HaMessage:
    """A parsed sync message: its bytes, type, and the values the relay acts on."""

    raw: bytes
    type: MsgType
    ike_id: IkeSaId | None
    rekey_of: IkeSaId | None  # IKE_ADD of a rekeyed IKE SA: the SA it replaces
    config_name: str | None
    inbound_spi: int | None
    segments: tuple[int, ...]


def _attr_len(attr: Attr, buf: bytes, pos: int) -> int:
    """Bytes the value of `attr` at `pos` takes."""
    if attr in _FIXED:
        return _FIXED[attr]
    if attr in _CHUNKS:
        _need(buf, pos, 2)
        return 2 + int.from_bytes(buf[pos:pos + 2], "big")
    if attr in _IDS:
        _need(buf, pos, 2)
        return 2 + buf[pos + 1]
    if attr in _HOSTS:
        _need(buf, pos, 3)
        family = buf[pos + 2]
        if family == _AF_INET:
            return 3 + 4
        if family == _AF_INET6:
            return 3 + 16
        if family == 0:  # an "any" host of unknown family carries no address
            return 3
        raise HaMessageError(f"address family {family} in attribute {attr.name}")
    if attr in _TS:
        _need(buf, pos, 7)
        ts_type = buf[pos]
        if ts_type == _TS_IPV4_RANGE:
            return 7 + 8
        if ts_type == _TS_IPV6_RANGE:
            return 7 + 32
        raise HaMessageError(f"traffic selector type {ts_type}")
    if attr is Attr.CONFIG_NAME:
        end = buf.find(b"\0", pos)
        if end < 0:
            raise HaMessageError("config name without its terminating NUL")
        return end + 1 - pos
    raise HaMessageError(f"attribute {attr.name}")  # pragma: no cover - every Attr is handled above


def _need(buf: bytes, pos: int, n: int) -> None:
    if pos + n > len(buf):
        raise HaMessageError(f"truncated at byte {pos} (need {n} more, have {len(buf) - pos})")


def _header(raw: bytes) -> MsgType:
    if len(raw) < 2:
        raise HaMessageError(f"{len(raw)} bytes: shorter than a header")
    if raw[0] != VERSION:
        raise HaMessageError(f"version {raw[0]}, this relay speaks {VERSION} (strongSwan 5.9)")
    try:
        return MsgType(raw[1])
    except ValueError:
        raise HaMessageError(f"unknown message type {raw[1]}") from None


def attributes(raw: bytes) -> Iterator[tuple[Attr, bytes]]:
    """Each attribute of a sync message with its encoded value; HaMessageError says what is wrong."""
    _header(raw)
    pos = 2
    while pos < len(raw):
        try:
            attr = Attr(raw[pos])
        except ValueError:
            raise HaMessageError(f"unknown attribute {raw[pos]} at byte {pos}") from None
        pos += 1
        n = _attr_len(attr, raw, pos)
        _need(raw, pos, n)
        yield attr, raw[pos:pos + n]
        pos += n


def key_material(raw: bytes) -> list[bytes]:
    """The secret values a sync message carries (DH secret, nonces, PSK, the old SK_d): what must
    never leave the replication channel."""
    return [value[2:] for attr, value in attributes(raw) if attr in _SECRETS and len(value) > 2]


def parse(raw: bytes) -> HaMessage:
    """Parse a sync message; HaMessageError says what is wrong."""
    mtype = _header(raw)
    ike_id = rekey_of = None
    name: str | None = None
    spi: int | None = None
    segments: list[int] = []
    for attr, value in attributes(raw):
        if attr is Attr.IKE_ID and ike_id is None:
            ike_id = IkeSaId(value)
        elif attr is Attr.IKE_REKEY_ID:
            rekey_of = IkeSaId(value)
        elif attr is Attr.CONFIG_NAME:
            name = value[:-1].decode("utf-8", "replace")
        elif attr is Attr.INBOUND_SPI:
            spi = struct.unpack("!I", value)[0]
        elif attr is Attr.SEGMENT:
            segments.append(struct.unpack("!H", value)[0])
    return HaMessage(raw, mtype, ike_id, rekey_of, name, spi, tuple(segments))


def control(mtype: MsgType, segment: int = SEGMENT) -> bytes:
    """A segment message for charon: SEGMENT_DROP from its peer makes it *activate* the
    segment (its PASSIVE IKE SAs there become ESTABLISHED), SEGMENT_TAKE *deactivate* it,
    RESYNC push its cached state and rekey its CHILD SAs (ha_dispatcher.c)."""
    if mtype not in (MsgType.SEGMENT_DROP, MsgType.SEGMENT_TAKE, MsgType.RESYNC):
        raise ValueError(f"{mtype.name} is not a segment message")
    return build(mtype, [(Attr.SEGMENT, struct.pack("!H", segment))])


def ike_delete(ike_id: IkeSaId) -> bytes:
    """IKE_DELETE for charon: it destroys that (passive) IKE SA and its CHILD SAs without a
    word to the peer."""
    return build(MsgType.IKE_DELETE, [(Attr.IKE_ID, ike_id.raw)])


def build(mtype: MsgType, attrs: list[tuple[Attr, bytes]]) -> bytes:
    """A message from already encoded attribute values (tests, and charon's own formats)."""
    return bytes([VERSION, mtype]) + b"".join(bytes([a]) + v for a, v in attrs)
