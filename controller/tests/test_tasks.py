"""`tasks.run_together`: the first failure ends every loop and is raised; cancelling ends them all."""

from __future__ import annotations

import asyncio

import pytest

from supergw_controller.tasks import run_together


async def test_first_failure_is_raised_and_the_others_cancelled() -> None:
    cancelled = asyncio.Event()

    async def forever() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def fails() -> None:
        await asyncio.sleep(0.01)
        raise RuntimeError("loop broke")

    with pytest.raises(RuntimeError, match="loop broke"):
        await run_together({"forever": forever(), "fails": fails()})
    assert cancelled.is_set()


async def test_cancelling_ends_every_loop() -> None:
    ended: list[str] = []

    async def loop(name: str) -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            ended.append(name)

    task = asyncio.create_task(run_together({"a": loop("a"), "b": loop("b")}))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sorted(ended) == ["a", "b"]
