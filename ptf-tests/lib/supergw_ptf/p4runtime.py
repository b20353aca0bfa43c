"""Generic P4Runtime client pieces: value encoding, P4Info name index, per-update
error decoding and one session (channel, StreamChannel reader, arbitration).
Knows nothing about supergw."""

from __future__ import annotations

import logging
import queue
import threading
from collections import Counter as Multiset
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import grpc
from finsy.proto import p4i, p4r, p4r_grpc, rpc_code, rpc_status
from google.protobuf import text_format
from ptf import testutils
from pydantic import BaseModel, ConfigDict, Field

LOG = logging.getLogger("supergw_ptf")

Value = int | bytes
"""A P4Runtime field value: an int is encoded canonically and range-checked; bytes
are sent as given (negative tests use that to send what does not fit)."""

StreamKind = Literal["arbitration", "packet", "digest", "idle_timeout_notification", "error", "other"]

class TestParams(BaseModel):
    """What run.sh passes with --test-params."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    grpcaddr: str = Field(min_length=3)
    p4info: Path
    device_id: int = Field(ge=0)
    cpu_port: int = Field(ge=0)
    target: Literal["ebpf", "bmv2"]
    device_config: Path | None = None
    ports_file: Path | None = None

    @classmethod
    def from_ptf(cls) -> TestParams:
        return cls.model_validate(testutils.test_params_get())


# --------------------------------------------------------------------------- values


def encode(value: Value, bitwidth: int) -> bytes:
    """Canonical (shortest, at least one byte) big-endian encoding, P4Runtime 1.4 §8.4."""
    if isinstance(value, bytes):
        return value
    if value < 0 or value.bit_length() > bitwidth:
        raise ValueError(f"{value:#x} does not fit in bit<{bitwidth}>")
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def decode(data: bytes) -> int:
    return int.from_bytes(data, "big")


def code_name(code: int) -> str:
    return rpc_code.Code.Name(code) if code in rpc_code.Code.values() else str(code)


# --------------------------------------------------------------------------- P4Info


def load_p4info(path: Path) -> p4i.P4Info:
    info = p4i.P4Info()
    text_format.Parse(path.read_text(encoding="utf-8"), info)
    return info


_KINDS = (
    "tables",
    "actions",
    "counters",
    "direct_counters",
    "meters",
    "direct_meters",
    "digests",
    "controller_packet_metadata",
    "action_profiles",
    "registers",
)


class P4InfoIndex:
    """Look P4Info objects up by full name or by any unique dotted suffix."""

    def __init__(self, info: p4i.P4Info) -> None:
        self.info = info
        self._by_name: dict[tuple[str, str], Any] = {}
        self._by_id: dict[int, Any] = {}
        for kind in _KINDS:
            full = {obj.preamble.name for obj in getattr(info, kind)}
            counts: Multiset[str] = Multiset()
            suffixes: dict[str, Any] = {}
            for obj in getattr(info, kind):
                self._by_name[(kind, obj.preamble.name)] = obj
                self._by_id[obj.preamble.id] = obj
                parts = obj.preamble.name.split(".")
                for i in range(1, len(parts)):
                    suffix = ".".join(parts[i:])
                    if suffix not in full:
                        counts[suffix] += 1
                        suffixes[suffix] = obj
            for suffix, obj in suffixes.items():
                if counts[suffix] == 1:
                    self._by_name[(kind, suffix)] = obj

    def get(self, kind: str, name: str) -> Any:
        try:
            return self._by_name[(kind, name)]
        except KeyError:
            raise KeyError(f"no unique {kind[:-1]} named {name!r} in the P4Info") from None

    def id(self, kind: str, name: str) -> int:
        return int(self.get(kind, name).preamble.id)

    def by_id(self, obj_id: int) -> Any:
        return self._by_id[obj_id]

    def match_field(self, table: str, field: str) -> p4i.MatchField:
        for mf in self.get("tables", table).match_fields:
            if mf.name == field:
                return mf
        raise KeyError(f"table {table!r} has no match field {field!r}")

    def param(self, action: str, param: str) -> p4i.Action.Param:
        for p in self.get("actions", action).params:
            if p.name == param:
                return p
        raise KeyError(f"action {action!r} has no param {param!r}")

    def metadata(self, header: str) -> dict[str, p4i.ControllerPacketMetadata.Metadata]:
        return {m.name: m for m in self.get("controller_packet_metadata", header).metadata}


# --------------------------------------------------------------------------- errors


class P4RuntimeWriteError(Exception):
    """A Write failed with per-update p4.v1.Error details (RPC status UNKNOWN)."""

    def __init__(self, rpc_error: grpc.RpcError, errors: list[p4r.Error], n_updates: int) -> None:
        self.rpc_error = rpc_error
        self.errors = errors  # one per update, OK ones included (spec §12.2)
        self.n_updates = n_updates
        super().__init__(str(self))

    def failed(self) -> list[tuple[int, p4r.Error]]:
        return [(i, e) for i, e in enumerate(self.errors) if e.canonical_code != rpc_code.OK]

    def __str__(self) -> str:
        lines = [f"Write of {self.n_updates} update(s) failed:"]
        for i, e in self.failed():
            lines.append(f"  [{i}] {code_name(e.canonical_code)}: {e.message}")
        return "\n".join(lines)


def _write_error(err: grpc.RpcError, n_updates: int) -> Exception:
    """Turn a Write's RpcError into P4RuntimeWriteError when it carries p4.Error details."""
    if err.code() != grpc.StatusCode.UNKNOWN:
        return err
    status = None
    for key, value in err.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status = rpc_status.Status.FromString(value)
    if status is None or not status.details:
        return err
    errors: list[p4r.Error] = []
    for detail in status.details:
        e = p4r.Error()
        if not detail.Unpack(e):
            return err
        errors.append(e)
    return P4RuntimeWriteError(err, errors, n_updates)


