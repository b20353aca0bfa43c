"""Running a part's loops together: until cancelled, or until one of them fails."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine, Mapping
from typing import Any


async def run_together(loops: Mapping[str, Coroutine[Any, Any, None]]) -> None:
    """Run `loops` (name -> coroutine) as tasks until cancelled or until one raises (then
    its exception is raised); the others are cancelled and awaited either way."""
    tasks = [asyncio.create_task(coro, name=name) for name, coro in loops.items()]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            task.result()
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
