"""The sync-message codec and the lineage book: what is relayed, what a new backup replays."""

from __future__ import annotations

import struct

import pytest

from supergw_gateway.statesync import hamsg
from supergw_gateway.statesync.book import SaBook
from supergw_gateway.statesync.hamsg import Attr, HaMessageError, IkeSaId, MsgType, build, parse


def ike_id(n: int) -> bytes:
    return bytes([2]) + n.to_bytes(8, "big") + (n + 1000).to_bytes(8, "big") + b"\0"


def host4(addr: bytes, port: int = 500) -> bytes:
    return struct.pack("!HB", port, 2) + addr


def ike_add(n: int, rekey_of: int | None = None) -> bytes:
    attrs = [(Attr.IKE_VERSION, b"\x02"), (Attr.IKE_ID, ike_id(n))]
    if rekey_of is not None:
        attrs += [(Attr.IKE_REKEY_ID, ike_id(rekey_of)), (Attr.ALG_OLD_PRF, b"\x00\x05"),
                  (Attr.OLD_SKD, struct.pack("!H", 4) + b"skdd")]
    attrs += [(Attr.ALG_ENCR, b"\x00\x14"), (Attr.NONCE_I, struct.pack("!H", 3) + b"abc"),
              (Attr.NONCE_R, struct.pack("!H", 2) + b"de"), (Attr.SECRET, struct.pack("!H", 1) + b"s"),
              (Attr.REMOTE_ADDR, host4(b"\x0a\x4d\x00\x0a", 4500))]
    return build(MsgType.IKE_ADD, attrs)


def ike_update(n: int, config: str | None) -> bytes:
    attrs = [(Attr.IKE_ID, ike_id(n)), (Attr.LOCAL_ID, bytes([2, 3]) + b"vpn")]
    if config is not None:
        attrs.append((Attr.CONFIG_NAME, config.encode() + b"\0"))
    attrs.append((Attr.PEER_ADDR, host4(b"\x0a\x4d\x00\x0a")))
    return build(MsgType.IKE_UPDATE, attrs)


def child_add(n: int, spi: int) -> bytes:
    ts = bytes([7, 0]) + struct.pack("!HH", 0, 65535) + b"\0" + b"\x0a\x50\x00\x00" + b"\x0a\x50\x00\xff"
    return build(MsgType.CHILD_ADD, [(Attr.IKE_ID, ike_id(n)), (Attr.CONFIG_NAME, b"ra-net\0"),
                                     (Attr.INBOUND_SPI, struct.pack("!I", spi)),
                                     (Attr.OUTBOUND_SPI, struct.pack("!I", spi + 1)), (Attr.LOCAL_TS, ts),
                                     (Attr.REMOTE_TS, ts)])


def mid(n: int, value: int, responder: bool = True) -> bytes:
    t = MsgType.IKE_MID_RESPONDER if responder else MsgType.IKE_MID_INITIATOR
    return build(t, [(Attr.IKE_ID, ike_id(n)), (Attr.MID, struct.pack("!I", value))])


def child_delete(n: int, spi: int) -> bytes:
    return build(MsgType.CHILD_DELETE, [(Attr.IKE_ID, ike_id(n)), (Attr.INBOUND_SPI, struct.pack("!I", spi))])


def ike_delete(n: int) -> bytes:
    return hamsg.ike_delete(IkeSaId(ike_id(n)))


def test_parse_reads_what_the_relay_acts_on() -> None:
    m = parse(child_add(7, 0xc0000001))
    assert m.type is MsgType.CHILD_ADD and m.ike_id == IkeSaId(ike_id(7)) and m.inbound_spi == 0xc0000001
    assert m.config_name == "ra-net"
    r = parse(ike_add(9, rekey_of=7))
    assert r.ike_id == IkeSaId(ike_id(9)) and r.rekey_of == IkeSaId(ike_id(7))
    assert IkeSaId(ike_id(9)).spi_hex(False) == "0000000000000009"
    assert parse(hamsg.control(MsgType.SEGMENT_DROP)).segments == (1,)


@pytest.mark.parametrize("raw, why", [
    (b"", "shorter than a header"),
    (b"\x02\x01", "version 2"),
    (b"\x03\x63", "unknown message type 99"),
    (b"\x03\x01\x63", "unknown attribute 99"),
    (ike_add(1)[:-3], "truncated"),
    (build(MsgType.IKE_UPDATE, [(Attr.CONFIG_NAME, b"ra")]), "NUL"),
    (build(MsgType.IKE_UPDATE, [(Attr.LOCAL_ADDR, struct.pack("!HB", 0, 99))]), "address family 99"),
    (build(MsgType.CHILD_ADD, [(Attr.LOCAL_TS, bytes([9]) + bytes(6))]), "traffic selector type 9"),
])
def test_parse_refuses_what_it_cannot_read(raw: bytes, why: str) -> None:
    with pytest.raises(HaMessageError, match=why):
        parse(raw)


