"""REST API against an in-memory core that implements the Dispatcher interface.

The fake only stands in for the P4Runtime side (the real-switch tests are the core's
integration tests); request parsing, auth, error mapping and the rebalancer are real.
"""

from __future__ import annotations

import ipaddress
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import TypeAdapter

from supergw_controller.api import API_PREFIX, create_app
from supergw_proto.bucket import vmac
from supergw_controller.config import Config
from supergw_controller.errors import Conflict, NotPrimary, UnknownBucket, UnknownGateway
from supergw_controller.rebalancer import (
    BucketRate,
    GatewayInput,
    GatewayState,
    RebalanceInput,
    plan_rebalance,
)
from supergw_proto.reports import ORDERS_HEADER, TIMING_HEADER, AgentOrders, GatewayReport, Heartbeat
from supergw_controller.views import BucketTraffic, OperatorAction, OrdersAnswer
from supergw_proto.api import (
    BucketView,
    ClientView,
    EventView,
    GatewayView,
    HostPage,
    HostQuery,
    HostView,
    MoveView,
    RebalanceView,
    StatusView,
)

TOKEN = "test-token-0123456789"
READER_TOKEN = "reader-token-0123456789"
AGENT_TOKENS = {"gw1": "agent-gw1-secret-0123456789", "gw2": "agent-gw2-secret-0123456789", "gw3": "agent-gw3-secret-0123456789"}
P4INFO = Path(__file__).resolve().parents[2] / "p4src/v1model/supergw.p4info.txtpb"
K = 64
VMAC_BASE = "02:5e:00:00:00:00"


def make_config(token: str = TOKEN) -> Config:
    return Config.model_validate(
        {
            "switch": {"address": "127.0.0.1:9559", "device_id": 1},
            "pipeline": {"p4info": str(P4INFO)},
            "gateway_ip": "10.0.0.1",
            "buckets": K,
            "vmac_base": VMAC_BASE,
            "ports": {1: "host", 11: "gateway", 12: "gateway", 13: "gateway"},
            "gateways": [
                {"name": "gw1", "port": 11, "mac": "02:00:00:00:01:01", "agent_token": AGENT_TOKENS["gw1"]},
                {"name": "gw2", "port": 12, "mac": "02:00:00:00:01:02", "agent_token": AGENT_TOKENS["gw2"]},
                {"name": "gw3", "port": 13, "mac": "02:00:00:00:01:03", "weight": 2, "agent_token": AGENT_TOKENS["gw3"]},
            ],
            "api": {"token": token, "tokens": [{"name": "viewer", "role": "read-only", "token": READER_TOKEN}]},
        }
    )


