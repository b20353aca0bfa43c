"""The controller against a Tofino-shaped P4Info: every lookup resolves by name.

p4src/tna/supergw.tofino-shape.p4info.txtpb is generated from the TNA program by
p4src/tna/tofino_p4info.py (and kept current by `make p4`): bf-p4c's naming with the
"pipe." prefix on tables, counters, direct counters and the digest, and p4c's default IDs,
none equal to the v1model P4Info's. Every test runs on it and on its
`--p4runtime-force-std-externs` form (bf-p4c strips the prefix from those objects, as
its P4RuntimeStdConverter does), the one Stratum loads. The controller sees both through
`southbound.p4names.canonical_p4info`, the one place that maps names; everything it
writes, reads or decodes must then carry the Tofino IDs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from finsy import P4DigestEntry, P4DirectCounterEntry, P4MulticastGroupEntry, P4TableEntry
from finsy import p4entity
from finsy.p4schema import P4Schema
from finsy.proto import p4i, p4r
from google.protobuf import text_format

from supergw_proto import p4constants as pc
from supergw_controller.southbound import entities
from supergw_controller.southbound.entities import BucketEncoder, BucketEntry, Op
from supergw_controller.southbound.p4names import P4InfoMismatch, canonical_p4info, required_names

ROOT = Path(__file__).resolve().parents[2]
TOFINO = ROOT / "p4src" / "tna" / "supergw.tofino-shape.p4info.txtpb"
V1MODEL = ROOT / "p4src" / "v1model" / "supergw.p4info.txtpb"
PIPE = "pipe."


def _load(path: Path) -> p4i.P4Info:
    info = p4i.P4Info()
    text_format.Parse(path.read_text(), info)
    return info


def _force_std(info: p4i.P4Info) -> p4i.P4Info:
    """bf-p4c's stripPipePrefix: drop everything up to the first dot of these names."""
    out = p4i.P4Info()
    out.CopyFrom(info)
    for kind in ("tables", "counters", "direct_counters", "digests"):
        for obj in getattr(out, kind):
            obj.preamble.name = obj.preamble.name.split(".", 1)[1]
    return out


@pytest.fixture(scope="module", params=["pipe-prefixed", "force-std-externs"])
def tofino(request: pytest.FixtureRequest) -> p4i.P4Info:
    raw = _load(TOFINO)
    return raw if request.param == "pipe-prefixed" else _force_std(raw)


@pytest.fixture(scope="module")
def schema(tofino: p4i.P4Info) -> P4Schema:
    return P4Schema(canonical_p4info(tofino))


def _tofino_id(info: p4i.P4Info, kind: str, name: str) -> int:
    """ID of `name` in the raw Tofino P4Info, with or without the pipe prefix."""
    for obj in getattr(info, kind):
        if obj.preamble.name in (name, PIPE + name):
            return int(obj.preamble.id)
    raise AssertionError(f"{kind} {name} not in {TOFINO.name}")


def test_the_file_has_tofinos_shape() -> None:
    v1, tofino = _load(V1MODEL), _load(TOFINO)
    assert tofino.pkg_info.arch == "tna"
    for kind in ("tables", "counters", "direct_counters", "digests"):
        assert all(o.preamble.name.startswith(PIPE) for o in getattr(tofino, kind)), kind
    v1_ids = {o.preamble.id for k in ("tables", "actions", "counters", "direct_counters", "digests") for o in getattr(v1, k)}
    tna_ids = {o.preamble.id for k in ("tables", "actions", "counters", "direct_counters", "digests") for o in getattr(tofino, k)}
    assert v1_ids and tna_ids and not v1_ids & tna_ids


def test_every_required_name_resolves(tofino: p4i.P4Info) -> None:
    req = required_names()
    assert len(req.objects["tables"]) == len(_load(V1MODEL).tables) and "learn_digest_t" in req.objects["digests"]
    canon = canonical_p4info(tofino)
    prefixed = tofino.tables[0].preamble.name.startswith(PIPE)
    assert (canon is not tofino) == prefixed  # renamed only when needed
    for kind, wanted in req.objects.items():
        names = {o.preamble.name for o in getattr(canon, kind)}
        assert set(wanted) <= names, kind
        for name in wanted:  # renamed, not renumbered
            assert any(o.preamble.id == _tofino_id(tofino, kind, name) for o in getattr(canon, kind))


