"""The whole OpenAPI surface fuzzed by schemathesis, as its CLI would run it, in-process.

Every phase (coverage, fuzzing, stateful; examples has none to run) and every default
check (no 5xx, documented status codes, bodies and headers matching the documented
schemas, schema-valid input accepted and invalid input refused, `Allow` on 405, ...)
against the real app on the real core (`corekit`: the composed core on a recording switch
session), once per kind of caller: admin, read-only, a gateway's agent, no token.

A guard around the app snapshots what the core holds (bucket map and pins, gateway
weights, drains and states, reports and heartbeats taken, switch writes) before and after
every request: a refused call (status >= 400) must change none of it. Each run writes its
tally (`supergw_proto.badinput`) for the chaos report.
"""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from schemathesis.config import SchemathesisConfig
from schemathesis.engine import Status, events, from_schema

from supergw_controller.api import create_app
from supergw_controller.compose import ControllerCore
from supergw_controller.config import parse_config
from supergw_controller.intent_store import IntentStore
from supergw_proto.badinput import Tally

import corekit

ADMIN = "fuzz-admin-token-0123456789"
READER = "fuzz-reader-token-0123456789"
TOKENS: dict[str, str | None] = {
    "admin": ADMIN,
    "read-only": READER,
    "agent": "unit-agent-g1-token",  # corekit's agent token of g1
    "none": None,
}
# Per operation and phase; the CLI's default is 100. Enough to reach every documented
# status on every route while `make unit` stays fast; `SUPERGW_FUZZ_EXAMPLES` raises it.
MAX_EXAMPLES = 25
SEED = 21

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
Asgi = Callable[[Scope, Receive, Send], Awaitable[None]]


async def snapshot(core: ControllerCore, session: corekit.RecordingSession) -> tuple[Any, ...]:
    """What a refused call must not change (the event log is left out: a refused admin call
    is recorded there on purpose, as `refused: ...`)."""
    buckets = tuple((b.bucket, b.gateway, b.pinned) for b in await core.buckets())
    gateways = tuple((g.name, g.weight, g.drained, g.state, g.alive) for g in await core.gateways())
    status = await core.status()
    return buckets, gateways, status.reports_total, status.heartbeats_total, len(session.batches)


