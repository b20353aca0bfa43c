"""The agents' orders over REST, on the real app and the real core (recording switch sessions):
in the answer to each report (`Supergw-Orders`) and by the long-poll
`GET /gateways/{name}/orders?after=N&wait=S`, which answers at once when the generation is
past N, as soon as it changes, or after S; bad input of every kind is refused with a clear
4xx and changes nothing; a report's replication state with unknown keys (key material, say)
is refused whole."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from supergw_controller.api import API_PREFIX, create_app
from supergw_controller.api.auth import Authenticator
from supergw_controller.app import AgentArrivals
from supergw_proto.reports import ORDERS_GENERATION_HEADER, ORDERS_HEADER, TIMING_HEADER, AgentOrders

from rakit import endpoint, ra_info, repl, report
from test_takeover import Lab

G1 = {"Authorization": "Bearer unit-agent-g1-token"}
G2 = {"Authorization": "Bearer unit-agent-g2-token"}
ADMIN = {"Authorization": "Bearer unit-test-token"}


@pytest.fixture
async def api(tmp_path: Path) -> tuple[Lab, httpx.AsyncClient]:
    lab = await Lab(tmp_path).start()
    app = create_app(lab.core, lab.core.config)
    return lab, httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://controller" + API_PREFIX)


def body(gw: str, **state: Any) -> dict[str, Any]:
    return report(gw, ra_info(int(gw[1:])), [], repl(gw, **state)).model_dump(mode="json")


async def test_orders_come_with_every_report_answer_and_by_long_poll(api: tuple[Lab, httpx.AsyncClient]) -> None:
    lab, c = api
    r = await c.post("/gateways/g1/report", json=body("g1"), headers=G1)
    assert r.status_code == 204
    told = AgentOrders.from_header(r.headers[ORDERS_HEADER]).replication
    assert told is not None and told.backup is None  # alone in the ring
    gen = told.generation

    r = await c.get("/gateways/g1/orders", params={"after": gen - 1}, headers=G1)
    assert r.status_code == 200 and int(r.headers[ORDERS_GENERATION_HEADER]) == gen
    assert TIMING_HEADER in r.headers
    assert AgentOrders.model_validate_json(r.content).replication == told

    # an agent up to date waits; g2 joins the ring: the poll answers at once with g1's backup
    t0 = time.monotonic()
    poll = asyncio.create_task(c.get("/gateways/g1/orders", params={"after": gen, "wait": 10}, headers=G1))
    await asyncio.sleep(0.05)
    assert not poll.done()
    assert (await c.post("/gateways/g2/report", json=body("g2", protects="g1"), headers=G2)).status_code == 204
    r = await asyncio.wait_for(poll, 5.0)
    assert time.monotonic() - t0 < 5.0
    o = AgentOrders.model_validate_json(r.content).replication
    assert o is not None and o.generation > gen and o.backup is not None
    assert (o.backup.name, o.backup.endpoint) == ("g2", endpoint("g2"))
    assert int(r.headers[ORDERS_GENERATION_HEADER]) == o.generation

    # nothing changes: answered after `wait` with the orders in force
    t0 = time.monotonic()
    r = await c.get("/gateways/g1/orders", params={"after": o.generation, "wait": 0.3}, headers=G1)
    assert r.status_code == 200 and time.monotonic() - t0 >= 0.25
    assert AgentOrders.model_validate_json(r.content).replication == o

    # the verdict on g1 orders g2 within the same reaction: its poll answers at once
    g2_gen = lab.ra.board.generation
    poll = asyncio.create_task(c.get("/gateways/g2/orders", params={"after": g2_gen, "wait": 10}, headers=G2))
    await asyncio.sleep(0.05)
    await lab.kill("g1")
    r = await asyncio.wait_for(poll, 5.0)
    taken = AgentOrders.model_validate_json(r.content).replication
    assert taken is not None and taken.take_over == ("g1",)
    await c.aclose()


async def test_without_remote_access_the_poll_waits_and_says_nothing(tmp_path: Path) -> None:
    from supergw_controller.compose import ControllerCore

    from corekit import Clock, RecordingSession, make_config

    cfg = make_config(tmp_path)
    core = ControllerCore(cfg, clock=Clock(), session=RecordingSession())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(core, cfg)),
                                 base_url="http://controller" + API_PREFIX) as c:
        t0 = time.monotonic()
        r = await c.get("/gateways/g1/orders", params={"after": core.orders_board.generation, "wait": 0.2}, headers=G1)
        assert r.status_code == 200 and r.json() == {} and time.monotonic() - t0 >= 0.15


@pytest.mark.parametrize(
    ("params", "headers", "status", "says"),
    [
        ({"after": -1}, G1, 422, "query.after"),
        ({"after": "soon"}, G1, 422, "query.after"),
        ({"after": 1 << 63}, G1, 422, "query.after"),
        ({"wait": 31}, G1, 422, "query.wait"),
        ({"wait": -0.5}, G1, 422, "query.wait"),
        ({"wait": "nan"}, G1, 422, "query.wait"),
        ({}, G2, 403, "may report and heartbeat only for 'g2', not for 'g1'"),
        ({}, ADMIN, 403, "only the agent of gateway 'g1'"),
        ({}, {}, 401, "missing bearer token"),
        ({}, {"Authorization": "Bearer unit-agent-g1-tokeN"}, 401, "invalid bearer token"),
    ],
)
async def test_bad_long_polls_are_refused_clearly(
    api: tuple[Lab, httpx.AsyncClient], params: dict[str, Any], headers: dict[str, str], status: int, says: str
) -> None:
    _lab, c = api
    r = await c.get("/gateways/g1/orders", params=params, headers=headers)
    assert r.status_code == status and says in r.text, r.text
    await c.aclose()


async def test_a_poll_for_an_unknown_gateway_is_refused(api: tuple[Lab, httpx.AsyncClient]) -> None:
    _lab, c = api
    r = await c.get("/gateways/g9/orders", headers=G1)
    assert r.status_code == 403 and "not for 'g9'" in r.json()["detail"]
    await c.aclose()


async def test_a_report_whose_replication_state_has_unknown_keys_is_refused_whole(api: tuple[Lab, httpx.AsyncClient]) -> None:
    lab, c = api
    secret = "5ec7e75ec7e75ec7e75ec7e75ec7e75e"
    for extra in ({"secret": secret}, {"sk_d": secret}, {"keys": {"ike": secret}}):
        b = body("g1")
        b["replication"] |= extra
        r = await c.post("/gateways/g1/report", json=b, headers=G1)
        assert r.status_code == 422, r.text
        assert r.json()["errors"][0]["field"] == f"body.replication.{next(iter(extra))}"
        assert r.json()["errors"][0]["type"] == "extra_forbidden"
        assert secret not in r.text  # the refusal does not echo it
    assert (await lab.core.status()).reports_total == 0 and lab.core.registry.get("g1").last_report is None
    await c.aclose()


def test_an_open_long_poll_never_counts_as_the_agent_alive() -> None:
    """Only a handled report or heartbeat proves an agent alive; a poll held for 20 s must
    not keep a dead gateway's verdict back (`GatewayRecord.inflight`)."""
    from supergw_controller.api.auth import Principal

    arrivals = AgentArrivals(lambda *a: None, None, Authenticator([("t" * 20, Principal("g1", gateway="g1"))]),  # type: ignore[arg-type]
                             API_PREFIX)
    scope = {"type": "http", "headers": [(b"authorization", b"Bearer " + b"t" * 20)]}
    assert arrivals._agent(scope | {"method": "POST", "path": API_PREFIX + "/gateways/g1/report"}) == "g1"
    assert arrivals._agent(scope | {"method": "GET", "path": API_PREFIX + "/gateways/g1/orders"}) is None