def test_v1model_p4info_is_used_as_is() -> None:
    v1 = _load(V1MODEL)
    assert canonical_p4info(v1) is v1


def _encoded(schema: P4Schema, entity: Any) -> p4r.Entity:
    msg = entity.encode(schema)
    assert isinstance(msg, p4r.Entity)
    return msg


def test_table_writes_carry_tofino_ids(tofino: p4i.P4Info, schema: P4Schema) -> None:
    cases: list[tuple[P4TableEntry, str, str | None]] = [
        (entities.port_role(5, pc.PortRole.HOST), pc.TABLE_PORT_ROLES, pc.ACTION_SET_PORT_ROLE),
        (entities.settings("10.0.0.1", "02:5e:00:00:00:00", 255, pc.BucketHash.CRC32), pc.TABLE_SETTINGS, pc.ACTION_SET_DISPATCH_CONFIG),
        (entities.bucket(7, 11, "52:54:00:00:01:01"), pc.TABLE_BUCKETS, pc.ACTION_SET_GATEWAY),
        (entities.bucket_key(7), pc.TABLE_BUCKETS, None),
        (entities.mac_entry("00:00:03:00:00:18", 1), pc.TABLE_MAC_TABLE, pc.ACTION_SET_OUTPUT_PORT),
        (entities.mac_key("00:00:03:00:00:18"), pc.TABLE_MAC_TABLE, None),
        (entities.host_ip("10.0.0.20", "00:00:03:00:00:18"), pc.TABLE_HOST_IPS, pc.ACTION_REPLY_WITH_HOST_MAC),
        (entities.host_ip_key("10.0.0.20"), pc.TABLE_HOST_IPS, None),
        (entities.learned("00:00:03:00:00:18", 1, 300 * 10**9), pc.TABLE_LEARNED_SOURCES, pc.ACTION_MARK_KNOWN),
        (entities.learned_key("00:00:03:00:00:18", 1), pc.TABLE_LEARNED_SOURCES, None),
    ]
    for entry, table, action in cases:
        msg = _encoded(schema, entry).table_entry
        assert msg.table_id == _tofino_id(tofino, "tables", table), table
        if action is not None:
            assert msg.action.action.action_id == _tofino_id(tofino, "actions", action), action
        assert entities.table_id(schema, table) == msg.table_id
        # What the controller reads back resolves to its own names (finsy decodes to the
        # alias; the southbound compares `schema.tables[e.table_id].name`).
        back = P4TableEntry.decode(_encoded(schema, entry), schema)
        assert schema.tables[back.table_id].name == table


def test_bucket_fast_encoder_uses_tofino_ids(tofino: p4i.P4Info, schema: P4Schema) -> None:
    enc = BucketEncoder(schema)
    update = enc.encode(Op.MODIFY, BucketEntry(9, 12, "52:54:00:00:01:02"))
    assert update.entity.table_entry.table_id == _tofino_id(tofino, "tables", pc.TABLE_BUCKETS)
    assert update.entity == _encoded(schema, entities.bucket(9, 12, "52:54:00:00:01:02"))


def test_counters_digest_and_multicast(tofino: p4i.P4Info, schema: P4Schema) -> None:
    counters = _encoded(schema, entities.bucket_counters())
    assert counters.direct_counter_entry.table_entry.table_id == _tofino_id(tofino, "tables", pc.TABLE_BUCKETS)
    assert schema.direct_counters[pc.DIRECT_COUNTER_BUCKET_COUNTER].id == _tofino_id(
        tofino, "direct_counters", pc.DIRECT_COUNTER_BUCKET_COUNTER
    )
    assert schema.counters[pc.COUNTER_DROP_COUNTER].id == _tofino_id(tofino, "counters", pc.COUNTER_DROP_COUNTER)
    digest = _encoded(schema, entities.learn_digest())
    assert digest.digest_entry.digest_id == _tofino_id(tofino, "digests", pc.DIGEST_LEARN_DIGEST)
    assert isinstance(P4DigestEntry.decode(digest, schema), P4DigestEntry)
    group = _encoded(schema, entities.flood_group([3, 1, 2]))
    assert group.packet_replication_engine_entry.multicast_group_entry.multicast_group_id == pc.HOST_FLOOD_GROUP
    assert isinstance(P4MulticastGroupEntry.decode(group, schema), P4MulticastGroupEntry)
    assert isinstance(P4DirectCounterEntry.decode(counters, schema), P4DirectCounterEntry)