class StateGuard:
    """ASGI wrapper: counts answers by status and finds refused calls that changed state."""

    def __init__(self, app: Asgi, core: ControllerCore, session: corekit.RecordingSession) -> None:
        self.app, self.core, self.session = app, core, session
        self.statuses: Counter[int] = Counter()
        self.violations: list[str] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        before = await snapshot(self.core, self.session)
        status: list[int] = []

        async def capture(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status.append(int(message["status"]))
            await send(message)

        await self.app(scope, receive, capture)
        code = status[0] if status else 0
        self.statuses[code] += 1
        if code >= 400 and await snapshot(self.core, self.session) != before:
            self.violations.append(f"{scope['method']} {scope['path']} -> {code} changed the core's state")


# Known and waived: `remote_access.ike_spi_label`/`ike_spi_mask` are 64-bit integers, beyond the
# 2**53 a JSON number holds exactly in f64; schemathesis judges 2**64 + 382 below the documented
# exclusive maximum 2**64 (both round to 2.0**64) and calls its refusal a rejected valid input.
# The server compares exactly and is right. (A hex string would be the portable wire form.)
SPI_FIELDS = frozenset({"body.remote_access.ike_spi_label", "body.remote_access.ike_spi_mask"})


def beyond_f64(response: Any) -> bool:
    """A 422 whose only complaints are 64-bit SPI fields past 2**64."""
    try:
        errors = response.json()["errors"]
    except (ValueError, KeyError, TypeError):
        return False
    return bool(errors) and all(e["field"] in SPI_FIELDS and e["type"] == "less_than" for e in errors)


def failures(event: events.ScenarioFinished) -> list[str]:
    out = []
    for case_id, checks in event.recorder.checks.items():
        for check in checks:
            if check.status is Status.FAILURE and check.failure_info is not None:
                interaction = event.recorder.interactions.get(case_id)
                request = f"{interaction.request.method} {interaction.request.uri}" if interaction else "?"
                response = interaction.response if interaction else None
                answer = f" -> {response.status_code} {(response.content or b'')[:300]!r}" if response else ""
                sent = f" {(interaction.request.body or b'')[:300]!r}" if interaction else ""
                out.append(f"{event.label} [{check.name}] {request}{sent}{answer}: {check.failure_info.failure.title}")
    return out


def short_polls(core: ControllerCore) -> None:
    """The orders long-poll waits at most 0.01 s here: a fuzzer asks for `wait=30` with an
    `after` nobody reaches, and what the poll answers, not how long it holds, is checked."""
    wait_orders = core.wait_orders

    async def capped(name: str, after: int, wait_s: float) -> Any:
        return await wait_orders(name, after, min(wait_s, 0.01))

    core.wait_orders = capped  # type: ignore[method-assign]


@pytest.mark.parametrize("kind", list(TOKENS))
def test_openapi_surface_survives_schemathesis(kind: str, tmp_path: Path) -> None:
    data = corekit.config_data(
        api={"token": ADMIN, "tokens": [{"name": "viewer", "role": "read-only", "token": READER}]}
    )
    config = parse_config(data, tmp_path)
    core, session = asyncio.run(corekit.running_core(config, corekit.Clock()))
    short_polls(core)
    guard = StateGuard(create_app(core, config), core, session)
    token = TOKENS[kind]
    settings: dict[str, Any] = {
        "seed": SEED,
        "generation": {"max-examples": int(os.environ.get("SUPERGW_FUZZ_EXAMPLES", MAX_EXAMPLES))},
        "headers": {"Authorization": f"Bearer {token}"} if token else {},
    }
    if kind == "agent":  # its own gateway in every path, so its report and heartbeat get through too
        settings["parameters"] = {"path.name": "g1"}
    schema = schemathesis.openapi.from_asgi("/openapi.json", guard, config=SchemathesisConfig.from_dict(settings))
    waived: list[int] = []

    @schema.hook
    def filter_failure(context: Any, failure: Any, case: Any, response: Any) -> bool:
        if failure.title == "Schema-valid request rejected" and response.status_code == 422 and beyond_f64(response):
            waived.append(1)
            return False
        return True

    if kind == "agent":

        @schema.hook
        def map_body(context: Any, body: Any) -> Any:
            """Most bodies name its own gateway, so reports and heartbeats are also taken (204);
            only a gateway that is valid anyway is replaced, so an invalid body stays invalid."""
            if isinstance(body, dict) and isinstance(body.get("gateway"), str) and 1 <= len(body["gateway"]) <= 64:
                if len(body["gateway"]) % 4:  # and a quarter keep theirs: 403
                    body["gateway"] = "g1"
            return body

    found: list[str] = []
    errors: list[str] = []
    phases: dict[str, str] = {}
    cases: Counter[str] = Counter()
    for event in from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished):
            cases[event.phase.value] += len(event.recorder.cases)
            found += failures(event)
        elif isinstance(event, events.PhaseFinished):
            phases[event.phase.name.value] = event.status.value
        elif isinstance(event, (events.NonFatalError, events.FatalError)):
            errors.append(f"{event.label}: {getattr(event.info, 'message', '')} {str(getattr(event.info, 'traceback', ''))[-6000:]}")

    server_errors = sum(n for code, n in guard.statuses.items() if code >= 500)
    tally = Tally(
        interface="rest",
        variant=kind,
        crashes=len(errors),
        server_errors=server_errors,
        state_changes_on_refusal=len(guard.violations),
        detail={"cases_by_phase": dict(cases), "phases": phases, "check_failures": len(found), "seed": SEED,
                "waived_f64_spi": len(waived)},
    )
    for code, n in sorted(guard.statuses.items()):
        tally.count(str(code), n)
    tally.write()

    assert not errors, errors
    assert not found, "\n".join(sorted(set(found)))
    assert server_errors == 0, guard.statuses
    assert not guard.violations, guard.violations[:20]
    assert {phases[p] for p in ("coverage", "fuzzing", "stateful")} == {"success"}, phases
    assert cases["stateful"] > 0 and cases["fuzzing"] > 0 and cases["coverage"] > 0, cases
    if token is not None:
        assert any(200 <= code < 300 for code in guard.statuses), guard.statuses  # the token was taken


# -- the contract the fuzzer holds the API to, checked directly


@pytest.fixture
def app_and_core(tmp_path: Path) -> tuple[Any, ControllerCore, corekit.RecordingSession]:
    data = corekit.config_data(api={"token": ADMIN, "tokens": [{"name": "viewer", "role": "read-only", "token": READER}]})
    config = parse_config(data, tmp_path)
    core, session = asyncio.run(corekit.running_core(config, corekit.Clock()))
    return create_app(core, config), core, session


