"""Every admin call lands in the event log with who made it, whether it succeeded or not."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from supergw_controller.api.auth import Principal
from supergw_controller.api.core import Core
from supergw_controller.errors import CoreError
from supergw_controller.views import OperatorAction

T = TypeVar("T")


async def audited(
    core: Core,
    caller: Principal,
    action: str,
    call: Awaitable[T],
    *,
    gateway: str | None = None,
    bucket: int | None = None,
    target: str | None = None,
    describe: Callable[[T], str] | None = None,
) -> T:
    """Await `call` (the core's write) and record it, or its refusal, as `caller`'s action."""

    def entry(outcome: str) -> OperatorAction:
        return OperatorAction(
            who=caller.who, action=action, gateway=gateway, bucket=bucket, target=target, outcome=outcome
        )

    try:
        result = await call
    except CoreError as exc:
        await core.record_operator_action(entry(f"refused: {exc}"))
        raise
    await core.record_operator_action(entry("ok" if describe is None else f"ok: {describe(result)}"))
    return result
