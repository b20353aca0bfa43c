"""The REST application: /api/v1 (bearer token), /healthz, /metrics, /dashboard.

`create_app(core, config)` builds one FastAPI app around an already-running core; the
app never starts or stops the core (app.py of the core owns the lifecycle).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from collections.abc import Awaitable, Callable, Sequence

from fastapi import Depends, FastAPI, HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

from supergw_controller.api.auth import check_bearer
from supergw_controller.api.core import Core
from supergw_controller.api.deps import ApiState, require_token
from supergw_controller.api.routers import agents, buckets, events, gateways, hosts, ops, rebalance, status
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

API_PREFIX = "/api/v1"
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

Every route under `/api/v1` needs `Authorization: Bearer <token>` (the token from the
controller config, `api.token` or `api.token_file`). Unauthenticated: `/healthz`,
`/metrics` (Prometheus) and the static dashboard at `/dashboard/` (the page itself holds no
data; it asks for the token and calls the API with it). Errors are JSON
`{"detail": "..."}`; validation errors add `"errors": [{"field", "message", "type"}]`.
"""


class _GatewayLike(Protocol):
    @property
    def name(self) -> str: ...


class ConfigLike(Protocol):
    """What the app reads from `supergw_controller.config.Config`."""

    @property
    def buckets(self) -> int: ...
    @property
    def api(self) -> Any: ...
    @property
    def gateways(self) -> Sequence[_GatewayLike]: ...


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


def create_app(core: Core, config: ConfigLike, *, token: str | None = None) -> FastAPI:
    """Build the app. `token` overrides the config's token (tests, benchmarks)."""
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
        token=token if token is not None else config.api.read_token(),
        buckets=config.buckets,
        gateway_names=tuple(g.name for g in config.gateways),
        metrics=ControllerMetrics(),
    )
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(CoreError, _core_error)

    @app.middleware("http")
    async def authenticate(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        # In a middleware, not only a dependency: FastAPI parses a JSON body before it
        # runs dependencies, and a caller without the token must learn nothing but 401.
        if request.url.path == API_PREFIX or request.url.path.startswith(API_PREFIX + "/"):
            try:
                check_bearer(request.headers.get("authorization"), app.state.api.token)
            except HTTPException as exc:
                return JSONResponse(status_code=exc.status_code, content={"detail": exc.detail}, headers=exc.headers)
        return await call_next(request)

    # The dependency repeats the check and puts the bearer scheme into the OpenAPI document.
    secured = [Depends(require_token)]
    for module in (status, gateways, agents, buckets, hosts, events, rebalance):
        app.include_router(module.router, prefix=API_PREFIX, dependencies=secured)
    app.include_router(history_routes.router, prefix=API_PREFIX, dependencies=secured)
    app.include_router(ops.router)

    app.mount("/dashboard", StaticFiles(directory=STATIC_DIR, html=True), name="dashboard")

    @app.get("/", include_in_schema=False)
    async def root() -> RedirectResponse:
        return RedirectResponse("/dashboard/")

    return app
