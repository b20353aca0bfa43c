"""The shared P4Runtime client (supergw_p4rt): entities from P4Info names, and one
session against an in-process fake P4Runtime server (rootless, ephemeral port)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from finsy.proto import p4r, p4r_grpc, rpc_code, rpc_status
from google.protobuf import any_pb2
from supergw_proto import p4constants as p4c
from supergw_p4rt import (
    INSERT,
    EntityBuilder,
    P4InfoLookupError,
    P4RuntimeClient,
    P4RuntimeClientError,
    P4RuntimeWriteError,
    load_p4info,
    pipeline_config,
    update,
)

P4INFO = Path(__file__).resolve().parents[2] / "p4src" / "v1model" / "supergw.p4info.txtpb"
DEVICE = 7


@pytest.fixture(scope="module")
def entities() -> EntityBuilder:
    return EntityBuilder(load_p4info(P4INFO))


# --------------------------------------------------------------------------- entities


def test_bucket_entry_from_generated_names(entities: EntityBuilder) -> None:
    e = entities.table_entry(p4c.TABLE_BUCKETS, {p4c.MATCH_BUCKETS_BUCKET: 216}, p4c.ACTION_SET_GATEWAY,
                             {p4c.PARAM_SET_GATEWAY_PORT: 2, p4c.PARAM_SET_GATEWAY_GATEWAY_MAC: 0x02BE00000002})
    assert e.table_id == entities.names.id("tables", p4c.TABLE_BUCKETS)
    assert e.match[0].exact.value == b"\xd8"
    assert [p.value for p in e.action.action.params] == [b"\x02", bytes.fromhex("02be00000002")]


@pytest.mark.parametrize(
    ("table", "match", "action", "params", "message"),
    [
        ("no_such_table", {}, p4c.ACTION_SET_GATEWAY, {}, "no unique table named 'no_such_table'"),
        (p4c.TABLE_BUCKETS, {"nope": 1}, p4c.ACTION_SET_GATEWAY, {}, "has no match field 'nope'"),
        (p4c.TABLE_BUCKETS, {}, p4c.ACTION_SET_GATEWAY, {"nope": 1}, "has no param 'nope'"),
        (p4c.TABLE_BUCKETS, {}, p4c.ACTION_SET_PORT_ROLE, {}, "is not an action of table"),
    ],
)
def test_bad_names_are_rejected_with_the_name(
    entities: EntityBuilder, table: str, match: dict[str, int], action: str, params: dict[str, int], message: str
) -> None:
    with pytest.raises(P4InfoLookupError, match=message) as info:
        entities.table_entry(table, match, action, params)
    assert isinstance(info.value, KeyError)
    assert not str(info.value).startswith(('"', "'")), "the message reads as text, not as a KeyError repr"


def test_value_wider_than_the_field_is_rejected(entities: EntityBuilder) -> None:
    with pytest.raises(ValueError, match="does not fit in bit<16>"):
        entities.table_entry(p4c.TABLE_BUCKETS, {p4c.MATCH_BUCKETS_BUCKET: 1 << 16})


def test_packet_out_metadata_by_name(entities: EntityBuilder) -> None:
    (meta,) = entities.packet_metadata("packet_out", {p4c.CTRL_HDR_PACKET_OUT_EGRESS_PORT: 3})
    assert meta.value == b"\x03"
    with pytest.raises(P4InfoLookupError, match="no field 'nope'"):
        entities.packet_metadata("packet_out", {"nope": 1})


def test_p4info_binary_and_text_agree(tmp_path: Path) -> None:
    info = load_p4info(P4INFO)
    binary = tmp_path / "p4info.bin"
    binary.write_bytes(info.SerializeToString())
    assert load_p4info(binary) == info


@pytest.mark.parametrize(("name", "data"), [("bad.txtpb", b"tables { nonsense"), ("bad.bin", b"\xff\xff\xff")])
def test_unparsable_p4info_names_the_file(tmp_path: Path, name: str, data: bytes) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(ValueError, match=f"{name}: not a P4Info"):
        load_p4info(path)


def test_pipeline_cookie_follows_the_content() -> None:
    info = load_p4info(P4INFO)
    a, b, c = pipeline_config(info), pipeline_config(info), pipeline_config(info, b"{}")
    assert a.cookie.cookie == b.cookie.cookie != c.cookie.cookie
    assert c.p4_device_config == b"{}"


# --------------------------------------------------------------------------- session


class FakeSwitch(p4r_grpc.P4RuntimeServicer):
    """Just enough P4Runtime for the client's own behaviour: the highest election id is
    primary; a Write from anyone else is PERMISSION_DENIED; a Write whose second update
    is an INSERT fails that one update with ALREADY_EXISTS (UNKNOWN + p4.Error details)."""

    def __init__(self) -> None:
        self.primary = 0
        self.end_streams = threading.Event()
        self.stale_elections = 0  # refuse this many arbitrations as PI does right after a close
        self.arbitrations = 0

    def StreamChannel(  # noqa: N802
        self, requests: Iterator[p4r.StreamMessageRequest], context: grpc.ServicerContext
    ) -> Iterator[p4r.StreamMessageResponse]:
        for req in requests:
            if self.end_streams.is_set():
                context.abort(grpc.StatusCode.UNAVAILABLE, "switch going down")
            if req.HasField("arbitration"):
                self.arbitrations += 1
                if self.stale_elections > 0:
                    self.stale_elections -= 1
                    context.abort(grpc.StatusCode.INVALID_ARGUMENT, "Election id already exists")
                low = req.arbitration.election_id.low
                self.primary = max(self.primary, low)
                reply = p4r.StreamMessageResponse()
                reply.arbitration.device_id = req.arbitration.device_id
                reply.arbitration.election_id.low = self.primary
                reply.arbitration.status.code = rpc_code.OK if low == self.primary else rpc_code.ALREADY_EXISTS
                yield reply

    def Write(self, request: p4r.WriteRequest, context: grpc.ServicerContext) -> p4r.WriteResponse:  # noqa: N802
        if request.election_id.low != self.primary:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, "not primary")
        if len(request.updates) >= 2:
            status = rpc_status.Status(code=grpc.StatusCode.UNKNOWN.value[0])
            for i, _ in enumerate(request.updates):
                err = p4r.Error(canonical_code=rpc_code.ALREADY_EXISTS if i == 1 else rpc_code.OK,
                                message="entry exists" if i == 1 else "")
                detail = any_pb2.Any()
                detail.Pack(err)
                status.details.append(detail)
            context.set_trailing_metadata((("grpc-status-details-bin", status.SerializeToString()),))
            context.abort(grpc.StatusCode.UNKNOWN, "one or more updates failed")
        return p4r.WriteResponse()


@pytest.fixture
def switch() -> Iterator[tuple[FakeSwitch, str]]:
    fake = FakeSwitch()  # type: ignore[abstract]  # only the RPCs the client tests use
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    p4r_grpc.add_P4RuntimeServicer_to_server(fake, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield fake, f"127.0.0.1:{port}"
    server.stop(grace=None)


def _entry(entities: EntityBuilder, port: int) -> p4r.Update:
    return update(INSERT, entities.table_entry(p4c.TABLE_PORT_ROLES, {p4c.MATCH_PORT_ROLES_PORT: port},
                                               p4c.ACTION_SET_PORT_ROLE, {p4c.PARAM_SET_PORT_ROLE_ROLE: 1}))


def test_primary_writes_and_times_the_write(switch: tuple[FakeSwitch, str], entities: EntityBuilder) -> None:
    _, addr = switch
    with P4RuntimeClient(addr, DEVICE, election_low=10) as client:
        client.become_primary()
        assert 0 < client.write([_entry(entities, 1)]) < 10


def test_backup_is_told_it_is_not_primary(switch: tuple[FakeSwitch, str], entities: EntityBuilder) -> None:
    _, addr = switch
    with P4RuntimeClient(addr, DEVICE, election_low=10) as primary, P4RuntimeClient(addr, DEVICE, 5) as backup:
        primary.become_primary()
        with pytest.raises(P4RuntimeClientError, match="not primary for device 7 .*ALREADY_EXISTS"):
            backup.become_primary()
        with pytest.raises(grpc.RpcError) as refused:
            backup.write([_entry(entities, 1)])
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED


def test_per_update_errors_are_decoded_in_order(switch: tuple[FakeSwitch, str], entities: EntityBuilder) -> None:
    _, addr = switch
    with P4RuntimeClient(addr, DEVICE, election_low=10) as client:
        client.become_primary()
        with pytest.raises(P4RuntimeWriteError) as failed:
            client.write([_entry(entities, 1), _entry(entities, 2), _entry(entities, 3)])
    err = failed.value
    assert [e.canonical_code for e in err.errors] == [rpc_code.OK, rpc_code.ALREADY_EXISTS, rpc_code.OK]
    assert [i for i, _ in err.failed()] == [1]
    assert "[1] ALREADY_EXISTS: entry exists" in str(err)


def test_a_dead_stream_is_reported_at_once(switch: tuple[FakeSwitch, str]) -> None:
    fake, addr = switch
    with P4RuntimeClient(addr, DEVICE, election_low=10) as client:
        client.become_primary()
        fake.end_streams.set()
        client.send(p4r.StreamMessageRequest())  # the fake aborts the stream on its next message
        start = time.monotonic()
        with pytest.raises(P4RuntimeClientError, match="stream to .* ended .*UNAVAILABLE.*switch going down"):
            client.get("packet", timeout=30)
        assert time.monotonic() - start < 5


def test_no_switch_fails_fast_with_the_reason() -> None:
    with P4RuntimeClient(_unused_address(), DEVICE, election_low=10) as client:
        start = time.monotonic()
        with pytest.raises(P4RuntimeClientError, match="UNAVAILABLE"):
            client.become_primary(timeout=30)
        assert time.monotonic() - start < 10


def _unused_address() -> str:
    """An address nothing listens on (an ephemeral port bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def test_connect_primary_retries_pi_stale_election_id(switch: tuple[FakeSwitch, str]) -> None:
    fake, addr = switch
    fake.stale_elections = 2
    client = P4RuntimeClient.connect_primary(addr, 7, 10, timeout=5)
    try:
        assert (fake.arbitrations, fake.primary) == (3, 10)
    finally:
        client.close()


def test_connect_primary_raises_other_refusals_at_once(switch: tuple[FakeSwitch, str]) -> None:
    fake, addr = switch
    fake.primary = 20
    with pytest.raises(P4RuntimeClientError, match="not primary for device 7 .*ALREADY_EXISTS"):
        P4RuntimeClient.connect_primary(addr, 7, 10, timeout=30)
    assert fake.arbitrations == 1  # a backup's refusal is final, not retried