class FakeCore:
    """In-memory Dispatcher: same methods, same errors, no switch."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.weights = {g.name: g.weight for g in config.gateways}
        self.drained: set[str] = set()
        self.dead: set[str] = set()
        self.assign: dict[int, str] = {b: "gw1" for b in range(K)}
        self.pins: dict[int, str] = {}
        self.pps: dict[int, float] = {b: float(1 + b % 7) for b in range(K)}
        self.events_log: list[EventView] = []
        self.host_queries: list[HostQuery] = []
        self.reports: list[GatewayReport] = []
        self.heartbeats: list[Heartbeat] = []
        self.orders: dict[str, AgentOrders] = {}
        self.polls: list[tuple[str, int, float]] = []
        self.primary = True
        self.moves_total: dict[str, int] = {}

    def _check(self, name: str) -> None:
        if name not in self.weights:
            raise UnknownGateway(f"no gateway named {name!r}")

    def _state(self, name: str) -> str:
        if name in self.dead:
            return "dead"
        return "drained" if name in self.drained else "alive"

    def _write(self) -> None:
        if not self.primary:
            raise NotPrimary("this controller is a backup (election id lower than the primary's)")

    def _log_move(self, b: int, src: str | None, dst: str, reason: str) -> None:
        self.moves_total[reason] = self.moves_total.get(reason, 0) + 1
        self.events_log.insert(0, EventView(id=len(self.events_log) + 1, ts=time.time(), kind="move", bucket=b, src=src, dst=dst, reason=reason, detail=""))

    async def status(self) -> StatusView:
        return StatusView(
            role="primary" if self.primary else "backup", connected=True, switch_address="127.0.0.1:9559",
            device_id=1, election_id="0:1", pipeline_cookie=7, buckets=K, gateway_ip="10.0.0.1",
            vmac_base=VMAC_BASE, uptime_s=12.5, gateways_alive=3 - len(self.dead), gateways_total=3,
            buckets_unassigned=0, hosts=1, imbalance=1.5, moves_total=dict(self.moves_total),
            failovers_total=2, digests_total=5, packet_ins_total=6, p4rt_errors_total=1,
            reconnects_total=0, reports_total=len(self.reports), heartbeats_total=len(self.heartbeats),
        )

    async def gateway(self, name: str) -> GatewayView:
        self._check(name)
        gw = self.config.gateway(name)
        mine = [b for b, g in self.assign.items() if g == name]
        return GatewayView(
            name=name, port=gw.port, mac=gw.mac, weight=self.weights[name], state=self._state(name),
            drained=name in self.drained, alive=name not in self.dead, port_up=None, buckets=len(mine),
            load=sum(self.pps[b] for b in mine), heartbeat_age_s=0.05 if name != "gw3" else None,
            report_age_s=None, last_report=next((r for r in reversed(self.reports) if r.gateway == name), None),
        )

    async def gateways(self) -> list[GatewayView]:
        return [await self.gateway(n) for n in self.weights]

    async def drain(self, name: str) -> GatewayView:
        self._check(name)
        self._write()
        self.drained.add(name)
        await self._round(dry_run=False)
        return await self.gateway(name)

    async def undrain(self, name: str) -> GatewayView:
        self._check(name)
        self._write()
        self.drained.discard(name)
        return await self.gateway(name)

    async def set_weight(self, name: str, weight: float) -> GatewayView:
        self._check(name)
        self.weights[name] = weight
        return await self.gateway(name)

    async def bucket(self, bucket: int) -> BucketView:
        if not 0 <= bucket < K:
            raise UnknownBucket(f"bucket {bucket} out of range")
        return BucketView(bucket=bucket, vmac=vmac(VMAC_BASE, bucket), gateway=self.assign.get(bucket),
                          pinned=self.pins.get(bucket), packets=100, bytes=6400, pps=self.pps[bucket], bps=64 * self.pps[bucket])

    async def buckets(self) -> list[BucketView]:
        return [await self.bucket(b) for b in range(K)]

    async def buckets_json(self, gateway: str | None = None) -> bytes:
        views = [b for b in await self.buckets() if gateway is None or b.gateway == gateway]
        return TypeAdapter(list[BucketView]).dump_json(views)

    async def bucket_traffic(self) -> list[BucketTraffic]:
        return [BucketTraffic(b, self.assign.get(b), self.pps[b], 64 * self.pps[b]) for b in range(K) if self.pps[b] > 0]

    async def pin(self, bucket: int, gateway: str) -> BucketView:
        self._check(gateway)
        if self._state(gateway) != "alive":
            raise Conflict(f"cannot pin bucket {bucket} to {gateway!r}: it is {self._state(gateway)}")
        self._write()
        self.pins[bucket] = gateway
        if self.assign[bucket] != gateway:
            self._log_move(bucket, self.assign[bucket], gateway, "pin")
            self.assign[bucket] = gateway
        return await self.bucket(bucket)

    async def unpin(self, bucket: int) -> BucketView:
        self.pins.pop(bucket, None)
        return await self.bucket(bucket)

    async def move(self, bucket: int, gateway: str, reason: str = "operator") -> BucketView:
        self._check(gateway)
        if bucket in self.pins and self.pins[bucket] != gateway:
            raise Conflict(f"bucket {bucket} is pinned to {self.pins[bucket]!r}; unpin it first")
        if self._state(gateway) != "alive":
            raise Conflict(f"cannot move bucket {bucket} to {gateway!r}: it is {self._state(gateway)}")
        self._write()
        self._log_move(bucket, self.assign[bucket], gateway, reason)
        self.assign[bucket] = gateway
        return await self.bucket(bucket)

    async def hosts(self, query: HostQuery = HostQuery()) -> HostPage:
        self.host_queries.append(query)
        h = HostView(mac="02:00:00:00:00:aa", port=1, ip="10.0.0.10", bucket=3, vmac=vmac(VMAC_BASE, 3), gateway=self.assign[3], idle_s=1.0)
        return HostPage(hosts=[h], total=1, matched=1)

    async def clients(self) -> list[ClientView]:
        return [ClientView(gateway="gw1", identity="c1", remote_host="198.51.100.1", remote_port=4500, vips=["10.90.0.2"],
                           established_at=1.0, present=True, bytes_in=1, bytes_out=2, pinned=True)]

    async def events(self, limit: int = 100, since_id: int = 0) -> list[EventView]:
        return [e for e in self.events_log if (e.id or 0) > since_id][:limit]

    async def _round(self, dry_run: bool) -> RebalanceView:
        state = {"alive": GatewayState.ALIVE, "drained": GatewayState.DRAINED, "dead": GatewayState.DEAD}
        gws = [GatewayInput(n, w, state[self._state(n)]) for n, w in self.weights.items()]
        plan = plan_rebalance(RebalanceInput(K, {b: BucketRate(pps=v) for b, v in self.pps.items()}, self.assign, gws, self.pins))
        if not dry_run:
            for m in plan.moves:
                self._log_move(m.bucket, m.src, m.dst, m.reason)
                self.assign[m.bucket] = m.dst
        return RebalanceView(dry_run=dry_run, applied=not dry_run and bool(plan.moves),
                             moves=[MoveView(bucket=m.bucket, src=m.src, dst=m.dst, reason=m.reason) for m in plan.moves],
                             load_before=plan.load_before, load_after=plan.load_after, ratio_before=plan.ratio_before,
                             ratio_after=plan.ratio_after, warnings=list(plan.warnings))

    async def rebalance(self, dry_run: bool = False) -> RebalanceView:
        if not dry_run:
            self._write()
        return await self._round(dry_run)

    async def accept_report(self, report: GatewayReport) -> None:
        self._check(report.gateway)
        self.reports.append(report)

    async def accept_heartbeat(self, hb: Heartbeat) -> None:
        self._check(hb.gateway)
        self.heartbeats.append(hb)

    def agent_orders(self, name: str) -> AgentOrders:
        return self.orders.get(name, AgentOrders())

    async def wait_orders(self, name: str, after: int, wait_s: float) -> OrdersAnswer:
        self._check(name)
        self.polls.append((name, after, wait_s))
        return OrdersAnswer(generation=7, orders=self.agent_orders(name))

    async def record_operator_action(self, action: OperatorAction) -> None:
        self.events_log.insert(0, EventView(
            id=len(self.events_log) + 1, ts=time.time(), kind="operator", bucket=action.bucket, src=action.gateway,
            dst=action.target, reason=action.action, detail=action.outcome, who=action.who,
        ))


@pytest.fixture
def core() -> FakeCore:
    return FakeCore(make_config())


@pytest.fixture
def client(core: FakeCore) -> TestClient:
    return TestClient(create_app(core, core.config))


AUTH = {"Authorization": f"Bearer {TOKEN}"}
READER = {"Authorization": f"Bearer {READER_TOKEN}"}


def agent(gateway: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {AGENT_TOKENS[gateway]}"}


def auth_for(path: str) -> dict[str, str]:
    """The credential a route is meant for: the gateway's agent for its report/heartbeat, else an admin."""
    path = path.split("?")[0]
    parts = path.split("/")
    if is_agent_route(path) and len(parts) == 4:
        return agent(parts[2]) if parts[2] in AGENT_TOKENS else AUTH
    return AUTH


