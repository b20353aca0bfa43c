"""The shared synchronous P4Runtime session (supergw_p4rt) with finsy's schema and entities:
the schema loader, and one session against an in-process fake P4Runtime server (rootless,
ephemeral port)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from finsy import P4DigestEntry, P4TableAction, P4TableEntry, P4TableMatch
from finsy.p4schema import P4Schema
from finsy.proto import p4d, p4r, p4r_grpc, rpc_code, rpc_status
from google.protobuf import any_pb2
from supergw_p4rt import INSERT, P4RuntimeClientError, P4RuntimeSession, P4RuntimeWriteError, load_schema
from supergw_proto import p4constants as p4c

P4INFO = Path(__file__).resolve().parents[2] / "p4src" / "v1model" / "supergw.p4info.txtpb"
DEVICE = 7


@pytest.fixture(scope="module")
def schema() -> P4Schema:
    return load_schema(P4INFO)


# --------------------------------------------------------------------------- schema and entities


def test_bucket_entry_from_generated_names_is_canonical(schema: P4Schema) -> None:
    params = {p4c.PARAM_SET_GATEWAY_PORT: 2, p4c.PARAM_SET_GATEWAY_GATEWAY_MAC: "02:be:00:00:00:02"}
    entry = P4TableEntry(
        p4c.TABLE_BUCKETS,
        match=P4TableMatch({p4c.MATCH_BUCKETS_BUCKET: 216}),
        action=P4TableAction(p4c.ACTION_SET_GATEWAY, **params),
    ).encode(schema).table_entry
    assert entry.table_id == schema.tables[p4c.TABLE_BUCKETS].id
    assert entry.match[0].exact.value == b"\xd8"
    assert [p.value for p in entry.action.action.params] == [b"\x02", bytes.fromhex("02be00000002")]


def test_a_typo_fails_in_the_client_with_its_name(schema: P4Schema) -> None:
    with pytest.raises(ValueError, match="no P4Table named 'no_such_table'"):
        P4TableEntry("no_such_table").encode(schema)
    with pytest.raises(ValueError, match="invalid value for bitwidth 16"):
        P4TableEntry(p4c.TABLE_BUCKETS, match=P4TableMatch({p4c.MATCH_BUCKETS_BUCKET: 1 << 16})).encode(schema)


@pytest.mark.parametrize(("name", "data"), [("bad.txtpb", b"tables { nonsense"), ("latin1.txtpb", b"\xff\xfe")])
def test_unparsable_p4info_names_the_file(tmp_path: Path, name: str, data: bytes) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(ValueError, match=f"{name}: not a P4Info"):
        load_schema(path)


def test_missing_p4info_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(OSError, match="nope.txtpb"):
        load_schema(tmp_path / "nope.txtpb")


def test_pipeline_cookie_follows_the_content() -> None:
    a, b, c = load_schema(P4INFO), load_schema(P4INFO), load_schema(P4INFO, b"{}")
    assert a.p4cookie == b.p4cookie != c.p4cookie
    assert c.get_pipeline_config().p4_device_config == b"{}"
    assert c.get_pipeline_config().cookie.cookie == c.p4cookie


# --------------------------------------------------------------------------- session


class FakeSwitch(p4r_grpc.P4RuntimeServicer):
    """Just enough P4Runtime for the session's own behaviour: the highest election id is
    primary; a Write from anyone else is PERMISSION_DENIED; a Write of two or more updates
    fails the second with ALREADY_EXISTS (UNKNOWN + p4.Error details), one that starts with
    a DigestEntry fails UNKNOWN without details (a server off the spec); a packet-out comes
    back as a packet-in from its egress port; `stream_after_arbitration` is sent once a
    client has arbitrated; digest acks are recorded; the pipeline is kept."""

    def __init__(self) -> None:
        self.primary = 0
        self.end_streams = threading.Event()
        self.stale_elections = 0  # refuse this many arbitrations as PI does right after a close
        self.arbitrations = 0
        self.stream_after_arbitration: list[p4r.StreamMessageResponse] = []
        self.acks: list[p4r.DigestListAck] = []
        self.pipeline: p4r.ForwardingPipelineConfig | None = None
        self.pipeline_pushes = 0

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
                yield from self.stream_after_arbitration
            elif req.HasField("packet"):
                packet_in = p4r.StreamMessageResponse()
                packet_in.packet.payload = req.packet.payload
                packet_in.packet.metadata.add(metadata_id=1, value=req.packet.metadata[0].value)  # ingress_port
                packet_in.packet.metadata.add(metadata_id=2, value=b"\x01")  # reason
                yield packet_in
            elif req.HasField("digest_ack"):
                self.acks.append(req.digest_ack)

    def Write(self, request: p4r.WriteRequest, context: grpc.ServicerContext) -> p4r.WriteResponse:  # noqa: N802
        if request.election_id.low != self.primary:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, "not primary")
        if request.updates[0].entity.HasField("digest_entry"):
            context.abort(grpc.StatusCode.UNKNOWN, "no details")  # against the spec: no p4.Error per update
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

    def SetForwardingPipelineConfig(  # noqa: N802
        self, request: p4r.SetForwardingPipelineConfigRequest, context: grpc.ServicerContext
    ) -> p4r.SetForwardingPipelineConfigResponse:
        self.pipeline = request.config
        self.pipeline_pushes += 1
        return p4r.SetForwardingPipelineConfigResponse()

    def GetForwardingPipelineConfig(  # noqa: N802
        self, request: p4r.GetForwardingPipelineConfigRequest, context: grpc.ServicerContext
    ) -> p4r.GetForwardingPipelineConfigResponse:
        if self.pipeline is None:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "No forwarding pipeline config set for this device")
        reply = p4r.GetForwardingPipelineConfigResponse()
        reply.config.cookie.CopyFrom(self.pipeline.cookie)  # type: ignore[union-attr]  # abort() raised
        return reply


@pytest.fixture
def switch() -> Iterator[tuple[FakeSwitch, str]]:
    fake = FakeSwitch()  # type: ignore[abstract]  # only the RPCs the session tests use
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    p4r_grpc.add_P4RuntimeServicer_to_server(fake, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield fake, f"127.0.0.1:{port}"
    server.stop(grace=None)


def _role(port: int) -> P4TableEntry:
    return P4TableEntry(
        p4c.TABLE_PORT_ROLES,
        match=P4TableMatch({p4c.MATCH_PORT_ROLES_PORT: port}),
        action=P4TableAction(p4c.ACTION_SET_PORT_ROLE, **{p4c.PARAM_SET_PORT_ROLE_ROLE: 1}),
    )


def test_primary_writes_and_times_the_write(switch: tuple[FakeSwitch, str], schema: P4Schema) -> None:
    _, addr = switch
    with P4RuntimeSession(addr, DEVICE, 10, schema) as session:
        session.become_primary()
        assert 0 < session.write(session.updates(INSERT, [_role(1)])) < 10


def test_backup_is_told_it_is_not_primary(switch: tuple[FakeSwitch, str], schema: P4Schema) -> None:
    _, addr = switch
    with P4RuntimeSession(addr, DEVICE, 10, schema) as primary, P4RuntimeSession(addr, DEVICE, 5, schema) as backup:
        primary.become_primary()
        with pytest.raises(P4RuntimeClientError, match="not primary for device 7 .*ALREADY_EXISTS"):
            backup.become_primary()
        with pytest.raises(grpc.RpcError) as refused:
            backup.write(backup.updates(INSERT, [_role(1)]))
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED


def test_per_update_errors_are_decoded_in_order(switch: tuple[FakeSwitch, str], schema: P4Schema) -> None:
    _, addr = switch
    with P4RuntimeSession(addr, DEVICE, 10, schema) as session:
        session.become_primary()
        with pytest.raises(P4RuntimeWriteError) as failed:
            session.write(session.updates(INSERT, [_role(1), _role(2), _role(3)]))
    err = failed.value
    assert [e.canonical_code for e in err.errors] == [rpc_code.OK, rpc_code.ALREADY_EXISTS, rpc_code.OK]
    assert [i for i, _ in err.failed()] == [1]
    assert "[1] ALREADY_EXISTS: entry exists" in str(err)


def test_unknown_without_details_is_raised_as_the_grpc_error(switch: tuple[FakeSwitch, str], schema: P4Schema) -> None:
    _, addr = switch
    with P4RuntimeSession(addr, DEVICE, 10, schema) as session:
        session.become_primary()
        with pytest.raises(grpc.RpcError) as failed:
            session.write(session.updates(INSERT, [P4DigestEntry(p4c.DIGEST_LEARN_DIGEST, max_list_size=1)]))
    assert not isinstance(failed.value, P4RuntimeWriteError)
    assert failed.value.code() == grpc.StatusCode.UNKNOWN


def test_packet_out_and_in_by_metadata_name(switch: tuple[FakeSwitch, str], schema: P4Schema) -> None:
    _, addr = switch
    with P4RuntimeSession(addr, DEVICE, 10, schema) as session:
        session.become_primary()
        session.packet_out(b"frame", **{p4c.CTRL_HDR_PACKET_OUT_EGRESS_PORT: 3})
        got = session.packet_in(timeout=5)
        assert got is not None
        assert got.payload == b"frame"
        assert got.metadata == {p4c.CTRL_HDR_PACKET_IN_INGRESS_PORT: 3, p4c.CTRL_HDR_PACKET_IN_REASON: 1}
        assert session.packet_in(timeout=0.2) is None
        with pytest.raises(ValueError, match="missing parameter 'egress_port'"):
            session.packet_out(b"frame")


def test_digest_is_decoded_by_member_name_and_acked(switch: tuple[FakeSwitch, str], schema: P4Schema) -> None:
    fake, addr = switch
    digest = p4r.StreamMessageResponse()
    digest.digest.digest_id = schema.digests[p4c.DIGEST_LEARN_DIGEST].id
    digest.digest.list_id = 42
    members = digest.digest.data.add().struct.members
    for value in (bytes.fromhex("000003000001"), b"\x02", bytes.fromhex("0a00000a")):
        members.append(p4d.P4Data(bitstring=value))
    fake.stream_after_arbitration = [digest]
    with P4RuntimeSession(addr, DEVICE, 10, schema) as session:
        session.become_primary()
        got = session.digest(timeout=5)
        assert got is not None
        assert got.data == [{p4c.DIGEST_LEARN_DIGEST_SRC_MAC: 0x000003000001, p4c.DIGEST_LEARN_DIGEST_PORT: 2,
                             p4c.DIGEST_LEARN_DIGEST_SRC_IP: 0x0A00000A}]
        deadline = time.monotonic() + 5
        while not fake.acks and time.monotonic() < deadline:
            time.sleep(0.01)
    assert [(a.digest_id, a.list_id) for a in fake.acks] == [(digest.digest.digest_id, 42)]


def test_idle_timeout_notification_is_decoded(switch: tuple[FakeSwitch, str], schema: P4Schema) -> None:
    fake, addr = switch
    learned = P4TableEntry(
        p4c.TABLE_LEARNED_SOURCES,
        match=P4TableMatch({p4c.MATCH_LEARNED_SOURCES_SRC_MAC: "00:00:03:00:dd:08", p4c.MATCH_LEARNED_SOURCES_PORT: 1}),
        action=P4TableAction(p4c.ACTION_MARK_KNOWN),
    )
    note = p4r.StreamMessageResponse()
    note.idle_timeout_notification.table_entry.append(learned.encode(schema).table_entry)
    fake.stream_after_arbitration = [note]
    with P4RuntimeSession(addr, DEVICE, 10, schema) as session:
        session.become_primary()
        got = session.idle_timeout_notification(timeout=5)
    assert got is not None
    assert [(e.table_id, e[p4c.MATCH_LEARNED_SOURCES_SRC_MAC]) for e in got.table_entry] == [
        (schema.tables[p4c.TABLE_LEARNED_SOURCES].alias, 0x0000_0300_DD08)
    ]


def test_ensure_pipeline_pushes_only_a_new_cookie(switch: tuple[FakeSwitch, str], schema: P4Schema) -> None:
    fake, addr = switch
    with P4RuntimeSession(addr, DEVICE, 10, schema) as session:
        session.become_primary()
        assert session.ensure_pipeline() is True  # FAILED_PRECONDITION: nothing set yet
        assert session.ensure_pipeline() is False
        assert fake.pipeline is not None and fake.pipeline.cookie.cookie == schema.p4cookie
        with P4RuntimeSession(addr, DEVICE, 11, load_schema(P4INFO, b"{}")) as other:
            other.become_primary()
            assert other.ensure_pipeline() is True
    assert fake.pipeline_pushes == 2


def test_a_dead_stream_is_reported_at_once(switch: tuple[FakeSwitch, str], schema: P4Schema) -> None:
    fake, addr = switch
    with P4RuntimeSession(addr, DEVICE, 10, schema) as session:
        session.become_primary()
        fake.end_streams.set()
        session.send(p4r.StreamMessageRequest())  # the fake aborts the stream on its next message
        start = time.monotonic()
        with pytest.raises(P4RuntimeClientError, match="stream to .* ended .*UNAVAILABLE.*switch going down"):
            session.get("packet", timeout=30)
        assert time.monotonic() - start < 5


def test_no_switch_fails_fast_with_the_reason(schema: P4Schema) -> None:
    with P4RuntimeSession(_unused_address(), DEVICE, 10, schema) as session:
        start = time.monotonic()
        with pytest.raises(P4RuntimeClientError, match="UNAVAILABLE"):
            session.become_primary(timeout=30)
        assert time.monotonic() - start < 10


def _unused_address() -> str:
    """An address nothing listens on (an ephemeral port bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def test_connect_primary_retries_pi_stale_election_id(switch: tuple[FakeSwitch, str], schema: P4Schema) -> None:
    fake, addr = switch
    fake.stale_elections = 2
    session = P4RuntimeSession.connect_primary(addr, 7, 10, schema, timeout=5)
    try:
        assert (fake.arbitrations, fake.primary) == (3, 10)
    finally:
        session.close()


def test_connect_primary_raises_other_refusals_at_once(switch: tuple[FakeSwitch, str], schema: P4Schema) -> None:
    fake, addr = switch
    fake.primary = 20
    with pytest.raises(P4RuntimeClientError, match="not primary for device 7 .*ALREADY_EXISTS"):
        P4RuntimeSession.connect_primary(addr, 7, 10, schema, timeout=30)
    assert fake.arbitrations == 1  # a backup's refusal is final, not retried



def test_a_session_without_stream_never_arbitrates(switch: tuple[FakeSwitch, str], schema: P4Schema) -> None:
    """An observer (bench/scale) reads without a StreamChannel: it can never become primary
    (and receive the controller's digests) while the controller restarts."""
    fake, addr = switch
    with P4RuntimeSession(addr, DEVICE, 10, schema, stream=False) as observer:
        with pytest.raises(grpc.RpcError) as none_yet:
            observer.get_pipeline()  # RPCs work without a stream
        assert none_yet.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        with pytest.raises(P4RuntimeClientError, match="no stream"):
            observer.arbitrate(timeout=0.5)
    assert fake.arbitrations == 0