# --------------------------------------------------------------------------- entities


def entity(msg: Any) -> p4r.Entity:
    """Wrap a table/counter/PRE/digest message into an Entity."""
    field = {
        p4r.TableEntry: "table_entry",
        p4r.CounterEntry: "counter_entry",
        p4r.DirectCounterEntry: "direct_counter_entry",
        p4r.PacketReplicationEngineEntry: "packet_replication_engine_entry",
        p4r.DigestEntry: "digest_entry",
        p4r.RegisterEntry: "register_entry",
    }[type(msg)]
    ent = p4r.Entity()
    getattr(ent, field).CopyFrom(msg)
    return ent


@dataclass(frozen=True)
class CounterValue:
    packets: int
    bytes: int

    def __sub__(self, other: CounterValue) -> CounterValue:
        return CounterValue(self.packets - other.packets, self.bytes - other.bytes)


# --------------------------------------------------------------------------- client


class P4RuntimeClient:
    """One P4Runtime session: channel, stub, StreamChannel reader and arbitration."""

    def __init__(self, addr: str, device_id: int, election_low: int) -> None:
        self.device_id = device_id
        self.election_id = p4r.Uint128(high=0, low=election_low)
        self.channel = grpc.insecure_channel(addr)
        self.stub = p4r_grpc.P4RuntimeStub(self.channel)
        self._out: queue.Queue[p4r.StreamMessageRequest | None] = queue.Queue()
        self._in: dict[str, queue.Queue[p4r.StreamMessageResponse]] = {
            k: queue.Queue() for k in StreamKind.__args__  # type: ignore[attr-defined]
        }
        self._stream = self.stub.StreamChannel(self._requests())
        self._reader = threading.Thread(target=self._read_stream, name="p4rt-stream", daemon=True)
        self._reader.start()
        self._closed = False

    def _requests(self) -> Iterator[p4r.StreamMessageRequest]:
        while (msg := self._out.get()) is not None:
            yield msg

    def _read_stream(self) -> None:
        try:
            for msg in self._stream:
                kind = msg.WhichOneof("update") or "other"
                self._in.get(kind, self._in["other"]).put(msg)
        except grpc.RpcError as err:
            if err.code() != grpc.StatusCode.CANCELLED:
                LOG.warning("P4Runtime stream ended: %s", err)

    def arbitrate(self, timeout: float = 5.0) -> p4r.MasterArbitrationUpdate:
        req = p4r.StreamMessageRequest()
        req.arbitration.device_id = self.device_id
        req.arbitration.election_id.CopyFrom(self.election_id)
        self._out.put(req)
        msg = self.get("arbitration", timeout)
        if msg is None:
            raise TimeoutError(f"no arbitration reply within {timeout}s")
        return msg.arbitration

    def get(self, kind: StreamKind, timeout: float) -> p4r.StreamMessageResponse | None:
        try:
            return self._in[kind].get(timeout=timeout)
        except queue.Empty:
            return None

    def drain(self, kind: StreamKind) -> list[p4r.StreamMessageResponse]:
        out = []
        while True:
            try:
                out.append(self._in[kind].get_nowait())
            except queue.Empty:
                return out

    def send(self, req: p4r.StreamMessageRequest) -> None:
        self._out.put(req)

    def write(self, updates: Sequence[p4r.Update]) -> None:
        req = p4r.WriteRequest(device_id=self.device_id, election_id=self.election_id)
        req.atomicity = p4r.WriteRequest.CONTINUE_ON_ERROR
        req.updates.extend(updates)
        try:
            self.stub.Write(req, timeout=10)
        except grpc.RpcError as err:
            raise _write_error(err, len(updates)) from None

    def read(self, entities: Sequence[p4r.Entity]) -> list[p4r.Entity]:
        req = p4r.ReadRequest(device_id=self.device_id)
        req.entities.extend(entities)
        out: list[p4r.Entity] = []
        for resp in self.stub.Read(req, timeout=10):
            out.extend(resp.entities)
        return out

    def get_pipeline(
        self, response_type: int = p4r.GetForwardingPipelineConfigRequest.ALL
    ) -> p4r.ForwardingPipelineConfig:
        req = p4r.GetForwardingPipelineConfigRequest(device_id=self.device_id, response_type=response_type)
        return self.stub.GetForwardingPipelineConfig(req, timeout=10).config

    def set_pipeline(self, config: p4r.ForwardingPipelineConfig) -> None:
        req = p4r.SetForwardingPipelineConfigRequest(
            device_id=self.device_id,
            election_id=self.election_id,
            action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
            config=config,
        )
        self.stub.SetForwardingPipelineConfig(req, timeout=60)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._out.put(None)
        self._stream.cancel()
        self._reader.join(timeout=5)
        self.channel.close()
