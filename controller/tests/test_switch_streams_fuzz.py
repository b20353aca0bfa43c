"""A misbehaving switch's streams: malformed, unknown and oversized digests and packet-ins.

The real core (`corekit`: the composed core on a recording switch session) is fed through
the southbound's stream pump, as finsy's streams feed it. Whatever arrives, the controller
drops what it cannot use, counts it (`/status` `switch_stream_rejected`, the metric
`supergw_switch_stream_rejected`), logs it without a traceback, acknowledges every digest (so
the switch does not send it again forever), and goes on: a good item after the bad ones is
still handled. Tallies to `build/test-results/bad-input/p4rt-stream.json`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from supergw_controller.compose import ControllerCore
from supergw_controller.southbound import entities as ent
from supergw_proto import p4constants as pc
from supergw_proto.badinput import Tally

import corekit

MAC = "02:00:00:00:00:01"
GOOD_ITEM = {pc.DIGEST_LEARN_DIGEST_SRC_MAC: ent.mac_int(MAC), pc.DIGEST_LEARN_DIGEST_PORT: 1,
             pc.DIGEST_LEARN_DIGEST_SRC_IP: ent.ip_int("10.0.0.11")}  # fmt: skip
FIELDS = list(GOOD_ITEM)
ODD_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(), st.text(max_size=8),
                       st.binary(max_size=8), st.lists(st.integers(), max_size=2))  # fmt: skip


class DigestList(list[Any]):
    """finsy's P4DigestList as the southbound uses it: items, and ack()."""

    def ack(self) -> str:
        return f"ack:{id(self)}"


class Packet:
    def __init__(self, metadata: Any, payload: Any) -> None:
        self.metadata, self.payload = metadata, payload


async def stream(items: list[Any]) -> AsyncIterator[Any]:
    for item in items:
        yield item


def running(tmp_path: Path) -> tuple[ControllerCore, corekit.RecordingSession]:
    return asyncio.run(corekit.running_core(corekit.make_config(tmp_path), corekit.Clock()))


@pytest.fixture(scope="module")
def tally() -> Iterator[Tally]:
    t = Tally(interface="p4rt-stream")
    yield t
    t.write()


def feed(core: ControllerCore, digests: list[Any], packets: list[Any]) -> None:
    sw = core.switch
    asyncio.run(sw.pump(stream(digests), sw.on_digest, "digest"))
    asyncio.run(sw.pump(stream(packets), sw.on_packet_in, "packet-in"))


BAD_DIGEST_ITEMS: list[Any] = [
    {},  # no fields
    {k: v for k, v in GOOD_ITEM.items() if k != pc.DIGEST_LEARN_DIGEST_PORT},
    GOOD_ITEM | {pc.DIGEST_LEARN_DIGEST_SRC_MAC: 1 << 48},  # wider than a MAC
    GOOD_ITEM | {pc.DIGEST_LEARN_DIGEST_SRC_IP: -1},
    GOOD_ITEM | {pc.DIGEST_LEARN_DIGEST_PORT: True},
    GOOD_ITEM | {pc.DIGEST_LEARN_DIGEST_SRC_MAC: b"\x02\x00\x00\x00\x00\x01"},
    "not a struct",
    None,
]
BAD_PACKETS = [
    Packet({}, b"frame"),  # no metadata
    Packet({pc.CTRL_HDR_PACKET_IN_REASON: 3}, b"frame"),  # no ingress port
    Packet({pc.CTRL_HDR_PACKET_IN_REASON: 1 << 8, pc.CTRL_HDR_PACKET_IN_INGRESS_PORT: 11}, b"frame"),
    Packet({pc.CTRL_HDR_PACKET_IN_REASON: 3, pc.CTRL_HDR_PACKET_IN_INGRESS_PORT: -5}, b"frame"),
    Packet({pc.CTRL_HDR_PACKET_IN_REASON: 3, pc.CTRL_HDR_PACKET_IN_INGRESS_PORT: 11}, "not bytes"),
    Packet(None, b"frame"),  # metadata not a mapping
]
# Understood but useless: an unknown reason, an ARP miss whose frame is no ARP (oversized or
# truncated): ignored, as the pipeline contract says, and counted as packet-ins.
ODD_PACKETS = [
    Packet({pc.CTRL_HDR_PACKET_IN_REASON: 250, pc.CTRL_HDR_PACKET_IN_INGRESS_PORT: 11}, b"\x00" * 64),
    Packet({pc.CTRL_HDR_PACKET_IN_REASON: int(pc.PuntReason.GATEWAY_ARP_MISS), pc.CTRL_HDR_PACKET_IN_INGRESS_PORT: 11},
           b"\xff" * 65_535),
    Packet({pc.CTRL_HDR_PACKET_IN_REASON: int(pc.PuntReason.GATEWAY_ARP_MISS), pc.CTRL_HDR_PACKET_IN_INGRESS_PORT: 11},
           b"\x00" * 20),
]