def is_agent_route(path: str) -> bool:
    return path.split("?")[0].endswith(("/report", "/heartbeat", "/orders"))


def report_body(gateway: str = "gw1") -> dict[str, Any]:
    return {
        "gateway": gateway, "timestamp": 1.0, "backend": "libipsec", "cpu_percent": 42.0, "softirq_percent": 1.0,
        "charon_cpu_percent": 30.0, "tunnel_bytes_in": 1, "tunnel_bytes_out": 2, "tunnel_packets_in": 3,
        "tunnel_packets_out": 4, "sas": [],
    }


# (method, path, json body) of every /api/v1 route, with valid arguments
ROUTES: list[tuple[str, str, Any]] = [
    ("GET", "/status", None),
    ("GET", "/gateways", None),
    ("GET", "/gateways/gw1", None),
    ("POST", "/gateways/gw1/drain", None),
    ("POST", "/gateways/gw1/undrain", None),
    ("PUT", "/gateways/gw1/weight", {"weight": 2.0}),
    ("GET", "/buckets", None),
    ("GET", "/buckets/3", None),
    ("POST", "/buckets/3/pin", {"gateway": "gw2"}),
    ("DELETE", "/buckets/3/pin", None),
    ("POST", "/buckets/3/move", {"gateway": "gw2"}),
    ("GET", "/hosts", None),
    ("GET", "/clients", None),
    ("GET", "/events", None),
    ("POST", "/rebalance?dry_run=true", None),
    ("POST", "/gateways/gw1/report", report_body()),
    ("POST", "/gateways/gw1/heartbeat", {"gateway": "gw1", "timestamp": 1.0}),
    ("GET", "/gateways/gw1/orders?after=0&wait=0", None),
]
GATEWAY_ROUTES = [r for r in ROUTES if r[1].startswith("/gateways/gw1")]
BUCKET_ROUTES = [r for r in ROUTES if r[1].startswith("/buckets/3")]
BODY_ROUTES = [r for r in ROUTES if r[2] is not None]


