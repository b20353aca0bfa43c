"""Times writing the whole bucket table (K entries) in one P4Runtime WriteRequest.

Entries are finsy's, by the generated P4Info names; the session is the shared synchronous
one (`supergw_p4rt`, ptf-tests/lib). Every update is encoded before the clock starts.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from finsy import P4TableAction, P4TableEntry, P4TableMatch
from supergw_p4rt import DELETE, INSERT, MODIFY, P4RuntimeClientError, P4RuntimeSession, load_schema
from supergw_proto import p4constants as pc


def bucket_entry(bucket: int, port: int, mac: str) -> P4TableEntry:
    params = {pc.PARAM_SET_GATEWAY_PORT: port, pc.PARAM_SET_GATEWAY_GATEWAY_MAC: mac}
    return P4TableEntry(
        pc.TABLE_BUCKETS,
        match=P4TableMatch({pc.MATCH_BUCKETS_BUCKET: bucket}),
        action=P4TableAction(pc.ACTION_SET_GATEWAY, **params),
    )


def bucket_entries(k: int, gateways: Sequence[tuple[int, str]]) -> list[P4TableEntry]:
    """One `buckets` entry per bucket, gateways assigned round robin."""
    return [bucket_entry(b, *gateways[b % len(gateways)]) for b in range(k)]


@dataclass(frozen=True)
class PushResult:
    insert_s: list[float]
    modify_s: list[float]
    delete_s: list[float]
    entries_read_back: int

    @property
    def insert_median(self) -> float:
        return statistics.median(self.insert_s)

    @property
    def modify_median(self) -> float:
        return statistics.median(self.modify_s)


def measure_full_table_push(
    addr: str, device_id: int, p4info: Path, k: int, gateways: Sequence[tuple[int, str]], reps: int = 3
) -> PushResult:
    """INSERT all K entries in one batch, read them back, MODIFY all, DELETE all; `reps` times."""
    with P4RuntimeSession(addr, device_id, 1, load_schema(p4info), rpc_timeout=60.0) as session:
        session.become_primary(timeout=10.0)
        session.set_pipeline()
        entries = bucket_entries(k, gateways)
        inserts, deletes = session.updates(INSERT, entries), session.updates(DELETE, entries)
        modifies = session.updates(MODIFY, bucket_entries(k, list(gateways[1:]) + list(gateways[:1])))
        wildcard = [P4TableEntry(pc.TABLE_BUCKETS)]
        ins, mod, dele = [], [], []
        read_back = 0
        for _ in range(reps):
            ins.append(session.write(inserts))
            read_back = len(session.read(wildcard))
            if read_back != k:
                raise P4RuntimeClientError(f"wrote {k} bucket entries but read back {read_back}")
            mod.append(session.write(modifies))
            dele.append(session.write(deletes))
        return PushResult(ins, mod, dele, read_back)