def test_malformed_digests_and_packet_ins_are_dropped_counted_and_the_stream_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, tally: Tally
) -> None:
    core, session = running(tmp_path)
    oversized = DigestList([GOOD_ITEM | {pc.DIGEST_LEARN_DIGEST_PORT: 2}] + [{}] * 10_000)
    digests = [DigestList(BAD_DIGEST_ITEMS), oversized, 42, DigestList([GOOD_ITEM])]  # 42: not a digest list at all
    with caplog.at_level(logging.WARNING):
        feed(core, digests, BAD_PACKETS + ODD_PACKETS)
    status = asyncio.run(core.status())
    rejected = status.switch_stream_rejected
    assert rejected == {"digest": len(BAD_DIGEST_ITEMS) + 10_000 + 1, "packet-in": len(BAD_PACKETS)}, rejected
    # every digest list that was one is acknowledged, the malformed ones too
    assert [m for m in session.sent if str(m).startswith("ack:")] == [f"ack:{id(d)}" for d in digests if d != 42]
    # the good host after all that was learned; nothing else was
    assert [h.mac for h in asyncio.run(core.hosts()).hosts] == [MAC]
    assert status.packet_ins_total == len(ODD_PACKETS) and status.arp_misses_unknown_total == 0
    assert "Traceback" not in caplog.text and "not understood, dropped" in caplog.text
    assert len(caplog.records) <= 2 * 10 + 2 + 20, "rate-limited: the first ten of each stream, then every 1000th"
    tally.count("refused:digest", rejected["digest"])
    tally.count("refused:packet-in", rejected["packet-in"])
    tally.count("ignored:packet-in", len(ODD_PACKETS))
    tally.count("accepted:digest-item", 1 + 1)


@settings(max_examples=300, deadline=None)
@given(item=st.fixed_dictionaries({}, optional={f: ODD_VALUES for f in FIELDS}),
       metadata=st.fixed_dictionaries({}, optional={pc.CTRL_HDR_PACKET_IN_REASON: ODD_VALUES,
                                                    pc.CTRL_HDR_PACKET_IN_INGRESS_PORT: ODD_VALUES}),
       payload=st.binary(max_size=2048))
def test_any_digest_item_or_packet_in_metadata_is_handled_or_dropped(
    tmp_path_factory: pytest.TempPathFactory, tally: Tally, item: dict[str, Any], metadata: dict[str, Any], payload: bytes
) -> None:
    """Arbitrary field values: learned when they are a host, else dropped and counted; never
    an exception out of the pump, and the good item after them is still learned."""
    core, _ = running(tmp_path_factory.mktemp("streams"))
    feed(core, [DigestList([item]), DigestList([GOOD_ITEM])], [Packet(metadata, payload)])
    status = asyncio.run(core.status())
    rejected = status.switch_stream_rejected
    assert MAC in {h.mac for h in asyncio.run(core.hosts()).hosts}
    widths = {pc.DIGEST_LEARN_DIGEST_SRC_MAC: 48, pc.DIGEST_LEARN_DIGEST_SRC_IP: 32, pc.DIGEST_LEARN_DIGEST_PORT: 32}
    a_host = all(type(item.get(f)) is int and 0 <= item[f] < 1 << bits for f, bits in widths.items())
    assert rejected.get("digest", 0) == (0 if a_host else 1), (item, rejected)
    assert rejected.get("packet-in", 0) + status.packet_ins_total == 1
    tally.count("refused:digest" if rejected.get("digest") else "accepted:digest-item")
    tally.count("refused:packet-in" if rejected.get("packet-in") else "handled:packet-in")