def call(client: TestClient, method: str, path: str, body: Any, headers: dict[str, str] | None = None) -> Any:
    return client.request(method, API_PREFIX + path, json=body, headers=headers)


# ---------------------------------------------------------------- auth


@pytest.mark.parametrize(("method", "path", "body"), ROUTES)
def test_every_route_works_with_token(client: TestClient, method: str, path: str, body: Any) -> None:
    r = call(client, method, path, body, auth_for(path))
    assert r.status_code in (200, 204), r.text


@pytest.mark.parametrize(("method", "path", "body"), ROUTES)
@pytest.mark.parametrize(
    ("headers", "message"),
    [
        (None, "missing bearer token"),
        ({"Authorization": "Bearer wrong-token-xxxxx"}, "invalid bearer token"),
        ({"Authorization": f"Basic {TOKEN}"}, "unsupported authorization scheme"),
        ({"Authorization": "Bearer "}, "unsupported authorization scheme"),
    ],
)
def test_every_route_needs_the_token(
    client: TestClient, core: FakeCore, method: str, path: str, body: Any, headers: dict[str, str] | None, message: str
) -> None:
    r = call(client, method, path, body, headers)
    assert r.status_code == 401
    assert message in r.json()["detail"]
    assert r.headers["www-authenticate"].startswith("Bearer")
    assert not core.drained and not core.pins and not core.reports and core.moves_total == {}


def test_auth_checked_before_validation(client: TestClient) -> None:
    r = client.put(API_PREFIX + "/gateways/nope/weight", content=b"{not json", headers={"Content-Type": "application/json"})
    assert r.status_code == 401


