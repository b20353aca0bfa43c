"""`GET /buckets`: the body is the `BucketView` list byte for byte, reused only while nothing a
bucket shows has changed, and every change (move, pin, unpin, failover, a backup's re-read of
the table, a counter poll) shows in the very next answer. Plus the encode time at K = 4096 and
50,000 hosts, printed (pytest -s), never asserted: the machine is shared."""

from __future__ import annotations

import gc
import json
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import TypeAdapter

from supergw_controller.api import API_PREFIX, create_app
from supergw_controller.bucket_list import BucketList
from supergw_controller.bucket_stats import BucketStats
from supergw_controller.compose import ControllerCore
from supergw_controller.southbound import entities as ent
from supergw_controller.southbound.domain import HostSeen
from supergw_controller.southbound.session import Role
from supergw_proto import p4constants as pc
from supergw_proto.api import BucketView
from supergw_proto.bucket import vmac

from corekit import Clock, config_data, make_config, running_core

VIEWS = TypeAdapter(list[BucketView])
TOKEN = "unit-test-token"  # corekit's api.token
AUTH = {"Authorization": f"Bearer {TOKEN}"}


class Placed:
    """Stands in for placement: the map and the pins as plain dicts."""

    def __init__(self, assignment: dict[int, str], pins: dict[int, str]) -> None:
        self.assignment = assignment
        self.pins = pins


def models_body(lst: BucketList, buckets: range | list[int]) -> bytes:
    """What the route answered before: each bucket validated into a BucketView, the list dumped."""
    return VIEWS.dump_json([BucketView.model_validate(lst.row(b)) for b in buckets])


def odd_stats() -> BucketStats:
    """Counters at the edges of what JSON numbers must carry: 2**63 - 1, thirds, tiny and huge rates."""
    stats = BucketStats()
    stats.update(0.0, {0: (0, 0), 1: (0, 0), 2: (10, 10), 5: (0, 0)})
    stats.update(3.0, {0: (1, 3), 1: (2**63 - 1, 2**63 - 1), 2: (10, 10), 5: (7, 10**21), 6: (4, 4)})
    return stats


def test_the_body_is_the_views_encoded_by_their_model() -> None:
    # bucket 3 unassigned, 1 pinned, 4 pinned to the gateway that does not hold it (yet)
    placed = Placed({0: "g1", 1: "g2", 2: "g1", 4: "g1", 5: "g2", 6: "g2", 7: "g1"}, {1: "g2", 4: "g2"})
    lst = BucketList([vmac("02:5e:00:00:00:00", b) for b in range(8)], placed, odd_stats())
    body = lst.body()
    assert body == models_body(lst, range(8))
    views = json.loads(body)
    assert list(views[0]) == list(BucketView.model_fields)  # every field, in the model's order
    assert (views[3]["gateway"], views[4]["pinned"], views[1]["packets"]) == (None, "g2", 2**63 - 1)
    assert views[0]["pps"] == pytest.approx(1 / 3) and views[5]["bps"] == pytest.approx(10**21 / 3)
    assert lst.body("g2") == models_body(lst, [1, 5, 6])
    assert lst.body("nobody") == b"[]"


def test_an_unchanged_map_is_reused_and_every_change_is_not() -> None:
    placed = Placed({b: ("g1", "g2")[b % 2] for b in range(8)}, {})
    stats = BucketStats()
    lst = BucketList([vmac("02:5e:00:00:00:00", b) for b in range(8)], placed, stats)

    def shown(gateway: str | None = None) -> list[dict[str, Any]]:
        body = lst.body(gateway)
        assert body == models_body(lst, [v.bucket for v in VIEWS.validate_json(body)])
        return list(json.loads(body))

    first, g1 = lst.body(), lst.body("g1")
    assert lst.body() is first and lst.body("g1") is g1  # the same bytes: reused, not encoded again
    placed.assignment = dict(placed.assignment)  # a new object holding the same map (a re-read)
    assert lst.body() is first

    placed.assignment[0] = "g2"  # in place, as set_buckets does
    assert shown()[0]["gateway"] == "g2" and 0 not in [v["bucket"] for v in shown("g1")]
    placed.pins[3] = "g2"
    assert shown()[3]["pinned"] == "g2"
    del placed.pins[3]
    assert shown()[3]["pinned"] is None
    placed.assignment = {b: "g1" for b in range(8)}  # replaced, as reconcile and refresh_buckets do
    assert {v["gateway"] for v in shown()} == {"g1"} and len(shown("g1")) == 8 and shown("g2") == []

    stats.update(1.0, {b: (0, 0) for b in range(8)})
    counted = lst.body()
    assert [v["packets"] for v in shown()] == [0] * 8
    stats.update(2.0, {b: (0, 0) for b in range(8)})  # a poll that changed nothing
    assert lst.body() is counted
    stats.update(3.0, {0: (5, 500)} | {b: (0, 0) for b in range(1, 8)})
    assert (shown()[0]["packets"], shown()[0]["pps"], shown()[0]["bps"]) == (5, 5.0, 500.0)
    stats.update(4.0, {0: (5, 500)} | {b: (0, 0) for b in range(1, 8)})  # same totals: the rate drops to 0
    assert (shown()[0]["packets"], shown()[0]["pps"]) == (5, 0.0)


