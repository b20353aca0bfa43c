"""One synchronous P4Runtime session over finsy's schema: channel, StreamChannel (one
reader thread, one request queue), arbitration, Write/Read with per-update errors, the
forwarding pipeline, packet-out/in, digests (acked) and idle-timeout notifications.

finsy's `Switch` is asyncio and owns its event loop; unittest-style PTF tests and the
benchmarks need a blocking session they can drive step by step, so this is that session.
Entities are finsy's: built by name, encoded and decoded by finsy against `schema`.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Iterator, Sequence
from types import TracebackType
from typing import Any, Literal, get_args

import grpc
from finsy import P4DigestList, P4PacketIn, P4PacketOut
from finsy.p4entity import P4IdleTimeoutNotification
from finsy.p4schema import P4Schema
from finsy.proto import p4r, p4r_grpc, rpc_code

from .errors import P4RuntimeClientError, code_name, write_error
from .schema import Entity, encode, update

LOG = logging.getLogger("supergw_p4rt")
STALE_ELECTION = "Election id already exists"

StreamKind = Literal["arbitration", "packet", "digest", "idle_timeout_notification", "error", "other"]
STREAM_KINDS: tuple[StreamKind, ...] = get_args(StreamKind)


class P4RuntimeSession:
    """One P4Runtime session with one device. `arbitrate()` (or `become_primary()`) before
    writing; `close()` (or use it as a context manager) ends the stream and the channel.
    `stream=False`: Read and GetForwardingPipelineConfig only, with no StreamChannel, so an
    observer never takes part in arbitration (a stream of any election id would become primary
    while the controller restarts, and receive its digests)."""

    def __init__(
        self, addr: str, device_id: int, election_low: int, schema: P4Schema, *, rpc_timeout: float = 10.0,
        stream: bool = True,
    ) -> None:
        self.addr = addr
        self.device_id = device_id
        self.election_id = p4r.Uint128(high=0, low=election_low)
        self.schema = schema
        self.rpc_timeout = rpc_timeout
        self.channel = grpc.insecure_channel(addr)
        self.stub = p4r_grpc.P4RuntimeStub(self.channel)
        self._out: queue.Queue[p4r.StreamMessageRequest | None] = queue.Queue()
        self._in: dict[StreamKind, queue.Queue[p4r.StreamMessageResponse]] = {k: queue.Queue() for k in STREAM_KINDS}
        self._closed = False
        self._stream_end: str | None = None if stream else "this session has no stream (stream=False)"
        self._stream = self.stub.StreamChannel(self._requests()) if stream else None
        self._reader = threading.Thread(target=self._read_stream, name="p4rt-stream", daemon=True)
        if stream:
            self._reader.start()

    @classmethod
    def connect_primary(
        cls,
        addr: str,
        device_id: int,
        election_low: int,
        schema: P4Schema,
        *,
        timeout: float = 5.0,
        rpc_timeout: float = 10.0,
    ) -> P4RuntimeSession:
        """A new session that is primary. p4lang/PI can refuse an election id for a moment
        after the previous stream with that id closed (INVALID_ARGUMENT "Election id already
        exists": its teardown is asynchronous), so that one refusal is retried on a fresh
        stream until `timeout`; anything else raises at once."""
        deadline = time.monotonic() + timeout
        while True:
            session = cls(addr, device_id, election_low, schema, rpc_timeout=rpc_timeout)
            try:
                session.become_primary(timeout=max(0.5, deadline - time.monotonic()))
                return session
            except P4RuntimeClientError as err:
                session.close()
                if STALE_ELECTION not in str(err) or time.monotonic() >= deadline:
                    raise
                LOG.info("%s still holds election id %d of a closed stream; retrying", addr, election_low)
                time.sleep(0.1)

    def __enter__(self) -> P4RuntimeSession:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    # ---- stream

    def _requests(self) -> Iterator[p4r.StreamMessageRequest]:
        while (msg := self._out.get()) is not None:
            yield msg

    def _read_stream(self) -> None:
        assert self._stream is not None
        try:
            by_name: dict[str, queue.Queue[p4r.StreamMessageResponse]] = {str(k): q for k, q in self._in.items()}
            for msg in self._stream:
                by_name.get(msg.WhichOneof("update") or "other", self._in["other"]).put(msg)
            self._stream_end = "the switch closed the stream"
        except grpc.RpcError as err:
            self._stream_end = f"{err.code().name}: {err.details()}"
            if err.code() != grpc.StatusCode.CANCELLED or not self._closed:
                LOG.warning("P4Runtime stream to %s ended: %s", self.addr, self._stream_end)

    @property
    def stream_alive(self) -> bool:
        return self._reader.is_alive()

    def send(self, req: p4r.StreamMessageRequest) -> None:
        self._out.put(req)

    def get(self, kind: StreamKind, timeout: float) -> p4r.StreamMessageResponse | None:
        """The next stream message of `kind` within `timeout` s, or None. Raises at once
        when the stream has ended and nothing of that kind is left."""
        inbox = self._in[kind]
        deadline = time.monotonic() + timeout
        while True:
            try:
                return inbox.get(timeout=min(0.1, max(0.0, deadline - time.monotonic())))
            except queue.Empty:
                if not self._reader.is_alive() and inbox.empty():
                    raise P4RuntimeClientError(
                        f"P4Runtime stream to {self.addr} ended ({self._stream_end}); is the switch still running?"
                    ) from None
                if time.monotonic() >= deadline:
                    return None

    def drain(self, kind: StreamKind) -> list[p4r.StreamMessageResponse]:
        out = []
        while True:
            try:
                out.append(self._in[kind].get_nowait())
            except queue.Empty:
                return out

    def arbitrate(self, timeout: float = 5.0) -> p4r.MasterArbitrationUpdate:
        """Send our election id; the switch's reply (status OK: primary, ALREADY_EXISTS: backup)."""
        req = p4r.StreamMessageRequest()
        req.arbitration.device_id = self.device_id
        req.arbitration.election_id.CopyFrom(self.election_id)
        self._out.put(req)
        msg = self.get("arbitration", timeout)
        if msg is None:
            raise P4RuntimeClientError(f"no arbitration reply from device {self.device_id} at {self.addr} within {timeout:g}s")
        arbitration: p4r.MasterArbitrationUpdate = msg.arbitration
        return arbitration

    def become_primary(self, timeout: float = 5.0) -> None:
        """Arbitrate and raise unless this session is now the primary."""
        arb = self.arbitrate(timeout)
        if arb.status.code != rpc_code.OK:
            raise P4RuntimeClientError(
                f"not primary for device {self.device_id} at {self.addr}: "
                f"{code_name(arb.status.code)} {arb.status.message}"
            )

    # ---- stream messages, encoded and decoded by finsy

    def packet_out(self, payload: bytes, **metadata: Any) -> None:
        """A packet-out with `packet_out` metadata by field name."""
        self.send(P4PacketOut(payload, **metadata).encode_update(self.schema))

    def packet_in(self, timeout: float) -> P4PacketIn | None:
        msg = self.get("packet", timeout)
        return None if msg is None else P4PacketIn.decode(msg, self.schema)

    def digest(self, timeout: float) -> P4DigestList | None:
        """The next digest list, acknowledged at once."""
        msg = self.get("digest", timeout)
        if msg is None:
            return None
        digests = P4DigestList.decode(msg, self.schema)
        self.send(digests.ack().encode_update(self.schema))
        return digests

    def idle_timeout_notification(self, timeout: float) -> P4IdleTimeoutNotification | None:
        msg = self.get("idle_timeout_notification", timeout)
        return None if msg is None else P4IdleTimeoutNotification.decode(msg, self.schema)

    # ---- RPCs

    def updates(self, kind: p4r.Update.Type.ValueType, entities: Sequence[Entity]) -> list[p4r.Update]:
        """`entities` encoded into updates of one kind (encode before timing a write)."""
        return [update(kind, e, self.schema) for e in entities]

    def write(self, updates: Sequence[p4r.Update], timeout: float | None = None) -> float:
        """One CONTINUE_ON_ERROR WriteRequest; seconds from send to the reply. Raises
        P4RuntimeWriteError with one p4.Error per update, or the grpc.RpcError of a Write
        refused as a whole (e.g. PERMISSION_DENIED for a backup)."""
        req = p4r.WriteRequest(device_id=self.device_id, election_id=self.election_id)
        req.atomicity = p4r.WriteRequest.CONTINUE_ON_ERROR
        req.updates.extend(updates)
        start = time.perf_counter()
        try:
            self.stub.Write(req, timeout=self.rpc_timeout if timeout is None else timeout)
        except grpc.RpcError as err:
            raise write_error(err, len(updates)) from None
        return time.perf_counter() - start

    def read(self, entities: Sequence[Entity], timeout: float | None = None) -> list[p4r.Entity]:
        """The entities the switch holds for `entities` (wildcards allowed), as sent on the
        wire; decode them with finsy's `<Entity>.decode(msg, session.schema)`."""
        req = p4r.ReadRequest(device_id=self.device_id)
        req.entities.extend(encode(e, self.schema) for e in entities)
        out: list[p4r.Entity] = []
        for resp in self.stub.Read(req, timeout=self.rpc_timeout if timeout is None else timeout):
            out.extend(resp.entities)
        return out

    def get_pipeline(
        self,
        response_type: p4r.GetForwardingPipelineConfigRequest.ResponseType.ValueType = (
            p4r.GetForwardingPipelineConfigRequest.ALL
        ),
    ) -> p4r.ForwardingPipelineConfig:
        req = p4r.GetForwardingPipelineConfigRequest(device_id=self.device_id, response_type=response_type)
        config: p4r.ForwardingPipelineConfig = self.stub.GetForwardingPipelineConfig(req, timeout=self.rpc_timeout).config
        return config

    def set_pipeline(self, config: p4r.ForwardingPipelineConfig | None = None, timeout: float = 60.0) -> None:
        """VERIFY_AND_COMMIT `config`, by default the schema's (P4Info, device config and
        the cookie finsy derives from both)."""
        req = p4r.SetForwardingPipelineConfigRequest(
            device_id=self.device_id,
            election_id=self.election_id,
            action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
            config=self.schema.get_pipeline_config() if config is None else config,
        )
        self.stub.SetForwardingPipelineConfig(req, timeout=timeout)

    def ensure_pipeline(self) -> bool:
        """Push the schema's pipeline unless the switch already runs it (same cookie), as
        finsy's Switch does on connect; whether it pushed."""
        try:
            have = self.get_pipeline(p4r.GetForwardingPipelineConfigRequest.COOKIE_ONLY)
        except grpc.RpcError as err:
            # Spec: FAILED_PRECONDITION while no pipeline has been set.
            if err.code() != grpc.StatusCode.FAILED_PRECONDITION:
                raise
        else:
            if have.HasField("cookie") and have.cookie.cookie == self.schema.p4cookie:
                return False
        self.set_pipeline()
        return True

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._out.put(None)
        if self._stream is not None:
            self._stream.cancel()
            self._reader.join(timeout=5)
        self.channel.close()
