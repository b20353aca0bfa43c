"""The REST application: /api/v1 (bearer token), /healthz, /metrics, /dashboard.

`create_app(core, config)` builds one FastAPI app around an already-running core; the
app never starts or stops the core (app.py of the core owns the lifecycle).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from collections.abc import Awaitable, Callable, MutableMapping, Sequence

from fastapi import Depends, FastAPI, HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

from fastapi.routing import APIRoute
from starlette.routing import Match

from supergw_controller.api.auth import Access, Authenticator, authorize
from supergw_controller.api.core import Core
from supergw_controller.api.deps import ApiState, require_access
from supergw_controller.api.routers import agents, buckets, clients, events, gateways, hosts, ops, rebalance, status
from supergw_controller.api.routers import history as history_routes
from supergw_controller.errors import (
    Conflict,
    CoreError,
    InvalidArgument,
    NotPrimary,
    SwitchUnavailable,
    UnknownBucket,
    UnknownGateway,
)
from supergw_controller.metrics import ControllerMetrics
from supergw_proto.reports import AgentTiming

API_PREFIX = "/api/v1"
# What `api.ops_token_required` puts behind an operator token.
OPS_PATHS = frozenset({"/healthz", "/metrics"})
STATIC_DIR = Path(__file__).resolve().parent.parent / "static"

_STATUS_OF: list[tuple[type[CoreError], int]] = [
    (UnknownGateway, 404),
    (UnknownBucket, 404),
    (Conflict, 409),
    (InvalidArgument, 422),
    (NotPrimary, 503),
    (SwitchUnavailable, 503),
]

DESCRIPTION = """\
Operator and agent API of the supergw controller.

Every route under `/api/v1` needs `Authorization: Bearer <token>`:
- an operator token with role `read-only` may call every GET;
- an operator token with role `admin` may also drain, undrain, set weights, pin, move and
  rebalance (each such call is in the event log with the token's name);
- a gateway's agent token may only POST that gateway's report and heartbeat.
A missing or unknown token gets 401; a known token outside its rights gets 403 naming the
right it lacks. `/healthz` and `/metrics` (Prometheus) answer anyone unless the config sets
`api.ops_token_required: true`; then they need an operator token too (role read-only is
enough). The static dashboard at `/dashboard/` is unauthenticated (the page holds no data; it
asks for a token and calls the API with it).
Errors are JSON `{"detail": "..."}`; validation errors add `"errors": [{"field", "message", "type"}]`.
"""


class _GatewayLike(Protocol):
    @property
    def name(self) -> str: ...
    def agent_secret(self) -> str | None: ...


class ConfigLike(Protocol):
    """What the app reads from `supergw_controller.config.Config`."""

    @property
    def buckets(self) -> int: ...
    def agent_timing(self) -> AgentTiming: ...
    @property
    def api(self) -> Any: ...
    @property
    def heartbeats(self) -> Any: ...
    @property
    def gateways(self) -> Sequence[_GatewayLike]: ...
    def secret_files(self) -> list[Path]: ...
    def with_secrets_reread(self) -> ConfigLike: ...


def _field(loc: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in loc)


async def _validation_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = []
    for err in exc.errors():
        field = _field(tuple(err.get("loc", ())))
        if err.get("type") == "json_invalid":
            ctx = err.get("ctx") or {}
            message = f"request body is not valid JSON: {ctx.get('error', err.get('msg'))}"
        elif err.get("type") == "missing" and field == "body":
            message = "request body is missing (send JSON with Content-Type: application/json)"
        else:
            message = str(err.get("msg"))
        errors.append({"field": field, "message": message, "type": err.get("type")})
    detail = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
    return JSONResponse(status_code=422, content={"detail": detail, "errors": errors})


async def _core_error(_: Request, exc: Exception) -> JSONResponse:
    code = next((c for t, c in _STATUS_OF if isinstance(exc, t)), 500)
    headers = {"Retry-After": "1"} if code == 503 else None
    return JSONResponse(status_code=code, content={"detail": str(exc) or type(exc).__name__}, headers=headers)


def _match(app: FastAPI, scope: MutableMapping[str, Any]) -> tuple[str | None, str | None]:
    """(route path, gateway name in the path) of the route that will serve `scope`."""
    for route in app.router.routes:
        if isinstance(route, APIRoute):
            match, child = route.matches(scope)
            if match is Match.FULL:
                return route.path, child.get("path_params", {}).get("name")
    return None, None


def create_app(core: Core, config: ConfigLike, *, auth: Authenticator | None = None) -> FastAPI:
    """Build the app. `auth` overrides the tokens of the config (tests, benchmarks)."""
    app = FastAPI(
        title="supergw controller",
        version="1",
        description=DESCRIPTION,
        docs_url="/docs",
        openapi_url="/openapi.json",
        redoc_url=None,
    )
    app.state.api = ApiState(
        core=core,
        auth=auth if auth is not None else Authenticator.from_config(config),
        agent_paths=frozenset(API_PREFIX + r.path for r in agents.router.routes if isinstance(r, APIRoute)),
        buckets=config.buckets,
        gateway_names=tuple(g.name for g in config.gateways),
        metrics=ControllerMetrics(),
        agent_timing=config.agent_timing().header(),
    )
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(CoreError, _core_error)

    ops_paths = OPS_PATHS if config.api.ops_token_required else frozenset()

    @app.middleware("http")
    async def authenticate(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        # In a middleware, not only a dependency: FastAPI parses a JSON body before it
        # runs dependencies, and a caller without the right must learn nothing but 401/403.
        state: ApiState = app.state.api
        url_path = request.url.path
        try:
            if url_path == API_PREFIX or url_path.startswith(API_PREFIX + "/"):
                principal = state.auth.authenticate(request.headers.get("authorization"))
                path, gateway = _match(app, request.scope)
                authorize(principal, state.access(request.method, path), gateway)
            elif url_path in ops_paths:
                try:
                    principal = state.auth.authenticate(request.headers.get("authorization"))
                except HTTPException as exc:
                    exc.detail = (f"{url_path} needs an operator token (role read-only or admin) because "
                                  f"api.ops_token_required is set: {exc.detail}")
                    raise
                authorize(principal, Access.READ)
        except HTTPException as exc:
            return JSONResponse(status_code=exc.status_code, content={"detail": exc.detail}, headers=exc.headers)
        return await call_next(request)

    secured = [Depends(require_access)]
    for module in (status, gateways, agents, buckets, hosts, clients, events, rebalance):
        app.include_router(module.router, prefix=API_PREFIX, dependencies=secured)
    app.include_router(history_routes.router, prefix=API_PREFIX, dependencies=secured)
    app.include_router(ops.router)

    app.mount("/dashboard", StaticFiles(directory=STATIC_DIR, html=True), name="dashboard")

    @app.get("/", include_in_schema=False)
    async def root() -> RedirectResponse:
        return RedirectResponse("/dashboard/")

    return app
