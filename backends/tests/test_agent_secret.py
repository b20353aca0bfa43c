"""The agent's REST calls follow a rotated token file without a restart (its heartbeats:
controller/tests/test_heartbeat_key_rotation.py, with the controller's receiver)."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import httpx
import pytest

from supergw_gateway import agent_secret
from supergw_gateway.agent import AgentState, ControllerLink
from supergw_gateway.config import Controller


async def test_rest_calls_carry_the_rotated_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(agent_secret, "CHECK_EVERY_S", 0.0)
    token = tmp_path / "gw1.token"
    token.write_text("first-agent-token-0123\n")
    seen: list[str | None] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization"))
        if len(seen) == 1:
            token.write_text("second-agent-token-4567\n")  # rotated after the first heartbeat
        return httpx.Response(204)

    link = ControllerLink("http://ctl.test:8080", "gw1", Controller(url="http://ctl.test:8080", token_file=token),
                          AgentState(), transport=httpx.MockTransport(answer))
    beating = asyncio.create_task(link.heartbeat_loop())
    try:
        for _ in range(200):
            if len(seen) >= 2:
                break
            await asyncio.sleep(0.01)
    finally:
        beating.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await beating
        await link.aclose()
    assert seen[:2] == ["Bearer first-agent-token-0123", "Bearer second-agent-token-4567"]