def test_unauthenticated_routes(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok", "role": "primary", "connected": True, "detail": None}
    assert client.get("/metrics").status_code == 200
    page = client.get("/dashboard/")
    assert page.status_code == 200 and "supergw controller" in page.text
    assert client.get("/", follow_redirects=False).headers["location"] == "/dashboard/"
    assert client.get("/docs").status_code == 200


def test_dashboard_loads_nothing_from_the_network(client: TestClient) -> None:
    page = client.get("/dashboard/").text
    assert "src=\"http" not in page and "href=\"http" not in page and "cdn" not in page.lower()


def test_openapi_lists_every_route(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    for method, path, _ in ROUTES:
        templ = path.split("?")[0].replace("gw1", "{name}").replace("/3", "/{b}")
        assert method.lower() in paths[API_PREFIX + templ], templ


# ---------------------------------------------------------------- behaviour


def test_drain_pin_conflict_undrain(client: TestClient, core: FakeCore) -> None:
    r = client.post(API_PREFIX + "/gateways/gw2/drain", headers=AUTH)
    assert r.status_code == 200 and r.json()["state"] == "drained"
    r = client.post(API_PREFIX + "/buckets/5/pin", json={"gateway": "gw2"}, headers=AUTH)
    assert r.status_code == 409 and "drained" in r.json()["detail"]
    assert client.post(API_PREFIX + "/gateways/gw2/undrain", headers=AUTH).json()["state"] == "alive"
    r = client.post(API_PREFIX + "/buckets/5/pin", json={"gateway": "gw2"}, headers=AUTH)
    assert r.status_code == 200 and r.json()["pinned"] == "gw2" and r.json()["gateway"] == "gw2"
    r = client.post(API_PREFIX + "/buckets/5/move", json={"gateway": "gw3"}, headers=AUTH)
    assert r.status_code == 409 and "pinned" in r.json()["detail"]
    assert client.delete(API_PREFIX + "/buckets/5/pin", headers=AUTH).json()["pinned"] is None


def test_weight_is_set(client: TestClient) -> None:
    r = client.put(API_PREFIX + "/gateways/gw3/weight", json={"weight": 3.5}, headers=AUTH)
    assert r.status_code == 200 and r.json()["weight"] == 3.5


def test_rebalance_dry_run_plans_without_applying(client: TestClient, core: FakeCore) -> None:
    before = dict(core.assign)
    dry = client.post(API_PREFIX + "/rebalance", params={"dry_run": "true"}, headers=AUTH).json()
    assert dry["dry_run"] is True and dry["applied"] is False and dry["moves"]
    assert core.assign == before
    real = client.post(API_PREFIX + "/rebalance", params={"dry_run": "false"}, headers=AUTH).json()
    assert real["applied"] is True and real["moves"] == dry["moves"]
    assert real["ratio_after"] <= 1.10
    events = client.get(API_PREFIX + "/events", params={"limit": 5}, headers=AUTH).json()
    assert len(events) == 5 and events[1]["kind"] == "move" and events[1]["reason"] == "rebalance"
    assert events[0]["kind"] == "operator" and events[0]["reason"] == "rebalance" and events[0]["who"] == "admin"
    assert events[0]["detail"] == f"ok: moved {len(real['moves'])} buckets"


def test_agent_report_and_heartbeat_reach_the_core(client: TestClient, core: FakeCore) -> None:
    assert client.post(API_PREFIX + "/gateways/gw2/report", json=report_body("gw2"), headers=agent("gw2")).status_code == 204
    hb = {"gateway": "gw2", "timestamp": 3.0}
    assert client.post(API_PREFIX + "/gateways/gw2/heartbeat", json=hb, headers=agent("gw2")).status_code == 204
    assert core.reports[0].cpu_percent == 42.0 and core.heartbeats[0].timestamp == 3.0
    gw = client.get(API_PREFIX + "/gateways/gw2", headers=AUTH).json()
    assert gw["last_report"]["backend"] == "libipsec"


def test_the_answer_to_an_agent_carries_its_orders_only_while_there_are_some(client: TestClient, core: FakeCore) -> None:
    hb = {"gateway": "gw2", "timestamp": 3.0}
    r = client.post(API_PREFIX + "/gateways/gw2/report", json=report_body("gw2"), headers=agent("gw2"))
    assert r.status_code == 204 and TIMING_HEADER in r.headers and ORDERS_HEADER not in r.headers
    core.orders["gw2"] = AgentOrders(redirect_to=ipaddress.IPv4Address("203.0.113.1"))
    for path, body in (("report", report_body("gw2")), ("heartbeat", hb)):
        r = client.post(API_PREFIX + f"/gateways/gw2/{path}", json=body, headers=agent("gw2"))
        assert r.status_code == 204
        assert AgentOrders.from_header(r.headers[ORDERS_HEADER]).redirect_to == ipaddress.IPv4Address("203.0.113.1")
    # the orders are per gateway: gw1's answer says nothing
    r = client.post(API_PREFIX + "/gateways/gw1/report", json=report_body("gw1"), headers=agent("gw1"))
    assert ORDERS_HEADER not in r.headers


def test_backup_controller_answers_503(client: TestClient, core: FakeCore) -> None:
    core.primary = False
    r = client.post(API_PREFIX + "/gateways/gw1/drain", headers=AUTH)
    assert r.status_code == 503 and "backup" in r.json()["detail"] and r.headers["retry-after"] == "1"


# ---------------------------------------------------------------- bad requests


@pytest.mark.parametrize(("method", "path", "body"), GATEWAY_ROUTES)
def test_unknown_gateway_is_404_naming_the_known_ones(client: TestClient, method: str, path: str, body: Any) -> None:
    body = {**body, "gateway": "gw9"} if isinstance(body, dict) and "gateway" in body else body
    r = call(client, method, path.replace("gw1", "gw9"), body, auth_for(path))
    if is_agent_route(path):
        # gw1's agent may post (and poll) for gw1 only: an unknown name is refused before the lookup.
        assert r.status_code == 403 and "only for 'gw1', not for 'gw9'" in r.json()["detail"]
        return
    assert r.status_code == 404
    assert r.json()["detail"] == "no gateway named 'gw9'; known: gw1, gw2, gw3"


@pytest.mark.parametrize(("method", "path", "body"), BUCKET_ROUTES)
@pytest.mark.parametrize("bucket", [K, 4096, 70000, -1])
def test_bucket_out_of_range_is_404(client: TestClient, method: str, path: str, body: Any, bucket: int) -> None:
    r = call(client, method, path.replace("/3", f"/{bucket}"), body, AUTH)
    assert r.status_code == 404
    assert r.json()["detail"] == f"bucket {bucket} out of range 0..{K - 1}"


@pytest.mark.parametrize(("method", "path", "body"), BUCKET_ROUTES)
def test_bucket_not_a_number_is_422(client: TestClient, method: str, path: str, body: Any) -> None:
    r = call(client, method, path.replace("/3", "/abc"), body, AUTH)
    assert r.status_code == 422
    assert r.json()["errors"][0]["field"] == "path.b"


@pytest.mark.parametrize(("method", "path", "body"), BODY_ROUTES)
def test_bad_json_is_422(client: TestClient, method: str, path: str, body: Any) -> None:
    headers = {**auth_for(path), "Content-Type": "application/json"}
    r = client.request(method, API_PREFIX + path, content=b'{"weight": ', headers=headers)
    assert r.status_code == 422
    assert "not valid JSON" in r.json()["detail"]


@pytest.mark.parametrize(("method", "path", "body"), BODY_ROUTES)
def test_missing_body_is_422(client: TestClient, method: str, path: str, body: Any) -> None:
    r = call(client, method, path, None, auth_for(path))
    assert r.status_code == 422
    assert "body" in r.json()["detail"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"weight": 0}, "body.weight"),
        ({"weight": -1.5}, "body.weight"),
        ({"weight": "heavy"}, "body.weight"),
        ({"weight": 1e9}, "body.weight"),
        ({}, "body.weight"),
        ({"weight": 1, "extra": True}, "body.extra"),
        ([1, 2], "body"),
        # strict: no number from a boolean or a string (issue 21: `true` was taken as 1.0)
        ({"weight": True}, "body.weight"),
        ({"weight": "2"}, "body.weight"),
    ],
)
def test_bad_weight_is_422_naming_the_field(client: TestClient, body: Any, field: str) -> None:
    r = client.put(API_PREFIX + "/gateways/gw1/weight", json=body, headers=AUTH)
    assert r.status_code == 422
    assert field in [e["field"] for e in r.json()["errors"]], r.json()
    assert r.json()["detail"].startswith(field)