def test_packet_io_and_digest_list_by_name(tofino: p4i.P4Info, schema: P4Schema) -> None:
    out = entities.packet_out(b"\xff" * 60, 17).encode_update(schema)
    assert isinstance(out, p4r.StreamMessageRequest)
    assert [(m.metadata_id, m.value) for m in out.packet.metadata] == [(1, b"\x11")]

    pin = p4r.StreamMessageResponse()
    pin.packet.payload = b"\x00" * 60
    pin.packet.metadata.add(metadata_id=1, value=b"\x05")
    pin.packet.metadata.add(metadata_id=2, value=bytes([pc.PuntReason.GATEWAY_ARP_MISS]))
    packet = p4entity.decode_stream(pin, schema)
    assert packet.metadata[pc.CTRL_HDR_PACKET_IN_INGRESS_PORT] == 5
    assert packet.metadata[pc.CTRL_HDR_PACKET_IN_REASON] == pc.PuntReason.GATEWAY_ARP_MISS

    dl = p4r.StreamMessageResponse()
    dl.digest.digest_id = _tofino_id(tofino, "digests", pc.DIGEST_LEARN_DIGEST)
    dl.digest.list_id = 1
    member = dl.digest.data.add().struct.members
    for value in (b"\x00\x00\x03\x00\x00\x18", b"\x01", b"\x0a\x00\x00\x14"):
        member.add().bitstring = value
    digests = p4entity.decode_stream(dl, schema)
    assert digests.digest_id == pc.DIGEST_LEARN_DIGEST
    data = digests.data[0]
    assert (data[pc.DIGEST_LEARN_DIGEST_SRC_MAC], data[pc.DIGEST_LEARN_DIGEST_PORT], data[pc.DIGEST_LEARN_DIGEST_SRC_IP]) == (
        0x000003000018,
        1,
        0x0A000014,
    )


def test_missing_objects_are_all_named(tofino: p4i.P4Info) -> None:
    broken = p4i.P4Info()
    broken.CopyFrom(tofino)
    del broken.tables[0]
    broken.actions[0].params.add(id=9, name="other", bitwidth=8)
    for a in broken.actions:
        if a.preamble.name == pc.ACTION_SET_GATEWAY:
            del a.params[1]
    members = broken.type_info.structs[broken.digests[0].type_spec.struct.name].members
    del members[len(members) - 1]
    with pytest.raises(P4InfoMismatch) as exc:
        canonical_p4info(broken)
    msg = str(exc.value)
    assert "table SupergwIngress.port_classifier.port_roles" in msg
    assert f"{pc.ACTION_SET_GATEWAY}: no {pc.PARAM_SET_GATEWAY_GATEWAY_MAC}" in msg
    assert f"{pc.DIGEST_LEARN_DIGEST}: no {pc.DIGEST_LEARN_DIGEST_SRC_IP}" in msg


def test_tofino_specific_externs_get_a_hint(tofino: p4i.P4Info) -> None:
    # bf-p4c without --p4runtime-force-std-externs: counters and digests are externs.
    raw = p4i.P4Info()
    raw.CopyFrom(tofino)
    raw.ClearField("digests")
    raw.ClearField("direct_counters")
    ext = raw.externs.add(extern_type_id=0x81, extern_type_name="Digest")
    ext.instances.add().preamble.name = "pipe.learn_digest_t"
    with pytest.raises(P4InfoMismatch, match="--p4runtime-force-std-externs"):
        canonical_p4info(raw)


def test_an_ambiguous_suffix_is_not_guessed() -> None:
    # Two pipelines' copies of one table: the controller cannot know which one it drives.
    twice = _load(TOFINO)
    extra = twice.tables.add()
    extra.CopyFrom(twice.tables[0])
    extra.preamble.id += 1
    extra.preamble.name = "pipe1." + twice.tables[0].preamble.name.split(".", 1)[1]
    with pytest.raises(P4InfoMismatch, match="port_roles"):
        canonical_p4info(twice)
