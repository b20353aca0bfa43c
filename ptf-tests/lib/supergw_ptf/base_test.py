"""Generic P4Runtime PTF base test. Knows nothing about supergw.

Layering follows p4c's tools/ptf/base_test.py: read test params, open the StreamChannel
as primary, push the pipeline, write and read entities, record writes so cleanup can
replay INSERTs as DELETEs, and decode per-update p4.v1.Error details for negative tests.
Entities are finsy's (`P4TableEntry(...)` by P4Info name, encoded and decoded against
`self.schema`); the session is the shared one (`supergw_p4rt`).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeVar

import grpc
import ptf
from finsy import P4CounterEntry, P4DirectCounterEntry, P4PacketIn, P4TableAction, P4TableEntry
from finsy.p4schema import P4Schema
from finsy.proto import p4i, p4r, rpc_code
from ptf.base_tests import BaseTest
from supergw_p4rt import (
    DELETE,
    INSERT,
    MODIFY,
    STREAM_KINDS,
    Entity,
    P4RuntimeClientError,
    P4RuntimeSession,
    P4RuntimeWriteError,
    code_name,
    encode,
    load_schema,
)

from .params import TestParams

T = TypeVar("T")


def autocleanup(f: Callable[..., T]) -> Callable[..., T]:
    """Undo every write the test recorded (INSERT → DELETE, MODIFY → restore) as soon as
    the test body ends, even on failure (tearDown would do it next anyway)."""

    @functools.wraps(f)
    def wrapper(self: P4RuntimeTest, *args: Any, **kwargs: Any) -> T:
        try:
            return f(self, *args, **kwargs)
        finally:
            self.undo_writes()

    return wrapper


@dataclass(frozen=True)
class CounterValue:
    packets: int
    bytes: int

    def __sub__(self, other: CounterValue) -> CounterValue:
        return CounterValue(self.packets - other.packets, self.bytes - other.bytes)


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
    schema: P4Schema
    client: P4RuntimeSession

    def setUp(self) -> None:
        BaseTest.setUp(self)
        self.params = TestParams.from_ptf()
        self.dataplane = ptf.dataplane_instance
        self.dataplane.flush()
        self.schema = load_schema(self.params.p4info, self.device_config())
        self._undo: list[p4r.Update] = []
        try:
            self.client = P4RuntimeSession.connect_primary(
                self.params.grpcaddr, self.params.device_id, self.election_low, self.schema
            )
        except P4RuntimeClientError as err:
            self.fail(f"not primary after arbitration: {err}")
        self.addCleanup(self.client.close)
        self.client.ensure_pipeline()

    def tearDown(self) -> None:
        try:
            self.undo_writes()
        finally:
            BaseTest.tearDown(self)

    def connect(self, election_low: int) -> P4RuntimeSession:
        """Another session (not arbitrated yet) with the same schema."""
        return P4RuntimeSession(self.params.grpcaddr, self.params.device_id, election_low, self.schema)

    # ---- pipeline

    def device_config(self) -> bytes:
        return self.params.device_config.read_bytes() if self.params.device_config else b""

    def pipeline_config(self, p4info: p4i.P4Info | None = None) -> p4r.ForwardingPipelineConfig:
        """The config to push (P4Info, device config, cookie), for another P4Info if given."""
        schema = self.schema if p4info is None else P4Schema(p4info, self.device_config())
        return schema.get_pipeline_config()

    # ---- writes (recorded for cleanup)

    def encode(self, entity: Entity) -> p4r.Entity:
        """The entity as finsy encodes it: alter the result to send what finsy refuses to build."""
        return encode(entity, self.schema)

    def write(self, kind: p4r.Update.Type.ValueType, *entities: Entity) -> None:
        self.client.write(self.client.updates(kind, entities))

    def insert(self, *entities: Entity) -> None:
        self.write(INSERT, *entities)
        self.track_inserted(*entities)

    def track_inserted(self, *entities: Entity) -> None:
        """Delete `entities` at cleanup (for entities written by other means, e.g. a batch
        that is expected to fail in part)."""
        self._undo.extend(self.client.updates(DELETE, entities))

    def modify(self, entity: Entity, *, restore: Entity | None = None) -> None:
        """MODIFY; `restore` is written back (MODIFY) at cleanup."""
        self.write(MODIFY, entity)
        if restore is not None:
            self._undo.extend(self.client.updates(MODIFY, [restore]))

    def delete(self, entity: Entity) -> None:
        self.write(DELETE, entity)
        ent = self.encode(entity)
        self._undo = [u for u in self._undo if not (u.type == DELETE and u.entity == ent)]

    def set_default_action(self, table: str, action: P4TableAction, *, restore: P4TableAction | None = None) -> None:
        """MODIFY the default action of `table`; `restore` is written back at cleanup."""
        back = None if restore is None else P4TableEntry(table, action=restore, is_default_action=True)
        self.modify(P4TableEntry(table, action=action, is_default_action=True), restore=back)

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
        stale = [e for t in self.schema.tables for e in self.read_table_wire(t.name) if not e.is_default_action]
        if stale:
            self.client.write([p4r.Update(type=DELETE, entity=p4r.Entity(table_entry=e)) for e in stale])
        return len(stale)

    def read_table_wire(self, table: str) -> list[p4r.TableEntry]:
        """Every entry of `table` exactly as the switch sends it (canonical-bytes checks)."""
        return [e.table_entry for e in self.client.read([P4TableEntry(table)])]

    def read_table(self, table: str) -> list[P4TableEntry]:
        """Every entry of `table`, decoded by finsy."""
        return [P4TableEntry.decode_entry(e, self.schema) for e in self.read_table_wire(table)]

    def read_counters(self, counter: str, indices: Sequence[int]) -> list[CounterValue]:
        """Read several indices of an indirect counter in one Read RPC."""
        ents = self.client.read([P4CounterEntry(counter, index=i) for i in indices])
        decoded = [P4CounterEntry.decode(e, self.schema) for e in ents]
        got = {c.index: c for c in decoded if c.counter_id == self.schema.counters[counter].alias}
        missing = [i for i in indices if i not in got]
        self.assertEqual(missing, [], f"reading {counter} returned no entity for indices {missing}")
        return [CounterValue(got[i].packet_count, got[i].byte_count) for i in indices]

    def read_counter(self, counter: str, index: int) -> CounterValue:
        return self.read_counters(counter, [index])[0]

    def read_direct_counter(self, table_entry: P4TableEntry) -> CounterValue:
        key = dataclasses.replace(table_entry, action=None)
        ents = self.client.read([P4DirectCounterEntry(table_entry=key)])
        self.assertEqual(len(ents), 1, f"direct counter read returned {len(ents)} entities")
        data = P4DirectCounterEntry.decode(ents[0], self.schema)
        return CounterValue(data.packet_count, data.byte_count)

    # ---- stream: packet-in, packet-out, digests

    def packet_out(self, payload: bytes, **metadata: int) -> None:
        self.client.packet_out(payload, **metadata)

    def get_packet_in(self, timeout: float | None = None) -> P4PacketIn | None:
        return self.client.packet_in(self.default_timeout if timeout is None else timeout)

    def assert_no_packet_in(self, timeout: float = 0.5) -> None:
        got = self.get_packet_in(timeout)
        if got is not None:
            self.fail(f"unexpected packet-in {got.metadata} ({len(got.payload)} bytes)")

    def get_digest(self, timeout: float | None = None) -> list[dict[str, int]] | None:
        """Next digest list as dicts of member name → value; acknowledged."""
        digests = self.client.digest(self.default_timeout if timeout is None else timeout)
        return None if digests is None else list(digests.data)

    def drain_stream(self) -> None:
        for kind in STREAM_KINDS:
            if kind != "arbitration":
                self.client.drain(kind)

    # ---- assertions

    def assertP4RuntimeError(self, code: int, regexp: str | None = None) -> _AssertP4RuntimeError:  # noqa: N802
        """Expect a Write to fail with per-update canonical `code` (and message matching regexp)."""
        return _AssertP4RuntimeError(self, code, regexp)