def test_nan_weight_is_422(client: TestClient) -> None:
    r = client.put(API_PREFIX + "/gateways/gw1/weight", content=b'{"weight": NaN}', headers={**AUTH, "Content-Type": "application/json"})
    assert r.status_code == 422


@pytest.mark.parametrize("path", ["/buckets/3/pin", "/buckets/3/move"])
def test_pin_or_move_to_unknown_gateway_is_404(client: TestClient, core: FakeCore, path: str) -> None:
    """A schema-valid body naming no gateway refers to nothing: 404 as in a path, not 422."""
    before = (dict(core.assign), dict(core.pins))
    r = client.post(API_PREFIX + path, json={"gateway": "gw9"}, headers=AUTH)
    assert r.status_code == 404
    assert r.json()["detail"] == "body.gateway: no gateway named 'gw9'; known: gw1, gw2, gw3"
    assert (core.assign, core.pins) == before


@pytest.mark.parametrize("body", [{"gateway": 1}, {"gateway": True}, {"gateway": ["gw1"]}])
def test_pin_gateway_must_be_a_string(client: TestClient, body: Any) -> None:
    r = client.post(API_PREFIX + "/buckets/3/pin", json=body, headers=AUTH)
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "body.gateway", r.json()


@pytest.mark.parametrize("route", ["report", "heartbeat"])
def test_report_for_another_gateway_is_403(client: TestClient, core: FakeCore, route: str) -> None:
    """Schema-valid, so not 422: the agent of gw1 may not speak for gw2."""
    body = report_body("gw2") if route == "report" else {"gateway": "gw2", "timestamp": time.time()}
    r = client.post(API_PREFIX + f"/gateways/gw1/{route}", json=body, headers=agent("gw1"))
    assert r.status_code == 403 and r.json()["detail"].startswith("body.gateway: 'gw2' is not the gateway in the path 'gw1'")
    assert core.reports == [] and core.heartbeats == []


