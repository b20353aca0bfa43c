"""SwitchSession.write inspects per-update P4Runtime errors (spec "Error Reporting")."""

from __future__ import annotations

import asyncio

from pathlib import Path
from typing import Any

import grpc
import pytest
from finsy import P4ClientError
from finsy.p4schema import P4Schema
from finsy.proto import p4r, rpc_code, rpc_status

from supergw_proto import p4constants as pc
from supergw_controller.errors import NotPrimary, SwitchUnavailable
from supergw_controller.southbound import entities as ent
from supergw_controller.southbound.entities import Op, Update
from supergw_controller.southbound.session import Role, SwitchSession, WriteError

from corekit import P4INFO, LoopTicks, make_config


def write_error(codes: list[int]) -> P4ClientError:
    """The error a P4Runtime server returns for a batch: one p4.Error per update."""
    status = rpc_status.Status(code=rpc_code.UNKNOWN, message="batch failed")
    for c in codes:
        status.details.add().Pack(p4r.Error(canonical_code=c, message=f"code {c}"))
    md = grpc.aio.Metadata(("grpc-status-details-bin", status.SerializeToString()))
    rpc = grpc.aio.AioRpcError(grpc.StatusCode.UNKNOWN, grpc.aio.Metadata(), md, "batch failed")
    return P4ClientError(rpc, "write")


class FakeSwitch:
    """Stands in for finsy's Switch: records WriteRequests, fails them as scripted."""

    def __init__(self, script: list[list[int] | None]) -> None:
        self.script = script
        self.requests: list[list[tuple[int, int]]] = []
        self.p4info = P4Schema(P4INFO)
        self.address = "fake:1"

    async def write(self, msgs: list[Any]) -> None:
        self.requests.append([(m.type, m.entity.table_entry.match[0].exact.value[0]) for m in msgs])
        codes = self.script.pop(0)
        if codes is not None:
            raise write_error(codes)


def session(tmp_path: Path, script: list[list[int] | None]) -> tuple[SwitchSession, FakeSwitch]:
    async def nop(*_: Any) -> None:
        return None

    s = SwitchSession(make_config(tmp_path), nop, lambda _r: None)
    fake = FakeSwitch(script)
    s.switch = fake  # type: ignore[assignment]
    s.role = Role.PRIMARY
    return s, fake


def ups() -> list[Update]:
    return [
        Update(Op.INSERT, ent.bucket(1, 11, "52:54:00:00:01:01")),
        Update(Op.MODIFY, ent.bucket(2, 11, "52:54:00:00:01:01")),
        Update(Op.DELETE, ent.bucket_key(3)),
        Update(Op.INSERT, ent.bucket(4, 11, "52:54:00:00:01:01")),
    ]


OK, EXISTS, NOTFOUND, INVALID = rpc_code.OK, rpc_code.ALREADY_EXISTS, rpc_code.NOT_FOUND, rpc_code.INVALID_ARGUMENT


async def test_clean_batch_is_one_request(tmp_path: Path) -> None:
    s, fake = session(tmp_path, [None])
    await s.write(ups())
    assert fake.requests == [[(1, 1), (2, 2), (3, 3), (1, 4)]]


async def test_races_are_fixed_up_in_one_more_batch(tmp_path: Path) -> None:
    s, fake = session(tmp_path, [[EXISTS, NOTFOUND, NOTFOUND, OK], None])
    await s.write(ups())
    # INSERT that existed -> MODIFY, MODIFY of a missing entry -> INSERT, DELETE of a missing one dropped
    assert fake.requests[1] == [(int(Op.MODIFY), 1), (int(Op.INSERT), 2)]
    assert s.errors == 0


async def test_real_errors_name_the_failing_updates(tmp_path: Path) -> None:
    s, fake = session(tmp_path, [[OK, OK, OK, INVALID]])
    with pytest.raises(WriteError) as ei:
        await s.write(ups())
    assert "1 of 4 updates failed" in str(ei.value) and "INVALID_ARGUMENT" in str(ei.value)
    assert ei.value.failures[0][0].entity.match["bucket"] == 4
    assert s.errors == 1


async def test_strict_write_does_not_retry(tmp_path: Path) -> None:
    s, fake = session(tmp_path, [[EXISTS, OK, OK, OK]])
    with pytest.raises(WriteError):
        await s.write(ups(), idempotent=False)
    assert len(fake.requests) == 1


async def test_backup_and_disconnected_refuse_to_write(tmp_path: Path) -> None:
    s, fake = session(tmp_path, [])
    s.role = Role.BACKUP
    with pytest.raises(NotPrimary):
        await s.write(ups())
    s.role = Role.DISCONNECTED
    with pytest.raises(SwitchUnavailable):
        await s.write(ups())
    assert fake.requests == []
    assert pc.TABLE_BUCKETS  # names come from the generated constants


class ReadingSwitch:
    """finsy's read: an async generator handing over one decoded entity at a time."""

    def __init__(self, n: int) -> None:
        self.n = n

    async def read(self, _entity: Any) -> Any:
        for i in range(self.n):
            yield i


async def test_a_long_read_lets_the_event_loop_run_other_work(tmp_path: Path) -> None:
    """Reading 4,096 counters (or a site's hosts) must not hold the loop in one piece: other
    tasks (a REST answer, a heartbeat) run every `yield_every` entities."""
    s, _ = session(tmp_path, [])
    s.switch = ReadingSwitch(1000)  # type: ignore[assignment]
    ticks = LoopTicks()
    await asyncio.sleep(0)
    before = ticks.count
    assert await s.read("whatever", yield_every=100) == list(range(1000))
    assert ticks.count - before >= 9  # ran between the slices
    before = ticks.count
    await s.read("whatever")  # in one piece without it
    assert ticks.count - before <= 1
    ticks.stop()
