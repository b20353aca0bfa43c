"""One P4Runtime session to the switch, on top of finsy's `Switch`.

finsy does the protocol work: the StreamChannel, arbitration with our election id
(the highest connected id is primary; a backup is promoted when the primary's stream
ends), pushing the pipeline only when the switch's cookie differs, P4Info name lookup,
and reconnecting (gRPC backoff) after the switch or the network goes away.

This class adds what the controller needs on top: a role the core can read, a hook that
runs every time this instance becomes primary (reconcile + start the primary's loops as
finsy tasks, which finsy cancels when the role is lost), and batched writes whose
per-update errors are inspected (idempotent retries for INSERT/MODIFY/DELETE races,
everything else raised with the failing updates named).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from enum import StrEnum
from typing import Any, TypeVar, cast

from finsy import P4ClientError, Switch, SwitchEvent, SwitchOptions
from finsy.p4entity import P4Entity
from finsy.grpcutil import GRPCStatusCode
from finsy.p4schema import P4Schema

from supergw_proto import p4constants as pc
from supergw_controller.config import Config
from supergw_controller.errors import NotPrimary, SwitchUnavailable
from supergw_controller.southbound.entities import BucketEntry, HostRow, Op, Update, UpdateEncoder
from supergw_controller.southbound.p4names import canonical_p4info
from supergw_controller.southbound.tls import channel_credentials, explain, probe, warn_if_plaintext

log = logging.getLogger(__name__)
# How long the channel may stay down before the session probes it and logs why.
DOWN_REPORT_AFTER_S = 3.0

_E = TypeVar("_E", bound=P4Entity)


class Role(StrEnum):
    PRIMARY = "primary"
    BACKUP = "backup"
    DISCONNECTED = "disconnected"


class WriteError(SwitchUnavailable):
    """A batch write failed; `failures` pairs each failing update with the switch's error."""

    def __init__(self, message: str, failures: list[tuple[Update, str]]) -> None:
        super().__init__(message)
        self.failures = failures


ReadyHook = Callable[["SwitchSession", Switch], Awaitable[None]]
RoleHook = Callable[[Role], None]


