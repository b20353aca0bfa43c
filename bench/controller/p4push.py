"""Times writing the whole bucket table (K entries) in one P4Runtime WriteRequest.

Uses the shared P4Runtime client (`supergw_p4rt`, ptf-tests/lib): objects by P4Info name,
names from the generated constants.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from finsy.proto import p4r
from supergw_proto import p4constants as pc
from supergw_proto.addresses import mac_to_int
from supergw_p4rt import (
    DELETE,
    INSERT,
    MODIFY,
    EntityBuilder,
    P4RuntimeClient,
    P4RuntimeClientError,
    entity,
    load_p4info,
    pipeline_config,
    update,
)


def bucket_entries(builder: EntityBuilder, k: int, gateways: Sequence[tuple[int, str]]) -> list[p4r.TableEntry]:
    """One `buckets` entry per bucket, gateways assigned round robin."""
    return [
        builder.table_entry(
            pc.TABLE_BUCKETS,
            {pc.MATCH_BUCKETS_BUCKET: b},
            pc.ACTION_SET_GATEWAY,
            {
                pc.PARAM_SET_GATEWAY_PORT: gateways[b % len(gateways)][0],
                pc.PARAM_SET_GATEWAY_GATEWAY_MAC: mac_to_int(gateways[b % len(gateways)][1]),
            },
        )
        for b in range(k)
    ]


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
    info = load_p4info(p4info)
    with P4RuntimeClient(addr, device_id, election_low=1, rpc_timeout=60.0) as client:
        client.become_primary(timeout=10.0)
        client.set_pipeline(pipeline_config(info))
        builder = EntityBuilder(info)
        entries = bucket_entries(builder, k, gateways)
        moved = bucket_entries(builder, k, list(gateways[1:]) + list(gateways[:1]))
        wildcard = [entity(p4r.TableEntry(table_id=entries[0].table_id))]
        ins, mod, dele = [], [], []
        read_back = 0
        for _ in range(reps):
            ins.append(client.write([update(INSERT, e) for e in entries]))
            read_back = len(client.read(wildcard))
            if read_back != k:
                raise P4RuntimeClientError(f"wrote {k} bucket entries but read back {read_back}")
            mod.append(client.write([update(MODIFY, e) for e in moved]))
            dele.append(client.write([update(DELETE, e) for e in entries]))
        return PushResult(ins, mod, dele, read_back)
