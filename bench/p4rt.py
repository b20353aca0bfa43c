"""A minimal synchronous P4Runtime client for the benchmarks: arbitration, pipeline, writes, reads.

Objects are looked up by name in the P4Info (never by hard-coded ID). Values are sent
as canonical (shortest) byte strings, as the P4Runtime spec asks of clients.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import grpc
from finsy.proto import p4i, p4r, p4r_grpc
from google.protobuf import text_format


class P4RuntimeClientError(RuntimeError):
    """The switch refused a request, or the P4Info lacks a named object."""


def canonical(value: int) -> bytes:
    if value < 0:
        raise ValueError(f"negative value {value}")
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def load_p4info(path: Path) -> p4i.P4Info:
    info = p4i.P4Info()
    data = path.read_bytes()
    if path.suffix in (".txt", ".txtpb", ".pbtxt"):
        text_format.Parse(data.decode(), info)
    else:
        info.ParseFromString(data)
    return info


class Client:
    """Primary client of one device: opens the stream and wins arbitration on creation."""

    def __init__(self, addr: str, device_id: int, election_low: int = 100, timeout: float = 5.0) -> None:
        self.device_id = device_id
        self.election = p4r.Uint128(high=0, low=election_low)
        self._channel = grpc.insecure_channel(addr)
        self._stub = p4r_grpc.P4RuntimeStub(self._channel)
        self._outbox: queue.Queue[p4r.StreamMessageRequest | None] = queue.Queue()
        self._inbox: queue.Queue[p4r.StreamMessageResponse] = queue.Queue()
        self._stream = self._stub.StreamChannel(self._requests())
        self._reader = threading.Thread(target=self._read, name="p4rt-stream", daemon=True)
        self._reader.start()
        try:
            self._outbox.put(
                p4r.StreamMessageRequest(
                    arbitration=p4r.MasterArbitrationUpdate(device_id=device_id, election_id=self.election)
                )
            )
            deadline = time.monotonic() + timeout
            while True:
                try:
                    msg = self._inbox.get(timeout=max(0.01, deadline - time.monotonic()))
                except queue.Empty:
                    raise P4RuntimeClientError(f"no arbitration reply from device {device_id} at {addr}") from None
                if msg.HasField("arbitration"):
                    if msg.arbitration.status.code != 0:
                        raise P4RuntimeClientError(f"not primary: {msg.arbitration.status.message}")
                    break
        except BaseException:
            self.close()  # end the stream generator and the channel: nothing leaks
            raise
        self._entities: EntityBuilder | None = None  # set with the pipeline

    def _requests(self) -> Iterator[p4r.StreamMessageRequest]:
        while (msg := self._outbox.get()) is not None:
            yield msg

    def _read(self) -> None:
        try:
            for msg in self._stream:
                if msg.HasField("arbitration"):
                    self._inbox.put(msg)
        except grpc.RpcError:
            pass

    def close(self) -> None:
        self._outbox.put(None)
        self._channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def set_pipeline(self, info: p4i.P4Info, device_config: bytes = b"") -> None:
        req = p4r.SetForwardingPipelineConfigRequest(
            device_id=self.device_id,
            election_id=self.election,
            action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
            config=p4r.ForwardingPipelineConfig(p4info=info, p4_device_config=device_config),
        )
        self._stub.SetForwardingPipelineConfig(req)
        self.use_pipeline(info)

    def use_pipeline(self, info: p4i.P4Info) -> None:
        """Name objects by `info` without pushing it (the switch already runs it)."""
        self._entities = EntityBuilder(info)

    def table_entry(
        self,
        table: str,
        match: Mapping[str, int],
        action: str,
        params: Mapping[str, int],
        default: bool = False,
    ) -> p4r.TableEntry:
        if self._entities is None:
            raise P4RuntimeClientError("set_pipeline first")
        return self._entities.table_entry(table, match, action, params, default)

    def write(self, updates: Sequence[tuple[int, p4r.TableEntry]], timeout: float = 60.0) -> float:
        """One WriteRequest with every update; returns seconds from send to the RPC's reply."""
        req = p4r.WriteRequest(device_id=self.device_id, election_id=self.election, atomicity=p4r.WriteRequest.CONTINUE_ON_ERROR)
        for kind, entry in updates:
            req.updates.add(type=kind, entity=p4r.Entity(table_entry=entry))
        start = time.perf_counter()
        try:
            self._stub.Write(req, timeout=timeout)
        except grpc.RpcError as exc:
            raise P4RuntimeClientError(
                f"Write of {len(updates)} updates failed: {exc.code().name}: {exc.details()}"
            ) from None
        return time.perf_counter() - start

    def count_entries(self, table_id: int, timeout: float = 60.0) -> int:
        """How many entries the switch holds in one table (a wildcard Read)."""
        req = p4r.ReadRequest(device_id=self.device_id, entities=[p4r.Entity(table_entry=p4r.TableEntry(table_id=table_id))])
        return sum(len(resp.entities) for resp in self._stub.Read(req, timeout=timeout))

    def timed_write(self, kind: int, entry: p4r.TableEntry) -> float:
        """One single-update Write; returns seconds from send to the RPC's reply."""
        req = p4r.WriteRequest(device_id=self.device_id, election_id=self.election)
        req.updates.add(type=kind, entity=p4r.Entity(table_entry=entry))
        start = time.perf_counter()
        self._stub.Write(req)
        return time.perf_counter() - start


class EntityBuilder:
    """P4Runtime entities from P4Info names (exact, or a unique `.`-suffix)."""

    def __init__(self, info: p4i.P4Info) -> None:
        self.info = info

    def _table(self, name: str) -> p4i.Table:
        tables: Sequence[p4i.Table] = self.info.tables
        for t in tables:
            if t.preamble.name == name or t.preamble.name.endswith("." + name):
                return t
        raise P4RuntimeClientError(f"table {name!r} not in the P4Info")

    def _action(self, name: str) -> p4i.Action:
        actions: Sequence[p4i.Action] = self.info.actions
        for a in actions:
            if a.preamble.name == name or a.preamble.name.endswith("." + name):
                return a
        raise P4RuntimeClientError(f"action {name!r} not in the P4Info")

    def table_entry(
        self,
        table: str,
        match: Mapping[str, int],
        action: str,
        params: Mapping[str, int],
        default: bool = False,
    ) -> p4r.TableEntry:
        t = self._table(table)
        a = self._action(action)
        if a.preamble.id not in {ref.id for ref in t.action_refs}:
            raise P4RuntimeClientError(f"action {action} is not an action of table {table}")
        fields = {f.name: f for f in t.match_fields}
        entry = p4r.TableEntry(table_id=t.preamble.id, is_default_action=default)
        for name, value in match.items():
            if name not in fields:
                raise P4RuntimeClientError(f"table {table}: no match field {name!r}")
            entry.match.add(field_id=fields[name].id, exact=p4r.FieldMatch.Exact(value=canonical(value)))
        pids = {p.name: p.id for p in a.params}
        act = p4r.Action(action_id=a.preamble.id)
        for name, value in params.items():
            if name not in pids:
                raise P4RuntimeClientError(f"action {action}: no param {name!r}")
            act.params.add(param_id=pids[name], value=canonical(value))
        entry.action.action.CopyFrom(act)
        return entry


INSERT = p4r.Update.INSERT
MODIFY = p4r.Update.MODIFY
DELETE = p4r.Update.DELETE