class SwitchSession:
    def __init__(
        self,
        config: Config,
        on_primary: ReadyHook,
        on_role: RoleHook,
        name: str = "supergw",
        on_backup: ReadyHook | None = None,
    ) -> None:
        opts = SwitchOptions(
            p4info=config.pipeline.p4info,
            # finsy pushes a pipeline only when it has a device config; the eBPF target
            # needs none, so an empty one makes the P4Info authoritative.
            p4blob=config.pipeline.device_config if config.pipeline.device_config is not None else b"",
            device_id=config.switch.device_id,
            initial_election_id=config.switch.election_id.value,
            ready_handler=self._ready,
            channel_credentials=channel_credentials(config.switch),
        )
        self._config = config
        warn_if_plaintext(config.switch)
        self.switch = Switch(name, config.switch.address, opts)
        # Before any lookup: names a target spells differently (Tofino's "pipe." prefix)
        # become the controller's, and a P4Info lacking any of them is refused here.
        canonical = canonical_p4info(self.switch.p4info.p4info)
        if canonical is not self.switch.p4info.p4info:
            self.switch.p4info.set_p4info(canonical)
        self._on_primary = on_primary
        self._on_backup = on_backup
        self._on_role = on_role
        self.role = Role.DISCONNECTED
        self.reconnects = 0
        self.errors = 0
        self._ever_up = False
        self._send_lock = asyncio.Lock()
        self._encoder: UpdateEncoder | None = None
        self.switch.ee.on(SwitchEvent.CHANNEL_UP, self._channel_up)
        self.switch.ee.on(SwitchEvent.CHANNEL_DOWN, self._channel_down)
        self.switch.ee.on(SwitchEvent.BECOME_BACKUP, self._become_backup)

    # -- lifecycle (finsy callbacks)
    async def run(self) -> None:
        """Run until cancelled; finsy reconnects whenever the channel drops."""
        watch = asyncio.create_task(self._say_why_down(), name="p4rt-down-reason")
        try:
            await self.switch.run()
        finally:
            watch.cancel()

    async def _say_why_down(self) -> None:
        """finsy retries an unreachable switch silently (UNAVAILABLE is logged at debug):
        while the channel stays down, probe it and log what is wrong, once per new reason."""
        said: str | None = None
        while True:
            await asyncio.sleep(DOWN_REPORT_AFTER_S)
            if self.role is not Role.DISCONNECTED:
                said = None
                continue
            try:
                details = await probe(self._config.switch)
            except Exception as exc:  # noqa: BLE001 - a probe failure must not end the session
                details = f"{type(exc).__name__}: {exc}"
            if details is not None and details != said:
                log.warning(
                    "no P4Runtime channel to %s: %s (%s)",
                    self._config.switch.address,
                    explain(details, self._config.switch),
                    details,
                )
                said = details

    def _channel_up(self, _sw: Switch) -> None:
        if self._ever_up:
            self.reconnects += 1
        self._ever_up = True

    def _channel_down(self, _sw: Switch) -> None:
        self._set_role(Role.DISCONNECTED)

    def _become_backup(self, _sw: Switch) -> None:
        self._set_role(Role.BACKUP)

    async def _ready(self, sw: Switch) -> None:
        # finsy calls this after the pipeline is in place, once per role change.
        if not sw.is_primary:
            self._set_role(Role.BACKUP)
            if self._on_backup is not None:
                await self._on_backup(self, sw)
            return
        self._set_role(Role.PRIMARY)
        await self._on_primary(self, sw)

    def _set_role(self, role: Role) -> None:
        if role is not self.role:
            log.info("switch role %s -> %s (election id %s)", self.role, role, self.switch.election_id)
            self.role = role
            self._on_role(role)

    # -- helpers
    @property
    def schema(self) -> P4Schema:
        return self.switch.p4info

    @property
    def cookie(self) -> int | None:
        try:
            return self.schema.p4cookie if self.schema.exists else None
        except Exception:  # noqa: BLE001 - the cookie is informational only
            return None

    def require_primary(self) -> None:
        if self.role is Role.DISCONNECTED:
            raise SwitchUnavailable(f"not connected to the switch at {self.switch.address}")
        if self.role is Role.BACKUP:
            raise NotPrimary("this controller is a backup; the primary controller writes")

    def _read(self, entity: _E) -> AsyncIterator[_E]:
        # finsy annotates `Switch.read` as `async def ... -> AsyncGenerator`, which type
        # checkers take for a coroutine; it is an async generator.
        return cast("AsyncIterator[_E]", self.switch.read(entity))

    async def read(self, entity: _E, *, yield_every: int = 0) -> list[_E]:
        """Read every entity matching `entity` (a wildcard when its key is empty). finsy decodes
        each entity as it hands it over; `yield_every` > 0 lets the event loop run other work
        after that many (the 4,096 bucket counters read every second took ~50 ms in one piece,
        which every REST answer and heartbeat arriving then waited for)."""
        try:
            out: list[_E] = []
            async for e in self._read(entity):
                out.append(e)
                if yield_every and len(out) % yield_every == 0:
                    await asyncio.sleep(0)
            return out
        except P4ClientError as exc:
            self.errors += 1
            raise SwitchUnavailable(f"read of {type(entity).__name__} failed: {exc.code.name}: {exc.message}") from exc

    async def read_or_none(self, entity: _E) -> list[_E] | None:
        """Like `read`, but None when the target does not support reading this entity."""
        try:
            return [e async for e in self._read(entity)]
        except P4ClientError as exc:
            if exc.code in (GRPCStatusCode.UNIMPLEMENTED, GRPCStatusCode.NOT_FOUND):
                return None
            self.errors += 1
            raise SwitchUnavailable(f"read of {type(entity).__name__} failed: {exc.code.name}: {exc.message}") from exc

    async def send(self, msgs: Sequence[Any]) -> None:
        """Stream messages (packet-outs, digest acks), one writer at a time.

        gRPC aio allows one pending write per stream ("Internal error from Core"
        otherwise), and finsy does not serialise them.
        """
        if not msgs:
            return
        async with self._send_lock:
            try:
                await self.switch.write(list(msgs))
            except P4ClientError as exc:
                self.errors += 1
                raise SwitchUnavailable(f"stream send failed: {exc.code.name}: {exc.message}") from exc

    async def write(self, updates: Sequence[Update], *, idempotent: bool = True) -> None:
        """Write `updates` as one WriteRequest.

        With `idempotent`, updates that failed only because the switch already was in the
        wanted state are fixed up in one more batch: INSERT of an existing entry becomes
        MODIFY, MODIFY of a missing entry becomes INSERT, DELETE of a missing entry is
        dropped. Any other per-update error raises `WriteError` naming the updates.
        """
        self.require_primary()
        if not updates:
            return
        failures = await self._write_once(updates)
        if not failures:
            return
        retry: list[Update] = []
        hard: list[tuple[Update, str]] = []
        for upd, code, msg in failures:
            if idempotent and upd.op is Op.INSERT and code is GRPCStatusCode.ALREADY_EXISTS:
                retry.append(Update(Op.MODIFY, upd.entity))
            elif idempotent and upd.op is Op.MODIFY and code is GRPCStatusCode.NOT_FOUND:
                retry.append(Update(Op.INSERT, upd.entity))
            elif idempotent and upd.op is Op.DELETE and code is GRPCStatusCode.NOT_FOUND:
                continue
            else:
                hard.append((upd, f"{code.name}: {msg}"))
        if retry:
            hard.extend((u, f"{c.name}: {m}") for u, c, m in await self._write_once(retry))
        if hard:
            self.errors += 1
            first = "; ".join(f"{u.op.name} {_short(u)} -> {why}" for u, why in hard[:3])
            more = f" (+{len(hard) - 3} more)" if len(hard) > 3 else ""
            raise WriteError(f"{len(hard)} of {len(updates)} updates failed: {first}{more}", hard)

    async def _write_once(self, updates: Sequence[Update]) -> list[tuple[Update, GRPCStatusCode, str]]:
        schema = self.schema
        if self._encoder is None or self._encoder.schema is not schema:
            self._encoder = UpdateEncoder(schema)
        msgs = self._encoder.encode(updates)
        try:
            await self.switch.write(msgs)
        except P4ClientError as exc:
            if not exc.details:
                self.errors += 1
                raise SwitchUnavailable(f"write of {len(updates)} updates failed: {exc.code.name}: {exc.message}") from exc
            return [(updates[i], err.canonical_code, err.message) for i, err in sorted(exc.details.items())]
        except (AssertionError, AttributeError) as exc:
            # finsy asserts when the channel closed under us.
            raise SwitchUnavailable(f"switch channel closed during write: {exc}") from exc
        return []


def _short(u: Update) -> str:
    e = u.entity
    if isinstance(e, BucketEntry):
        return f"{pc.TABLE_BUCKETS}[{e.bucket}]"
    if isinstance(e, HostRow):
        return f"{e.table_id}{e.entry}"
    table = getattr(e, "table_id", None)
    if table:
        return f"{table}{dict(getattr(e, 'match', None) or {})}"
    return type(e).__name__