def test_report_with_bad_fields_is_422_naming_them(client: TestClient) -> None:
    body = report_body() | {"cpu_percent": -3, "backend": "esp-magic"}
    r = client.post(API_PREFIX + "/gateways/gw1/report", json=body, headers=agent("gw1"))
    fields = {e["field"] for e in r.json()["errors"]}
    assert r.status_code == 422 and {"body.cpu_percent", "body.backend"} <= fields


@pytest.mark.parametrize("query", ["limit=0", "limit=5000", "limit=x", "since_id=-1"])
def test_bad_event_query_is_422(client: TestClient, query: str) -> None:
    r = client.get(API_PREFIX + "/events?" + query, headers=AUTH)
    assert r.status_code == 422 and r.json()["errors"][0]["field"].startswith("query.")


def test_bad_dry_run_is_422(client: TestClient) -> None:
    r = client.post(API_PREFIX + "/rebalance?dry_run=perhaps", headers=AUTH)
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "query.dry_run"


def test_token_from_config_file(tmp_path: Any) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("file-token-abcdef\n")
    cfg = make_config().model_copy(update={"api": make_config().api.model_copy(update={"token": None, "token_file": token_file})})
    c = TestClient(create_app(FakeCore(cfg), cfg))
    assert c.get(API_PREFIX + "/status", headers={"Authorization": "Bearer file-token-abcdef"}).status_code == 200
    assert c.get(API_PREFIX + "/status", headers=AUTH).status_code == 401


def test_real_core_without_switch() -> None:
    """The real core (not connected to any switch) behind the API: reads answer, writes 503."""
    from supergw_controller.compose import ControllerCore

    cfg = make_config()
    c = TestClient(create_app(ControllerCore(cfg), cfg))
    assert c.get(API_PREFIX + "/status", headers=AUTH).json()["connected"] is False
    assert [g["name"] for g in c.get(API_PREFIX + "/gateways", headers=AUTH).json()] == ["gw1", "gw2", "gw3"]
    assert len(c.get(API_PREFIX + "/buckets", headers=AUTH).json()) == K
    r = c.post(API_PREFIX + "/gateways/gw1/drain", headers=AUTH)
    assert r.status_code == 503 and "not connected" in r.json()["detail"]
    assert c.post(API_PREFIX + "/buckets/3/pin", json={"gateway": "gw2"}, headers=AUTH).status_code == 503
    dry = c.post(API_PREFIX + "/rebalance?dry_run=true", headers=AUTH).json()
    assert dry["dry_run"] is True and len(dry["moves"]) == K  # every bucket unassigned until connected
    hb = {"gateway": "gw1", "timestamp": 1.0}
    assert c.post(API_PREFIX + "/gateways/gw1/heartbeat", json=hb, headers=agent("gw1")).status_code == 204
    assert c.get(API_PREFIX + "/gateways/gw9", headers=AUTH).status_code == 404
    assert c.get("/healthz").json()["status"] == "ok"
    assert c.get("/metrics").status_code == 200


def test_hosts_query_reaches_the_core_and_bad_filters_are_refused(client: TestClient, core: FakeCore) -> None:
    r = client.get(API_PREFIX + "/hosts", params={"limit": 50, "after": "02:00:00:00:00:AA", "gateway": "gw2",
                                                  "bucket": 3, "port": 1, "ip": "fd00::0:1", "learned": "false"},
                   headers=AUTH)
    assert r.status_code == 200, r.text
    assert r.json()["total"] == 1 and r.json()["next_after"] is None
    assert core.host_queries[-1] == HostQuery(limit=50, after="02:00:00:00:00:aa", gateway="gw2", bucket=3, port=1,
                                              ip="fd00::1", learned=False)
    asked = len(core.host_queries)
    for params, code, said in [
        ({"mac": "02:00:00"}, 422, "query.mac"),
        ({"after": "zz"}, 422, "query.after"),
        ({"ip": "10.0.0.300"}, 422, "query.ip"),
        ({"limit": 0}, 422, "query.limit"),
        ({"limit": 5001}, 422, "query.limit"),
        ({"port": 70000}, 422, "query.port"),
        ({"gateway": "gw9"}, 404, "query.gateway: no gateway named 'gw9'"),
        ({"bucket": K}, 404, f"query.bucket: bucket {K} out of range 0..{K - 1}"),
    ]:
        r = client.get(API_PREFIX + "/hosts", params=params, headers=AUTH)
        assert r.status_code == code and said in r.json()["detail"], (params, r.text)
    assert len(core.host_queries) == asked  # nothing refused reached the core
