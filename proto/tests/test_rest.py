"""The typed REST client against a real HTTP server on 127.0.0.1 that answers as the
controller does (status, JSON bodies, `{"detail": ...}` errors) and records each request."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from supergw_proto.api import ReplicaHealth
from supergw_proto.reports import Heartbeat
from supergw_proto.rest import ApiError, ControllerClient, read_token

GATEWAY = {
    "name": "gw1", "port": 11, "mac": "02:00:00:00:01:01", "weight": 1.0, "state": "alive", "drained": False,
    "alive": True, "port_up": True, "buckets": 3, "load": 1.5, "heartbeat_age_s": 0.05, "tunnel_up": True,
    "partner_up": None, "unhealthy": None, "report_age_s": None, "last_report": None,
}
BUCKET = {"bucket": 5, "vmac": "02:5e:00:00:00:05", "gateway": "gw2", "pinned": None, "packets": 10, "bytes": 640,
          "pps": 1.0, "bps": 64.0}
STATUS = {
    "role": "primary", "connected": True, "switch_address": "127.0.0.1:9559", "device_id": 1, "election_id": "0:10",
    "pipeline_cookie": 7, "buckets": 16, "gateway_ip": "10.0.0.1", "vmac_base": "02:5e:00:00:00:00", "uptime_s": 3.0,
    "gateways_alive": 1, "gateways_total": 1, "buckets_unassigned": 0, "hosts": 0, "imbalance": 1.0,
    "moves_total": {"failover": 2}, "failovers_total": 1, "digests_total": 0, "packet_ins_total": 0,
    "p4rt_errors_total": 0, "reconnects_total": 0, "reports_total": 0, "heartbeats_total": 4,
}
REBALANCE = {"dry_run": True, "applied": False, "moves": [{"bucket": 1, "src": "gw1", "dst": "gw2", "reason": "rebalance"}],
             "load_before": {"gw1": 2.0}, "load_after": {"gw1": 1.0}, "ratio_before": 2.0, "ratio_after": 1.0,
             "warnings": []}
HISTORY = {"interval_s": 1.0, "capacity": 3600, "truncated": False, "samples": []}
EVENT = {"id": 9, "ts": 1.5, "kind": "move", "bucket": 5, "src": "gw1", "dst": "gw2", "reason": "operator", "detail": ""}
HOST = {"mac": "02:00:00:00:00:11", "port": 1, "ip": "10.0.0.11", "bucket": 5, "vmac": "02:5e:00:00:00:05",
        "gateway": "gw2", "idle_s": 0.5}
REPLICA = {"status": "ok", "role": "backup", "connected": True,
           "ha": {"replica": "c2", "role": "backup", "term": 4, "election_id": "none", "leader": "c1",
                  "leader_api": "http://10.0.0.31:8080", "takeovers": 0}}

# (method, path) -> (status, body): what the server answers
ROUTES: dict[tuple[str, str], tuple[int, Any]] = {
    ("GET", "/api/v1/status"): (200, STATUS),
    ("GET", "/api/v1/gateways"): (200, [GATEWAY]),
    ("GET", "/api/v1/gateways/gw1"): (200, GATEWAY),
    ("GET", "/api/v1/gateways/gw9"): (404, {"detail": "no gateway named 'gw9'; known: gw1"}),
    ("POST", "/api/v1/gateways/gw1/drain"): (200, {**GATEWAY, "state": "drained", "drained": True}),
    ("POST", "/api/v1/gateways/gw1/undrain"): (200, GATEWAY),
    ("PUT", "/api/v1/gateways/gw1/weight"): (200, {**GATEWAY, "weight": 2.0}),
    ("GET", "/api/v1/buckets"): (200, [BUCKET]),
    ("GET", "/api/v1/buckets/5"): (200, BUCKET),
    ("POST", "/api/v1/buckets/5/pin"): (200, {**BUCKET, "pinned": "gw2"}),
    ("DELETE", "/api/v1/buckets/5/pin"): (200, BUCKET),
    ("POST", "/api/v1/buckets/5/move"): (200, BUCKET),
    ("POST", "/api/v1/buckets/6/move"): (409, {"detail": "gateway gw3 is drained"}),
    ("POST", "/api/v1/rebalance"): (200, REBALANCE),
    ("GET", "/api/v1/hosts"): (200, [HOST]),
    ("GET", "/api/v1/events"): (200, [EVENT]),
    ("GET", "/api/v1/history"): (200, HISTORY),
    ("POST", "/api/v1/gateways/gw1/heartbeat"): (204, None),
    ("GET", "/healthz"): (503, REPLICA),
    ("GET", "/metrics"): (200, "supergw_gateway_up{gateway=\"gw1\"} 1.0\n"),
}


class Recorder(BaseHTTPRequestHandler):
    seen: list[dict[str, Any]] = []
    routes: dict[tuple[str, str], tuple[int, Any]] = {}

    def _answer(self) -> None:
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        self.seen.append({"method": self.command, "path": url.path, "query": parse_qs(url.query), "body": body,
                          "auth": self.headers.get("Authorization")})
        status, answer = self.routes.get((self.command, url.path), (404, {"detail": "Not Found"}))
        raw = answer.encode() if isinstance(answer, str) else b"" if answer is None else json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain" if isinstance(answer, str) else "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    do_GET = do_POST = do_PUT = do_DELETE = _answer

    def log_message(self, *args: Any) -> None:
        pass


@dataclass
class Server:
    url: str
    seen: list[dict[str, Any]]  # every request, in order
    routes: dict[tuple[str, str], tuple[int, Any]]  # what it answers; a test may change it


@pytest.fixture
def server() -> Iterator[Server]:
    """A fresh server answering ROUTES."""
    seen: list[dict[str, Any]] = []
    routes = dict(ROUTES)
    handler = type("Handler", (Recorder,), {"seen": seen, "routes": routes})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield Server(f"http://127.0.0.1:{httpd.server_address[1]}", seen, routes)
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_every_operator_call_sends_its_route_and_returns_the_apis_models(server: Server) -> None:
    url, seen = server.url, server.seen
    with ControllerClient(url, token="tok-0123456789") as api:
        assert api.status().failovers_total == 1
        assert [g.name for g in api.gateways()] == ["gw1"]
        assert api.gateway("gw1").buckets == 3
        assert api.drain("gw1").drained is True
        assert api.undrain("gw1").state == "alive"
        assert api.set_weight("gw1", 2.0).weight == 2.0
        assert api.buckets()[0].gateway == "gw2"
        assert api.bucket(5).bps == 64.0
        assert api.pin(5, "gw2").pinned == "gw2"
        assert api.unpin(5).pinned is None
        assert api.move(5, "gw2").gateway == "gw2"
        plan = api.rebalance(dry_run=True)
        assert plan.moves[0].dst == "gw2" and plan.dry_run
        assert api.hosts()[0].ip == "10.0.0.11"
        assert api.events(limit=5, since_id=3)[0].reason == "operator"
        assert api.history(since=12.5, limit=10).capacity == 3600
        assert 'gateway="gw1"' in api.metrics()
    calls = {(r["method"], r["path"]): r for r in seen}
    assert all(r["auth"] == "Bearer tok-0123456789" for r in seen)
    assert calls[("PUT", "/api/v1/gateways/gw1/weight")]["body"] == {"weight": 2.0}
    assert calls[("POST", "/api/v1/buckets/5/pin")]["body"] == {"gateway": "gw2"}
    assert calls[("POST", "/api/v1/buckets/5/move")]["body"] == {"gateway": "gw2"}
    assert calls[("POST", "/api/v1/rebalance")]["query"] == {"dry_run": ["true"]}
    assert calls[("GET", "/api/v1/events")]["query"] == {"limit": ["5"], "since_id": ["3"]}
    assert calls[("GET", "/api/v1/history")]["query"] == {"limit": ["10"], "since": ["12.5"]}


def test_refusals_carry_the_status_and_the_apis_message(server: Server) -> None:
    url = server.url
    api = ControllerClient(url, token="tok-0123456789")
    with pytest.raises(ApiError) as missing:
        api.gateway("gw9")
    assert missing.value.status == 404 and missing.value.detail == "no gateway named 'gw9'; known: gw1"
    assert missing.value.answered and "GET" in str(missing.value) and "/api/v1/gateways/gw9" in str(missing.value)
    with pytest.raises(ApiError) as conflict:
        api.move(6, "gw3")
    assert conflict.value.status == 409 and "drained" in conflict.value.detail
    # the raw call hands back what the typed ones refuse
    assert api.request("GET", "/api/v1/gateways/gw9").status_code == 404


def test_an_answer_off_the_schema_is_an_error_not_a_half_filled_model(server: Server) -> None:
    url = server.url
    server.routes[("GET", "/api/v1/status")] = (200, {"role": "primary"})
    server.routes[("GET", "/api/v1/hosts")] = (200, "not json at all")
    api = ControllerClient(url)
    with pytest.raises(ApiError, match="does not match the API's schema") as wrong:
        api.status()
    assert wrong.value.status == 200 and "failovers_total" in wrong.value.detail
    with pytest.raises(ApiError, match="does not match the API's schema"):
        api.hosts()


def test_health_of_a_replica_is_read_even_from_an_error_status(server: Server) -> None:
    url, seen = server.url, server.seen
    health = ControllerClient(url).health()
    assert isinstance(health, ReplicaHealth) and health.ha.leader == "c1" and health.ha.role == "backup"
    assert seen[-1]["auth"] is None  # no token configured, none sent


def test_agent_routes_post_the_wire_models(server: Server) -> None:
    url, seen = server.url, server.seen
    ControllerClient(url, token="agent-0123456789").heartbeat(Heartbeat(gateway="gw1", timestamp=12.0))
    assert seen[-1]["body"] == {"gateway": "gw1", "timestamp": 12.0, "charon_down": None, "partner_down": None}


def test_a_controller_that_does_not_answer_says_so() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    api = ControllerClient(f"http://127.0.0.1:{port}", timeout=2)
    with pytest.raises(ApiError) as down:
        api.status()
    assert down.value.status is None and not down.value.answered and f"127.0.0.1:{port}" in str(down.value)
    assert not api.answers()


def test_token_files(tmp_path: Path) -> None:
    token = tmp_path / "api-token"
    token.write_text("secret-0123456789\n")
    assert read_token(token) == "secret-0123456789"
    token.write_text("  \n")
    with pytest.raises(ValueError, match="empty"):
        read_token(token)
    with pytest.raises(ValueError, match="cannot read"):
        read_token(tmp_path / "missing")


def test_orders_long_poll_sends_after_and_wait_and_reads_the_generation() -> None:
    import httpx

    from supergw_proto.reports import ORDERS_GENERATION_HEADER

    asked: list[httpx.Request] = []
    body = {"replication": {"generation": 12, "protects": "gw3", "take_over": ["gw3"]}}

    def answer(request: httpx.Request) -> httpx.Response:
        asked.append(request)
        if request.url.params.get("after") == "99":
            return httpx.Response(200, json=body)  # a controller that does not say the generation
        return httpx.Response(200, json=body, headers={ORDERS_GENERATION_HEADER: "12"})

    client = ControllerClient("http://ctl", token="agent-0123456789", transport=httpx.MockTransport(answer))
    generation, orders = client.orders("gw1", after=11, wait=2.5)
    assert generation == 12 and orders.replication is not None and orders.replication.take_over == ("gw3",)
    assert asked[-1].url.path == "/api/v1/gateways/gw1/orders"
    assert dict(asked[-1].url.params) == {"after": "11", "wait": "2.5"}
    assert asked[-1].headers["authorization"] == "Bearer agent-0123456789"
    with pytest.raises(ApiError, match="does not match the API's schema"):
        client.orders("gw1", after=99)
