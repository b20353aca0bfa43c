"""Generic P4Runtime PTF base test. Knows nothing about supergw.

Layering follows p4c's tools/ptf/base_test.py: read test params, open the
StreamChannel as primary, push the pipeline, resolve P4Info names by unique
suffix, build/write/read entities, record writes so @autocleanup can replay
INSERTs as DELETEs, and decode per-update p4.v1.Error details for negative tests.
The P4Runtime work itself is the shared client's (`supergw_p4rt`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

import grpc
import ptf
from finsy.proto import p4i, p4r, rpc_code
from ptf.base_tests import BaseTest
from supergw_p4rt import (
    STREAM_KINDS,
    CounterValue,
    EntityBuilder,
    P4InfoIndex,
    P4RuntimeClient,
    P4RuntimeClientError,
    P4RuntimeWriteError,
    Value,
    code_name,
    decode,
    entity,
    load_p4info,
    pipeline_config,
)
from supergw_p4rt.entities import Message

from .p4runtime import TestParams

T = TypeVar("T")


def autocleanup(f: Callable[..., T]) -> Callable[..., T]:
    """Undo every write the test recorded (INSERT → DELETE, MODIFY → restore), even on failure."""

    @functools.wraps(f)
    def wrapper(self: P4RuntimeTest, *args: Any, **kwargs: Any) -> T:
        try:
            return f(self, *args, **kwargs)
        finally:
            self.undo_writes()

    return wrapper


class _AssertP4RuntimeError:
    def __init__(self, test: P4RuntimeTest, code: int, regexp: str | None) -> None:
        self.test = test
        self.code = code
        self.regexp = re.compile(regexp) if regexp else None
        self.exception: P4RuntimeWriteError | None = None

    def __enter__(self) -> _AssertP4RuntimeError:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> bool:
        want = code_name(self.code)
        if exc is None:
            raise self.test.failureException(f"expected a per-update P4Runtime error {want}, the write succeeded")
        if isinstance(exc, grpc.RpcError):
            raise self.test.failureException(
                f"expected per-update error {want} (RPC status UNKNOWN with p4.Error details), "
                f"got RPC status {exc.code().name}: {exc.details()}"
            )
        if not isinstance(exc, P4RuntimeWriteError):
            return False
        self.exception = exc
        if len(exc.errors) != exc.n_updates:
            raise self.test.failureException(
                f"spec: one p4.Error per update; got {len(exc.errors)} for {exc.n_updates} update(s)"
            )
        failed = exc.failed()
        if not failed:
            raise self.test.failureException("RPC status UNKNOWN but every p4.Error is OK")
        _, first = failed[0]
        got = code_name(first.canonical_code)
        if first.canonical_code != self.code:
            raise self.test.failureException(f"expected {want}, got {got}: {first.message!r}")
        if self.regexp and not self.regexp.search(first.message):
            raise self.test.failureException(f"{got} message {first.message!r} does not match {self.regexp.pattern!r}")
        return True


class P4RuntimeTest(BaseTest):  # type: ignore[misc]
    """PTF base test with a primary P4Runtime session and a pushed pipeline."""

    election_low = 10
    default_timeout = 2.0

    params: TestParams
    p4info: p4i.P4Info
    names: P4InfoIndex
    entities: EntityBuilder
    client: P4RuntimeClient

    def setUp(self) -> None:
        BaseTest.setUp(self)
        self.params = TestParams.from_ptf()
        self.dataplane = ptf.dataplane_instance
        self.dataplane.flush()
        self.p4info = load_p4info(self.params.p4info)
        self.names = P4InfoIndex(self.p4info)
        self.entities = EntityBuilder(self.names)
        self._undo: list[p4r.Update] = []
        try:
            self.client = P4RuntimeClient.connect_primary(self.params.grpcaddr, self.params.device_id, self.election_low)
        except P4RuntimeClientError as err:
            self.fail(f"not primary after arbitration: {err}")
        self.addCleanup(self.client.close)
        self.ensure_pipeline()

    def tearDown(self) -> None:
        try:
            self.undo_writes()
        finally:
            BaseTest.tearDown(self)

    def connect(self, election_low: int) -> P4RuntimeClient:
        return P4RuntimeClient(self.params.grpcaddr, self.params.device_id, election_low)

    # ---- pipeline

    def pipeline_config(self, p4info: p4i.P4Info | None = None) -> p4r.ForwardingPipelineConfig:
        info = p4info if p4info is not None else self.p4info
        device = self.params.device_config.read_bytes() if self.params.device_config else b""
        return pipeline_config(info, device)

    def ensure_pipeline(self) -> None:
        """Push the pipeline unless the switch already runs it (same cookie)."""
        want = self.pipeline_config()
        try:
            have = self.client.get_pipeline(p4r.GetForwardingPipelineConfigRequest.COOKIE_ONLY)
        except grpc.RpcError as err:
            # Spec: FAILED_PRECONDITION while no pipeline has been set.
            if err.code() != grpc.StatusCode.FAILED_PRECONDITION:
                raise
        else:
            if have.HasField("cookie") and have.cookie.cookie == want.cookie.cookie:
                return
        self.client.set_pipeline(want)

    # ---- entity builders (the shared client's, named here for the tests)

    def table_entry(
        self,
        table: str,
        match: Mapping[str, Value] | None = None,
        action: str | None = None,
        params: Mapping[str, Value] | None = None,
        *,
        default: bool = False,
        priority: int = 0,
    ) -> p4r.TableEntry:
        return self.entities.table_entry(table, match, action, params, default=default, priority=priority)

    def action(self, name: str, params: Mapping[str, Value]) -> p4r.Action:
        return self.entities.action(name, params)

    def multicast_group(
        self, group_id: int, ports: Sequence[int], *, legacy_port_field: bool = False
    ) -> p4r.PacketReplicationEngineEntry:
        return self.entities.multicast_group(group_id, ports, legacy_port_field=legacy_port_field)

    def digest_entry(self, name: str, max_list_size: int = 1) -> p4r.DigestEntry:
        return self.entities.digest_entry(name, max_list_size)

    # ---- writes (recorded for autocleanup)

    def write(self, kind: p4r.Update.Type.ValueType, *msgs: Message) -> None:
        self.client.write([p4r.Update(type=kind, entity=entity(m)) for m in msgs])

    def insert(self, *msgs: Message) -> None:
        self.write(p4r.Update.INSERT, *msgs)
        self.track_inserted(*msgs)

    def track_inserted(self, *msgs: Message) -> None:
        """Delete `msgs` at cleanup (for entities written by other means, e.g. a batch that
        is expected to fail in part)."""
        self._undo.extend(p4r.Update(type=p4r.Update.DELETE, entity=entity(m)) for m in msgs)

    def modify(self, msg: Message, *, restore: Message | None = None) -> None:
        """MODIFY; `restore` is written back (MODIFY) at cleanup."""
        self.write(p4r.Update.MODIFY, msg)
        if restore is not None:
            self._undo.append(p4r.Update(type=p4r.Update.MODIFY, entity=entity(restore)))

    def delete(self, msg: Message) -> None:
        self.write(p4r.Update.DELETE, msg)
        ent = entity(msg)
        self._undo = [u for u in self._undo if not (u.type == p4r.Update.DELETE and u.entity == ent)]

    def set_default_action(
        self, table: str, action: str, params: Mapping[str, Value] | None = None, *, restore: tuple[str, Mapping[str, Value]] | None = None
    ) -> None:
        entry = self.table_entry(table, action=action, params=params, default=True)
        back = self.table_entry(table, action=restore[0], params=restore[1], default=True) if restore else None
        self.modify(entry, restore=back)

    def undo_writes(self) -> None:
        """Replay recorded writes backwards. NOT_FOUND is fine (the test removed it)."""
        updates, self._undo = list(reversed(self._undo)), []
        if not updates:
            return
        try:
            self.client.write(updates)
        except P4RuntimeWriteError as exc:
            bad = [(i, e) for i, e in exc.failed() if e.canonical_code != rpc_code.NOT_FOUND]
            if bad:
                raise AssertionError(f"cleanup failed: {exc}") from None

    # ---- reads

    def clear_tables(self) -> int:
        """Delete every (non-default) entry of every table; returns how many there were.
        A safety net against state a failed cleanup left behind."""
        stale = [e for t in self.p4info.tables for e in self.read_table(t.preamble.name) if not e.is_default_action]
        if stale:
            self.client.write([p4r.Update(type=p4r.Update.DELETE, entity=entity(e)) for e in stale])
        return len(stale)

    def read_table(self, table: str) -> list[p4r.TableEntry]:
        ents = self.client.read([entity(p4r.TableEntry(table_id=self.names.id("tables", table)))])
        return [e.table_entry for e in ents]

    def read_counters(self, counter: str, indices: Sequence[int]) -> list[CounterValue]:
        """Read several indices of an indirect counter in one Read RPC."""
        counter_id = self.names.id("counters", counter)
        ents = self.client.read([entity(self.entities.counter_entry(counter, i)) for i in indices])
        got = {e.counter_entry.index.index: e.counter_entry.data for e in ents if e.counter_entry.counter_id == counter_id}
        missing = [i for i in indices if i not in got]
        self.assertEqual(missing, [], f"reading {counter} returned no entity for indices {missing}")
        return [CounterValue(got[i].packet_count, got[i].byte_count) for i in indices]

    def read_counter(self, counter: str, index: int) -> CounterValue:
        return self.read_counters(counter, [index])[0]

    def read_direct_counter(self, table_entry: p4r.TableEntry) -> CounterValue:
        key = p4r.TableEntry()
        key.CopyFrom(table_entry)
        key.ClearField("action")
        ents = self.client.read([entity(p4r.DirectCounterEntry(table_entry=key))])
        self.assertEqual(len(ents), 1, f"direct counter read returned {len(ents)} entities")
        data = ents[0].direct_counter_entry.data
        return CounterValue(data.packet_count, data.byte_count)

    # ---- stream: packet-in, packet-out, digests

    def packet_out(self, payload: bytes, **metadata: int) -> None:
        req = p4r.StreamMessageRequest()
        req.packet.payload = payload
        req.packet.metadata.extend(self.entities.packet_metadata("packet_out", metadata))
        self.client.send(req)

    def get_packet_in(self, timeout: float | None = None) -> tuple[bytes, dict[str, int]] | None:
        msg = self.client.get("packet", self.default_timeout if timeout is None else timeout)
        if msg is None:
            return None
        names = {m.id: m.name for m in self.names.metadata("packet_in").values()}
        meta = {names.get(m.metadata_id, str(m.metadata_id)): decode(m.value) for m in msg.packet.metadata}
        return bytes(msg.packet.payload), meta

    def assert_no_packet_in(self, timeout: float = 0.5) -> None:
        got = self.get_packet_in(timeout)
        if got is not None:
            self.fail(f"unexpected packet-in {got[1]} ({len(got[0])} bytes)")

    def get_digest(self, timeout: float | None = None) -> list[dict[str, int]] | None:
        """Next digest list as dicts of member name → value; acknowledged."""
        msg = self.client.get("digest", self.default_timeout if timeout is None else timeout)
        if msg is None:
            return None
        dl = msg.digest
        ack = p4r.StreamMessageRequest()
        ack.digest_ack.digest_id = dl.digest_id
        ack.digest_ack.list_id = dl.list_id
        self.client.send(ack)
        members = self.names.digest_members(dl.digest_id)
        out = []
        for data in dl.data:
            values = [decode(m.bitstring) for m in data.struct.members]
            out.append(dict(zip(members, values, strict=True)))
        return out

    def drain_stream(self) -> None:
        for kind in STREAM_KINDS:
            if kind != "arbitration":
                self.client.drain(kind)

    # ---- assertions

    def assertP4RuntimeError(self, code: int, regexp: str | None = None) -> _AssertP4RuntimeError:  # noqa: N802
        """Expect a Write to fail with per-update canonical `code` (and message matching regexp)."""
        return _AssertP4RuntimeError(self, code, regexp)