def test_control_messages_are_segment_messages_only() -> None:
    assert hamsg.control(MsgType.RESYNC) == b"\x03\x0b\x22\x00\x01"
    with pytest.raises(ValueError):
        hamsg.control(MsgType.IKE_ADD)


def feed(book: SaBook, *raws: bytes) -> list[bytes]:
    out: list[bytes] = []
    for raw in raws:
        out += [m.raw for m in book.take(parse(raw)).relay]
    return out


def test_an_ike_add_waits_for_its_config_name_then_goes_with_it() -> None:
    book = SaBook("ra")
    assert feed(book, ike_add(1), mid(1, 1)) == []
    assert feed(book, ike_update(1, "ra")) == [ike_add(1), mid(1, 1), ike_update(1, "ra")]
    assert feed(book, child_add(1, 0xc0000001)) == [child_add(1, 0xc0000001)]
    assert len(book) == 1


def test_site_to_site_sas_never_leave_the_gateway() -> None:
    book = SaBook("ra")
    assert feed(book, ike_add(2), ike_update(2, "sgw-g1"), child_add(2, 5), mid(2, 3), ike_add(3, rekey_of=2),
                ike_update(3, None), ike_delete(2)) == []
    assert len(book) == 0 and list(book.replay()) == []


def test_replay_rebuilds_the_lineage_through_rekeys_without_dead_children() -> None:
    book = SaBook("ra")
    feed(book, ike_add(1), ike_update(1, "ra"), child_add(1, 10), mid(1, 1), mid(1, 2))
    feed(book, child_add(1, 11), child_delete(1, 10))  # a CHILD rekey
    feed(book, ike_add(4, rekey_of=1), ike_update(4, "ra"), ike_delete(1), mid(4, 1))  # an IKE rekey
    replay = [m.raw for m in book.replay()]
    assert replay == [ike_add(1), ike_update(1, "ra"), mid(1, 2), child_add(1, 11), ike_add(4, rekey_of=1),
                      ike_update(4, "ra"), mid(4, 1)]
    assert book.current_ids() == [IkeSaId(ike_id(4))]


def test_a_child_rekey_after_an_ike_rekey_drops_the_child_made_before_it() -> None:
    # The CHILD SA was added under IKE SA 1, moved to 4 by the IKE rekey; its CHILD_DELETE names 4.
    book = SaBook("ra")
    feed(book, ike_add(1), ike_update(1, "ra"), child_add(1, 10))
    feed(book, ike_add(4, rekey_of=1), ike_update(4, "ra"), ike_delete(1))
    feed(book, child_add(4, 11), child_delete(4, 10))
    replay = [m.raw for m in book.replay()]
    assert replay == [ike_add(1), ike_update(1, "ra"), ike_add(4, rekey_of=1), ike_update(4, "ra"), child_add(4, 11)]


def test_a_deleted_ike_sa_ends_its_lineage() -> None:
    book = SaBook("ra")
    feed(book, ike_add(1), ike_update(1, "ra"), child_add(1, 10))
    out = book.take(parse(ike_delete(1)))
    assert out.ended == IkeSaId(ike_id(1)) and [m.raw for m in out.relay] == [ike_delete(1)]
    assert len(book) == 0 and list(book.replay()) == []


def test_messages_of_an_unknown_sa_and_segment_control_are_not_relayed() -> None:
    book = SaBook("ra")
    assert feed(book, mid(8, 1), child_add(8, 3), hamsg.control(MsgType.SEGMENT_TAKE)) == []


def test_adopt_moves_every_lineage_and_empties_the_other_book() -> None:
    own, held = SaBook("ra"), SaBook("ra")
    feed(own, ike_add(1), ike_update(1, "ra"))
    feed(held, ike_add(2), ike_update(2, "ra"), child_add(2, 20))
    moved = own.adopt(held)
    assert [lin.current for lin in moved] == [IkeSaId(ike_id(2))] and len(held) == 0 and len(own) == 2
    assert feed(own, mid(2, 5)) == [mid(2, 5)]  # its later messages are this book's now


def test_key_material_is_every_secret_value_and_nothing_else() -> None:
    assert sorted(hamsg.key_material(ike_add(1, rekey_of=0))) == [b"abc", b"de", b"s", b"skdd"]
    assert hamsg.key_material(ike_update(1, "ra")) == []
    with pytest.raises(HaMessageError, match="version"):
        hamsg.key_material(b"\x09\x01")