def test_openapi_is_a_valid_document_and_documents_every_error(app_and_core: tuple[Any, ControllerCore, Any]) -> None:
    from fastapi.testclient import TestClient
    from openapi_spec_validator import validate

    doc = TestClient(app_and_core[0]).get("/openapi.json").json()
    validate(doc)
    schemas = doc["components"]["schemas"]
    assert "HTTPValidationError" not in schemas  # FastAPI's default, which our 422s never matched
    assert set(schemas["ValidationErrorBody"]["properties"]) == {"detail", "errors"}
    ids = [op["operationId"] for item in doc["paths"].values() for op in item.values()]
    assert len(ids) == len(set(ids)) and "set_weight" in ids, ids  # the handlers' names, unique
    for path, item in doc["paths"].items():
        for method, op in item.items():
            codes = set(op["responses"])
            if path.startswith("/api/v1/"):
                assert {"401", "403"} <= codes, (method, path, codes)
            if "{" in path:
                assert "404" in codes and "422" in codes, (method, path, codes)
            if "requestBody" in op:
                assert {"400", "422"} <= codes, (method, path, codes)
            if "422" in op["responses"]:
                ref = op["responses"]["422"]["content"]["application/json"]["schema"]["$ref"]
                assert ref.endswith("/ValidationErrorBody"), (method, path)


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/api/v1/gateways/g1/weight", {"weight": True}, "body.weight"),
        ("/api/v1/gateways/g1/heartbeat", {"gateway": "g1", "timestamp": True}, "body.timestamp"),
        ("/api/v1/gateways/g1/heartbeat", {"gateway": "g1", "timestamp": 1.0, "charon_down": 0}, "body.charon_down"),
        ("/api/v1/gateways/g1/heartbeat", {"gateway": "g1", "timestamp": "1"}, "body.timestamp"),
    ],
)
def test_no_number_or_boolean_from_another_type(
    app_and_core: tuple[Any, ControllerCore, corekit.RecordingSession], path: str, body: dict[str, Any], field: str
) -> None:
    from fastapi.testclient import TestClient

    app, core, session = app_and_core
    token = "unit-agent-g1-token" if path.endswith("heartbeat") else ADMIN
    before = asyncio.run(snapshot(core, session))
    r = TestClient(app).request("PUT" if path.endswith("weight") else "POST", path, json=body,
                                headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == field, r.json()
    assert asyncio.run(snapshot(core, session)) == before


def test_state_guard_sees_a_refusal_that_changed_state(app_and_core: tuple[Any, ControllerCore, corekit.RecordingSession]) -> None:
    """The guard can fail: an app that sets a weight and then answers 409 is caught."""
    _, core, session = app_and_core

    async def changes_then_refuses(scope: Scope, receive: Receive, send: Send) -> None:
        await core.set_weight("g1", 7.0)
        await send({"type": "http.response.start", "status": 409, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    async def sink(message: MutableMapping[str, Any]) -> None:
        pass

    async def nothing() -> MutableMapping[str, Any]:
        return {"type": "http.request", "body": b""}

    guard = StateGuard(changes_then_refuses, core, session)
    asyncio.run(guard({"type": "http", "method": "PUT", "path": "/x"}, nothing, sink))
    assert guard.violations == ["PUT /x -> 409 changed the core's state"] and guard.statuses == Counter({409: 1})


def test_a_client_generated_from_the_openapi_works(
    app_and_core: tuple[Any, ControllerCore, corekit.RecordingSession], tmp_path: Path
) -> None:
    """openapi-python-client (pinned) generates a client from /openapi.json as a user would;
    its typed calls read and write, and its error models parse our 404 and 422 bodies."""
    import importlib
    import json
    import subprocess
    import sys

    from fastapi.testclient import TestClient

    app, core, _ = app_and_core
    spec = tmp_path / "openapi.json"
    spec.write_text(json.dumps(TestClient(app).get("/openapi.json").json()))
    (tmp_path / "gen.yaml").write_text("post_hooks: []\n")  # no formatter run: nothing outside the venv
    done = subprocess.run(
        [sys.executable, "-m", "openapi_python_client", "generate", "--path", str(spec), "--meta", "none",
         "--output-path", str(tmp_path / "sgw_generated"), "--config", str(tmp_path / "gen.yaml")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0 and "Warning" not in done.stdout, done.stdout + done.stderr
    sys.path.insert(0, str(tmp_path))
    try:
        gen = importlib.import_module("sgw_generated")
        models = importlib.import_module("sgw_generated.models")

        def op(tag: str, name: str) -> Any:
            return importlib.import_module(f"sgw_generated.api.{tag}.{name}")

        def client(token: str) -> Any:
            c = gen.AuthenticatedClient(base_url="http://testserver", token=token)
            c.set_httpx_client(TestClient(app, headers={"Authorization": f"Bearer {token}"}))
            return c

        admin = client(ADMIN)
        assert [g.name for g in op("gateways", "list_gateways").sync(client=admin)] == ["g1", "g2", "g3"]
        assert op("gateways", "set_weight").sync(name="g1", client=admin, body=models.WeightBody(weight=2.5)).weight == 2.5
        moved = op("buckets", "move").sync(b=0, client=admin, body=models.GatewayRef(gateway="g2"))
        assert (moved.bucket, moved.gateway) == (0, "g2")
        unknown = op("buckets", "move").sync_detailed(b=0, client=admin, body=models.GatewayRef(gateway="nope"))
        assert unknown.status_code == 404 and unknown.parsed.detail.startswith("body.gateway: no gateway named 'nope'")
        bad = op("gateways", "set_weight").sync_detailed(name="g1", client=admin, body=models.WeightBody(weight=-1.0))
        assert bad.status_code == 422 and [e.field for e in bad.parsed.errors] == ["body.weight"]
        beat = op("agents", "post_heartbeat").sync_detailed(
            name="g1", client=client("unit-agent-g1-token"), body=models.Heartbeat(gateway="g1", timestamp=1.0)
        )
        assert beat.status_code == 204
        assert op("status", "get_status").sync(client=client(READER)).heartbeats_total == 1
        assert asyncio.run(core.gateway("g1")).weight == 2.5
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m == "sgw_generated" or m.startswith("sgw_generated.")]:
            del sys.modules[name]


class FailingStore(IntentStore):
    """The intent store on disk, until `broken`: then every intent write fails (a disk error)."""

    broken = False

    async def _fail(self) -> None:
        if self.broken:
            raise OSError("disk I/O error")

    async def set_weight(self, gateway: str, weight: float) -> None:
        await self._fail()
        await super().set_weight(gateway, weight)

    async def set_drained(self, gateway: str, drained: bool) -> None:
        await self._fail()
        await super().set_drained(gateway, drained)

    async def pin(self, bucket: int, gateway: str) -> None:
        await self._fail()
        await super().pin(bucket, gateway)

    async def unpin(self, bucket: int) -> None:
        await self._fail()
        await super().unpin(bucket)


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/api/v1/gateways/g1/drain", None),
        ("POST", "/api/v1/gateways/g3/undrain", None),
        ("PUT", "/api/v1/gateways/g1/weight", {"weight": 4.0}),
        ("POST", "/api/v1/buckets/0/pin", {"gateway": "g2"}),  # bucket 0 is on g1: a switch write too
        ("DELETE", "/api/v1/buckets/4/pin", None),
    ],
)
def test_a_write_refused_by_the_intent_store_changes_nothing(
    tmp_path: Path, method: str, path: str, body: dict[str, Any] | None
) -> None:
    """Found while checking state around refused calls: the intent was saved after the change,
    so a failing store answered 503 with the drain, weight or pin already in force."""
    from fastapi.testclient import TestClient

    config = parse_config(corekit.config_data(api={"token": ADMIN}), tmp_path)
    store = FailingStore(tmp_path / "intent.sqlite3")
    session = corekit.RecordingSession()
    core = ControllerCore(config, store, clock=corekit.Clock(), session=session)

    async def start() -> None:
        await core.placement.load_intent()
        await core.switch.set_buckets(corekit.ROUND_ROBIN)
        await core.placement.serve()
        await core.drain("g3")
        await core.pin(4, "g1")

    asyncio.run(start())
    client = TestClient(create_app(core, config))
    store.broken = True
    before = asyncio.run(snapshot(core, session))
    r = client.request(method, path, json=body, headers={"Authorization": f"Bearer {ADMIN}"})
    assert r.status_code == 503 and "intent store write failed: disk I/O error" in r.json()["detail"], r.text
    assert asyncio.run(snapshot(core, session)) == before
    store.broken = False
    assert client.request(method, path, json=body, headers={"Authorization": f"Bearer {ADMIN}"}).status_code == 200


@pytest.mark.parametrize("path", ["/api/v1/status", "/healthz", "/api/v1/nowhere"])
def test_a_malformed_host_header_is_no_crash(app_and_core: tuple[Any, ControllerCore, Any], path: str) -> None:
    """Found by schemathesis: `Host: [` made the auth middleware's `request.url` raise (a 500)."""
    from fastapi.testclient import TestClient

    client = TestClient(app_and_core[0])
    assert client.get(path, headers={"host": "["}).status_code in (200, 401, 404)
    r = client.get(path, headers={"host": "[", "Authorization": f"Bearer {READER}"})
    assert r.status_code == (404 if path.endswith("nowhere") else 200), r.text