def api_client(core: ControllerCore) -> httpx.AsyncClient:
    """The REST app on the core, in this event loop (the core's own loop, as in the controller)."""
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(core, core.config)), base_url="http://sgw")


async def buckets(client: httpx.AsyncClient, query: str = "") -> list[dict[str, Any]]:
    r = await client.get(f"{API_PREFIX}/buckets{query}", headers=AUTH)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/json"
    return list(r.json())


async def test_the_next_get_shows_each_move_pin_unpin_failover_and_reread(tmp_path: Path) -> None:
    clock = Clock()
    core, session = await running_core(make_config(tmp_path, timing={"startup_grace_s": 0.5}), clock)
    async with api_client(core) as client:
        before = await buckets(client)
        assert [v["gateway"] for v in before] == [("g1", "g2", "g3")[b % 3] for b in range(16)]
        assert await buckets(client) == before

        r = await client.post(f"{API_PREFIX}/buckets/0/move", json={"gateway": "g3"}, headers=AUTH)
        assert r.status_code == 200, r.text
        assert (await buckets(client))[0]["gateway"] == "g3"

        assert (await client.post(f"{API_PREFIX}/buckets/1/pin", json={"gateway": "g1"}, headers=AUTH)).status_code == 200
        assert ((await buckets(client))[1]["gateway"], (await buckets(client))[1]["pinned"]) == ("g1", "g1")
        assert (await client.delete(f"{API_PREFIX}/buckets/1/pin", headers=AUTH)).status_code == 200
        assert (await buckets(client))[1]["pinned"] is None

        core.stats.update(clock(), {b: (0, 0) for b in range(16)})
        core.stats.update(clock() + 1.0, {b: (b, 100 * b) for b in range(16)})
        assert [(v["packets"], v["pps"]) for v in await buckets(client)] == [(b, float(b)) for b in range(16)]

        g3 = await buckets(client, "?gateway=g3")
        assert [v["bucket"] for v in g3] == [b for b in range(16) if b % 3 == 2 or b == 0]
        r = await client.get(f"{API_PREFIX}/buckets?gateway=nope", headers=AUTH)
        assert r.status_code == 404 and r.json()["detail"] == "query.gateway: no gateway named 'nope'; known: g1, g2, g3"
        r = await client.get(f"{API_PREFIX}/buckets?gateway=", headers=AUTH)
        assert r.status_code == 422 and r.json()["errors"][0]["field"] == "query.gateway"

        # Failover: g1 and g2 (heartbeating gateways) never sent one and are out of their grace.
        clock.t += 1.0
        await core.liveness.tick()
        assert core.registry.get("g1").dead and core.registry.get("g2").dead
        assert {v["gateway"] for v in await buckets(client)} == {"g3"}
        assert len(await buckets(client, "?gateway=g3")) == 16 and await buckets(client, "?gateway=g1") == []

        # A backup's mirror: the table read back replaces the map object.
        session.role = Role.BACKUP
        session.tables[pc.TABLE_BUCKETS] = [ent.bucket(b, 11, "52:54:00:00:01:01") for b in range(16)]
        await core.switch.refresh_buckets()
        assert {v["gateway"] for v in await buckets(client)} == {"g1"}
        assert await buckets(client) == [v.model_dump() for v in await core.buckets()]


