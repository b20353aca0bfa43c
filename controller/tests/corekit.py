"""What the core's unit tests share: one config, a fake clock, a recording switch session,
and the composed core running on it (no switch, no finsy stream)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from finsy.p4schema import P4Schema

from supergw_proto import p4constants as pc
from supergw_controller.compose import ControllerCore
from supergw_controller.config import Config, parse_config
from supergw_controller.errors import NotPrimary, SwitchUnavailable
from supergw_controller.intent_store import Intent, IntentStore
from supergw_controller.southbound.domain import HostWrite, Op
from supergw_controller.southbound.entities import BucketEntry, Update, host_update
from supergw_controller.southbound.session import Role

P4INFO = Path(__file__).resolve().parents[2] / "p4src" / "v1model" / "supergw.p4info.txtpb"
# The bucket -> gateway table the core tests start from: g1, g2, g3 in turn over K = 16.
ROUND_ROBIN = {b: ("g1", "g2", "g3")[b % 3] for b in range(16)}
PORTS = {"g1": 11, "g2": 12, "g3": 13}
# Two gateways that send no heartbeats (alive unless their port goes down): config_data(**TWO_QUIET).
TWO_QUIET: dict[str, Any] = {
    "ports": {1: "host", 11: "gateway", 12: "gateway"},
    "gateways": [
        {"name": "g1", "port": 11, "mac": "52:54:00:00:01:01", "heartbeat": False},
        {"name": "g2", "port": 12, "mac": "52:54:00:00:01:02", "heartbeat": False},
    ],
}


def config_data(**over: Any) -> dict[str, Any]:
    """Three gateways (g2 weighs 2; g3 sends no heartbeats), two host ports, K = 16."""
    data: dict[str, Any] = {
        "switch": {"address": "127.0.0.1:50700", "device_id": 700},
        "pipeline": {"p4info": str(P4INFO)},
        "gateway_ip": "10.0.0.1",
        "buckets": 16,
        "vmac_base": "02:5e:00:00:00:00",
        "ports": {1: "host", 2: "host", 11: "gateway", 12: "gateway", 13: "gateway"},
        "gateways": [
            {"name": "g1", "port": 11, "mac": "52:54:00:00:01:01", "agent_token": "unit-agent-g1-token"},
            {"name": "g2", "port": 12, "mac": "52:54:00:00:01:02", "weight": 2, "agent_token": "unit-agent-g2-token"},
            {"name": "g3", "port": 13, "mac": "52:54:00:00:01:03", "heartbeat": False},
        ],
        "api": {"token": "unit-test-token"},
    }
    data.update(over)
    return data


def make_config(tmp_path: Path, **over: Any) -> Config:
    return parse_config(config_data(**over), tmp_path)


class Clock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class RecordingSession:
    """Stands in for the P4Runtime session: records every write batch and stream message;
    (writes of gateway_backups alone in `backup_batches`);
    `fail` makes writes fail as a lost switch does; reads answer from `tables` (entity
    class name or table name -> entries)."""

    def __init__(self) -> None:
        self.role = Role.PRIMARY
        self.errors = 0
        self.reconnects = 0
        self.batches: list[list[Update]] = []
        # gateway_backups writes on their own (they follow every death, drain and return)
        self.backup_batches: list[list[Update]] = []
        self.sent: list[Any] = []
        self.fail = False
        self.tables: dict[str, list[Any]] = {}
        self.schema = P4Schema(P4INFO)

    @property
    def cookie(self) -> int | None:
        return None

    def require_primary(self) -> None:
        if self.role is Role.BACKUP:
            raise NotPrimary("this controller is a backup; the primary controller writes")
        if self.role is Role.DISCONNECTED:
            raise SwitchUnavailable("not connected to the switch")

    async def write(self, updates: Sequence[Update], *, idempotent: bool = True) -> None:
        self.require_primary()
        if self.fail:
            raise SwitchUnavailable("switch gone")
        if updates and all(getattr(u.entity, "table_id", None) == pc.TABLE_GATEWAY_BACKUPS for u in updates):
            self.backup_batches.append(list(updates))
        elif updates:
            self.batches.append(list(updates))

    async def send(self, msgs: Sequence[Any]) -> None:
        self.sent.extend(msgs)

    async def read(self, entity: Any, *, yield_every: int = 0) -> list[Any]:
        return list(self.tables.get(getattr(entity, "table_id", None) or type(entity).__name__, []))

    async def read_or_none(self, entity: Any) -> list[Any] | None:
        return await self.read(entity)


def bucket_writes(batch: list[Update]) -> dict[int, str]:
    """bucket -> gateway of a batch of bucket MODIFYs (asserts that is all it holds)."""
    names = {port: name for name, port in PORTS.items()}
    out = {}
    for u in batch:
        assert isinstance(u.entity, BucketEntry) and u.op.name == "MODIFY", u
        out[u.entity.bucket] = names[u.entity.port]
    return out


async def running_core(
    config: Config, clock: Callable[[], float], *, store: Path | None = None, holding: dict[int, str] | None = None
) -> tuple[ControllerCore, RecordingSession]:
    """The composed core on a recording session, its intent loaded from the SQLite `store`,
    the switch holding `holding` (default ROUND_ROBIN), primary and serving."""
    session = RecordingSession()
    core = ControllerCore(config, None if store is None else IntentStore(store), clock=clock, session=session)
    await core.placement.load_intent()
    await core.switch.set_buckets(ROUND_ROBIN if holding is None else holding)
    await core.placement.serve()
    session.batches.clear()
    return core, session


def host_updates(writes: Sequence[HostWrite], idle_timeout_ns: int = 1) -> list[Update]:
    """The table updates the southbound makes of host writes."""
    return [host_update(w, idle_timeout_ns) for w in writes]


def ops(writes: Sequence[HostWrite] | Sequence[Update]) -> list[tuple[Op, str]]:
    """(op, P4 table) of each host write or table update, in order."""
    return [(u.op, u.entity.table_id) for u in (w if isinstance(w, Update) else host_update(w, 1) for w in writes)]


async def write_intent(store: Any) -> Intent:
    """Operator intent written the long way round (re-pins, undrains, unpins of unpinned
    buckets); returns what the store must load back."""
    await store.set_weight("gw1", 2.5)
    await store.set_drained("gw2", True)
    await store.set_drained("gw3", True)
    await store.set_drained("gw3", False)
    await store.pin(7, "gw1")
    await store.pin(9, "gw1")
    await store.pin(9, "gw3")  # re-pin replaces
    await store.pin(11, "gw2")
    await store.unpin(11)
    await store.unpin(12)  # unpinning an unpinned bucket is a no-op
    return Intent(weights={"gw1": 2.5}, drained={"gw2"}, pins={7: "gw1", 9: "gw3"})


class LoopTicks:
    """A task that counts its turns on the event loop: how much other work (a REST answer, a
    heartbeat) got to run while something long was going on."""

    def __init__(self) -> None:
        self.count = 0
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            self.count += 1
            await asyncio.sleep(0)

    def stop(self) -> None:
        self._task.cancel()
