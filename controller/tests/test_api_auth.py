"""Who may do what: read-only and admin operators, per-gateway agent tokens.

Every refusal is checked twice: the status and message the caller sees, and that the core
saw nothing (no drain, pin, move, weight, report or heartbeat, no event).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from fastapi.testclient import TestClient
from test_api import (  # noqa: F401 (client, core: the same pytest fixtures)
    AGENT_TOKENS,
    AUTH,
    READER,
    READER_TOKEN,
    ROUTES,
    TOKEN,
    FakeCore,
    agent,
    call,
    client,
    core,
    is_agent_route,
    make_config,
    report_body,
)

from supergw_controller.api import API_PREFIX, create_app
from supergw_controller.api.auth import Authenticator, Principal
from supergw_controller.config import Role

AGENT_ROUTES = [r for r in ROUTES if is_agent_route(r[1])]
READS = [r for r in ROUTES if r[0] == "GET" and r not in AGENT_ROUTES]
ADMIN_ROUTES = [r for r in ROUTES if r not in READS and r not in AGENT_ROUTES]


def untouched(core: FakeCore) -> bool:
    return (
        not core.drained
        and not core.pins
        and not core.reports
        and not core.heartbeats
        and not core.polls
        and core.moves_total == {}
        and core.weights == {g.name: g.weight for g in core.config.gateways}
        and core.events_log == []
    )


def test_admin_routes_are_exactly_the_writes() -> None:
    assert {(m, p.split("?")[0]) for m, p, _ in ADMIN_ROUTES} == {
        ("POST", "/gateways/gw1/drain"),
        ("POST", "/gateways/gw1/undrain"),
        ("PUT", "/gateways/gw1/weight"),
        ("POST", "/buckets/3/pin"),
        ("DELETE", "/buckets/3/pin"),
        ("POST", "/buckets/3/move"),
        ("POST", "/rebalance"),
    }


@pytest.mark.parametrize(("method", "path", "body"), READS)
def test_read_only_token_reads_everything(client: TestClient, method: str, path: str, body: Any) -> None:
    r = call(client, method, path, body, READER)
    assert r.status_code == 200, r.text


@pytest.mark.parametrize(("method", "path", "body"), ADMIN_ROUTES)
def test_read_only_token_cannot_write(client: TestClient, core: FakeCore, method: str, path: str, body: Any) -> None:
    r = call(client, method, path, body, READER)
    assert r.status_code == 403
    assert r.json()["detail"] == "operator 'viewer' has role read-only; this action needs role 'admin'"
    assert untouched(core)


@pytest.mark.parametrize(("method", "path", "body"), ADMIN_ROUTES)
def test_read_only_is_refused_before_the_body_is_read(client: TestClient, core: FakeCore, method: str, path: str, body: Any) -> None:
    r = client.request(method, API_PREFIX + path, content=b"{not json", headers={**READER, "Content-Type": "application/json"})
    assert r.status_code == 403 and "needs role 'admin'" in r.json()["detail"]
    assert untouched(core)


@pytest.mark.parametrize(("method", "path", "body"), READS + ADMIN_ROUTES)
def test_agent_token_cannot_call_operator_routes(client: TestClient, core: FakeCore, method: str, path: str, body: Any) -> None:
    r = call(client, method, path, body, agent("gw1"))
    assert r.status_code == 403
    assert r.json()["detail"].startswith("the agent token of gateway 'gw1' cannot call operator routes")
    assert untouched(core)


@pytest.mark.parametrize(("method", "path", "body"), AGENT_ROUTES)
def test_agent_cannot_post_for_another_gateway(client: TestClient, core: FakeCore, method: str, path: str, body: Any) -> None:
    other = None if body is None else {**body, "gateway": "gw2"}
    r = call(client, method, path.replace("gw1", "gw2"), other, agent("gw1"))
    assert r.status_code == 403
    assert r.json()["detail"] == "the agent token of gateway 'gw1' may report and heartbeat only for 'gw1', not for 'gw2'"
    assert untouched(core)


@pytest.mark.parametrize(("method", "path", "body"), AGENT_ROUTES)
@pytest.mark.parametrize("headers", [AUTH, READER], ids=["admin", "read-only"])
def test_operators_cannot_post_for_a_gateway(
    client: TestClient, core: FakeCore, method: str, path: str, body: Any, headers: dict[str, str]
) -> None:
    """Else an operator could keep a dead gateway 'alive'."""
    r = call(client, method, path, body, headers)
    assert r.status_code == 403
    assert r.json()["detail"].startswith("only the agent of gateway 'gw1' may post its reports and heartbeats")
    assert untouched(core)


@pytest.mark.parametrize(("method", "path", "body"), AGENT_ROUTES)
def test_agent_posts_for_itself(client: TestClient, core: FakeCore, method: str, path: str, body: Any) -> None:
    for gw in AGENT_TOKENS:
        own = None if body is None else {**body, "gateway": gw}
        assert call(client, method, path.replace("gw1", gw), own, agent(gw)).status_code == (200 if method == "GET" else 204)
    taken = {x.gateway for x in core.reports + core.heartbeats} | {p[0] for p in core.polls}  # type: ignore[operator]
    assert taken == set(AGENT_TOKENS)


@pytest.mark.parametrize(("method", "path", "body"), ROUTES)
@pytest.mark.parametrize(
    "token",
    [TOKEN + "x", TOKEN[:-1], AGENT_TOKENS["gw1"].upper(), "gw1", "viewer", READER_TOKEN + " extra"],
    ids=["longer", "shorter", "wrong-case", "a-name", "a-token-name", "trailing-word"],
)
def test_unknown_token_is_401(client: TestClient, core: FakeCore, method: str, path: str, body: Any, token: str) -> None:
    r = call(client, method, path, body, {"Authorization": f"Bearer {token}"})
    assert r.status_code == 401
    assert r.json()["detail"].startswith("invalid bearer token")
    assert r.headers["www-authenticate"].startswith("Bearer")
    assert untouched(core)


def test_every_admin_action_is_logged_with_who(client: TestClient, core: FakeCore) -> None:
    assert client.post(API_PREFIX + "/gateways/gw2/drain", headers=AUTH).status_code == 200
    assert client.put(API_PREFIX + "/gateways/gw3/weight", json={"weight": 3}, headers=AUTH).status_code == 200
    assert client.post(API_PREFIX + "/buckets/5/pin", json={"gateway": "gw2"}, headers=AUTH).status_code == 409
    assert client.post(API_PREFIX + "/gateways/gw2/undrain", headers=AUTH).status_code == 200
    assert client.post(API_PREFIX + "/buckets/5/pin", json={"gateway": "gw2"}, headers=AUTH).status_code == 200
    assert client.delete(API_PREFIX + "/buckets/5/pin", headers=AUTH).status_code == 200
    assert client.post(API_PREFIX + "/buckets/6/move", json={"gateway": "gw3"}, headers=AUTH).status_code == 200
    assert client.post(API_PREFIX + "/rebalance?dry_run=true", headers=AUTH).status_code == 200
    ops = [e for e in client.get(API_PREFIX + "/events?limit=1000", headers=READER).json() if e["kind"] == "operator"]
    got = [(e["reason"], e["who"], e["src"], e["bucket"], e["dst"], e["detail"].split(":")[0]) for e in reversed(ops)]
    assert got == [
        ("drain", "admin", "gw2", None, None, "ok"),
        ("weight", "admin", "gw3", None, None, "ok"),
        ("pin", "admin", None, 5, "gw2", "refused"),
        ("undrain", "admin", "gw2", None, None, "ok"),
        ("pin", "admin", None, 5, "gw2", "ok"),
        ("unpin", "admin", None, 5, None, "ok"),
        ("move", "admin", None, 6, "gw3", "ok"),
        ("rebalance-dry-run", "admin", None, None, None, "ok"),
    ]
    text = str(ops)
    assert TOKEN not in text and READER_TOKEN not in text


def test_named_admin_is_who(core: FakeCore) -> None:
    auth = Authenticator([("alice-admin-token-0123456789", Principal("alice", role=Role.ADMIN))])
    c = TestClient(create_app(core, core.config, auth=auth))
    assert c.post(API_PREFIX + "/gateways/gw1/drain", headers={"Authorization": "Bearer alice-admin-token-0123456789"}).status_code == 200
    assert core.events_log[0].who == "alice" and core.events_log[0].reason == "drain"
    assert c.get(API_PREFIX + "/status", headers=AUTH).status_code == 401  # the override replaced the config's tokens


def test_tokens_never_reach_the_logs(client: TestClient, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    for headers in (AUTH, READER, agent("gw1"), {"Authorization": "Bearer not-a-token-at-all"}):
        for method, path, body in ROUTES:
            call(client, method, path, body, headers)
    for secret in (TOKEN, READER_TOKEN, *AGENT_TOKENS.values(), "not-a-token-at-all"):
        assert secret not in caplog.text


def test_shared_secret_between_principals_is_refused() -> None:
    with pytest.raises(ValueError, match="agent:gw2: its token is also another principal's token"):
        Authenticator([("same-secret-0123456789", Principal("gw1", gateway="gw1")), ("same-secret-0123456789", Principal("gw2", gateway="gw2"))])


def test_report_body_for_itself_still_validated(client: TestClient, core: FakeCore) -> None:
    body = report_body("gw1") | {"cpu_percent": -1}
    r = client.post(API_PREFIX + "/gateways/gw1/report", json=body, headers=agent("gw1"))
    assert r.status_code == 422 and core.reports == []


def test_real_dispatcher_logs_refused_admin_calls_with_who() -> None:
    """The real core (no switch): a drain is refused (503) and the refusal is in the event log."""
    from supergw_controller.compose import ControllerCore

    cfg = make_config()
    c = TestClient(create_app(ControllerCore(cfg), cfg))
    assert c.post(API_PREFIX + "/gateways/gw1/drain", headers=AUTH).status_code == 503
    assert c.post(API_PREFIX + "/gateways/gw1/drain", headers=READER).status_code == 403
    ops = [e for e in c.get(API_PREFIX + "/events", headers=READER).json() if e["kind"] == "operator"]
    assert len(ops) == 1  # the read-only attempt never reached the core
    assert ops[0]["who"] == "admin" and ops[0]["reason"] == "drain" and ops[0]["src"] == "gw1"
    assert ops[0]["detail"].startswith("refused: ")


# -- /healthz and /metrics: open by default, behind a read-only token when configured


def _ops_client(required: bool) -> TestClient:
    cfg = make_config()
    cfg = cfg.model_copy(update={"api": cfg.api.model_copy(update={"ops_token_required": required})})
    return TestClient(create_app(FakeCore(cfg), cfg))


@pytest.mark.parametrize("path", ["/healthz", "/metrics"])
def test_ops_routes_are_open_unless_configured(path: str) -> None:
    assert _ops_client(False).get(path).status_code == 200


@pytest.mark.parametrize("path", ["/healthz", "/metrics"])
def test_ops_routes_need_an_operator_token_when_configured(path: str) -> None:
    c = _ops_client(True)
    r = c.get(path)
    assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
    assert r.json()["detail"] == (f"{path} needs an operator token (role read-only or admin) because "
                                  "api.ops_token_required is set: missing bearer token: send 'Authorization: Bearer <token>'")
    r = c.get(path, headers={"Authorization": "Bearer not-a-token-of-ours-0000"})
    assert r.status_code == 401 and "invalid bearer token" in r.json()["detail"]
    r = c.get(path, headers=agent("gw1"))
    assert r.status_code == 403 and "agent token of gateway 'gw1' cannot call operator routes" in r.json()["detail"]
    assert c.get(path, headers=READER).status_code == 200
    assert c.get(path, headers=AUTH).status_code == 200
    assert c.get("/dashboard/").status_code == 200  # the page holds no data