def site_config(tmp_path: Path, gateways: int, k: int) -> dict[str, Any]:
    names = [f"gw{i + 1:02d}" for i in range(gateways)]
    return config_data(
        buckets=k,
        ports={1: "host"} | {100 + i: "gateway" for i in range(gateways)},
        gateways=[{"name": n, "port": 100 + i, "mac": f"52:54:00:00:{i // 256:02x}:{i % 256:02x}", "heartbeat": False}
                  for i, n in enumerate(names)],
    )


@dataclass
class Timing:
    """One step run `calls` times: each call's ms, and the garbage collections it set off."""

    ms: list[float] = field(default_factory=list)
    full_in: list[bool] = field(default_factory=list)  # per call: a full collection ran in it
    collections: int = 0  # any generation

    def line(self) -> str:
        slowest = self.ms.index(max(self.ms))
        why = " (a full collection ran in it)" if self.full_in[slowest] else ""
        return (f"median {statistics.median(self.ms):.2f} ms, max {max(self.ms):.2f} ms{why}, "
                f"{self.collections} collections ({sum(self.full_in)} full) in {len(self.ms)} calls")


async def timed(
    calls: int, step: Callable[[], Awaitable[bytes]], before: Callable[[], None] = lambda: None
) -> tuple[Timing, bytes]:
    t, body = Timing(), b""
    for _ in range(calls):
        before()  # not timed: the counter poll that invalidates
        counts = [s["collections"] for s in gc.get_stats()]
        t0 = time.perf_counter()
        body = await step()
        t.ms.append(1000 * (time.perf_counter() - t0))
        after = [s["collections"] for s in gc.get_stats()]
        t.collections += sum(after) - sum(counts)
        t.full_in.append(after[2] > counts[2])
    return t, body


async def test_buckets_encode_time_at_the_scale_point(tmp_path: Path) -> None:
    """The scale bench's point: N = 32, K = 4096 with every bucket counting traffic, 50,000
    hosts learned (so a full garbage collection walks a real controller's heap). The route's
    work before (4096 validated BucketViews, dumped) and now (after a counter poll changed every
    bucket; unchanged), and GET /buckets through the in-process app. Prints the timings (run
    with -s); asserts only that every answer is the models' bytes."""
    from supergw_controller.config import parse_config

    k, n, hosts = 4096, 32, 50_000
    config = parse_config(site_config(tmp_path, n, k), tmp_path)
    core, _ = await running_core(config, Clock(), holding={b: f"gw{b % n + 1:02d}" for b in range(k)})
    seen = [HostSeen(f"02:00:00:{i >> 16:02x}:{(i >> 8) & 255:02x}:{i & 255:02x}", 1,
                     f"10.{i >> 16}.{(i >> 8) & 255}.{i & 255}") for i in range(hosts)]  # fmt: skip
    for i in range(0, hosts, 5000):
        await core.hosts_seen(seen[i : i + 5000])
    assert len(core.hosts_learning.table) == hosts
    polls = iter(range(1, 1000))

    def poll() -> None:
        t = next(polls)
        core.stats.update(float(t), {b: (t * (b + 1), t * 1500 * (b + 1)) for b in range(k)})

    poll()
    poll()

    async def models() -> bytes:
        return VIEWS.dump_json(await core.buckets())

    async with api_client(core) as client:

        async def get() -> bytes:
            r = await client.get(f"{API_PREFIX}/buckets", headers=AUTH)
            assert r.status_code == 200
            return r.content

        before, old_body = await timed(41, models)
        await core.read.buckets_json()  # encoded once: every call of `same` is a reuse
        same, body = await timed(41, core.read.buckets_json)
        assert body == old_body and len(json.loads(body)) == k
        changed, body = await timed(41, core.read.buckets_json, poll)
        assert body == await models() != old_body
        get_same, got = await timed(15, get)
        assert got == body
        get_changed, got = await timed(15, get, poll)
        assert got == await models()
        one, got = await timed(7, lambda: core.read.buckets_json("gw07"))
        assert [v["bucket"] for v in json.loads(got)] == list(range(6, k, n))

    steps = {"before": before, "changed": changed, "unchanged": same, "get_changed": get_changed,
             "get_unchanged": get_same, "one_gateway": one}  # fmt: skip
    print(f"\nGET /buckets at K = {k}, N = {n}, {hosts} hosts; body "
          f"{len(old_body) / 1000:.0f} kB\n" + "\n".join(f"  {name:13} {t.line()}" for name, t in steps.items()))
