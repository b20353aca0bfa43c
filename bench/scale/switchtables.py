"""The switch's host tables as bench/scale sees them, over P4Runtime (`supergw_p4rt`).

`Observer` reads without a StreamChannel (it never arbitrates, so it cannot become primary
while the controller restarts) and records when each key of a table first showed up: the
learning measurement's "entries on the switch". `clear_host_tables` deletes every host entry
as a primary of its own, with the controller stopped: each point starts from an empty table
whatever the switch keeps across restarts.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from finsy import P4TableEntry
from finsy.proto import p4r
from supergw_p4rt import DELETE, P4RuntimeSession, load_schema
from supergw_proto import p4constants as pc

HOST_TABLES = (pc.TABLE_LEARNED_SOURCES, pc.TABLE_MAC_TABLE, pc.TABLE_HOST_IPS, pc.TABLE_LEARNED_IP6S,
               pc.TABLE_HOST_IP6S)
DELETE_BATCH = 5000
ELECTION_LOW = 1 << 40  # above any controller's: the benchmark's own primary session, controller stopped


def keys(entities: Iterable[p4r.Entity]) -> list[bytes]:
    """The match bytes of each table entry read (one exact field: the table's key)."""
    return [e.table_entry.match[0].exact.value for e in entities]


@dataclass
class Seen:
    """When each key of one table was first read from the switch (monotonic seconds)."""

    first: dict[bytes, float] = field(default_factory=dict)
    reads: list[tuple[float, float, int]] = field(default_factory=list)  # (start, seconds, entries)

    def add(self, found: Iterable[bytes], at: float) -> int:
        new = 0
        for k in found:
            if k not in self.first:
                self.first[k] = at
                new += 1
        return new


class Observer:
    """Reads tables of the switch at `addr` without a stream (see the module doc)."""

    def __init__(self, addr: str, device_id: int, p4info: Path, clock: Callable[[], float] = time.monotonic) -> None:
        self._session = P4RuntimeSession(addr, device_id, 0, load_schema(p4info), rpc_timeout=60.0, stream=False)
        self._clock = clock

    def close(self) -> None:
        self._session.close()

    def read(self, table: str) -> list[p4r.Entity]:
        return self._session.read([P4TableEntry(table)])

    def count(self, table: str) -> int:
        return len(self.read(table))

    def poll(self, table: str, seen: Seen) -> int:
        """Read `table` once, note the keys not seen before at the read's start; its size."""
        start = self._clock()
        found = keys(self.read(table))
        seen.reads.append((start, self._clock() - start, len(found)))
        seen.add(found, start)
        return len(found)


def clear_host_tables(addr: str, device_id: int, p4info: Path) -> dict[str, int]:
    """Delete every entry of the host tables (the controller must be stopped: this session
    becomes primary); how many entries each held."""
    held: dict[str, int] = {}
    with P4RuntimeSession.connect_primary(addr, device_id, ELECTION_LOW, load_schema(p4info), rpc_timeout=120.0) as s:
        for table in HOST_TABLES:
            entries = s.read([P4TableEntry(table)])
            held[table] = len(entries)
            for i in range(0, len(entries), DELETE_BATCH):
                updates = []
                for e in entries[i : i + DELETE_BATCH]:
                    u = p4r.Update(type=DELETE)
                    te = u.entity.table_entry
                    te.table_id = e.table_entry.table_id
                    te.match.extend(e.table_entry.match)
                    updates.append(u)
                s.write(updates)
            if left := len(s.read([P4TableEntry(table)])):
                raise RuntimeError(f"{table}: {left} entries left after deleting {len(entries)}")
    return held
