"""FastAPI dependencies: the core, the caller and its rights, validated path parameters.

They are `async def` although they do no I/O: FastAPI runs plain `def` dependencies in a
thread pool, and four thread hops per agent heartbeat delayed heartbeats by hundreds of
milliseconds on a loaded controller (enough to look like a dead gateway)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, HTTPException, Path, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from supergw_controller.api.auth import Access, Authenticator, Principal, access_for, authorize
from supergw_controller.api.core import Core
from supergw_controller.metrics import ControllerMetrics


@dataclass(frozen=True)
class ApiState:
    """Everything a request handler needs; one per app instance (app.state.api)."""

    core: Core
    auth: Authenticator
    agent_paths: frozenset[str]  # route paths (with the prefix) only a gateway's own agent may call
    buckets: int
    gateway_names: tuple[str, ...]  # from the config file, so static for the process
    metrics: ControllerMetrics
    agent_timing: str  # the `Supergw-Timing` header of every answer to an agent (AgentTiming JSON)

    def unknown_gateway(self, name: str) -> str:
        return f"no gateway named {name!r}; known: {', '.join(self.gateway_names) or '(none)'}"

    def known_gateway(self, name: str, where: str) -> str:
        """`name` when it is a configured gateway, else a 404 saying `where` it was given
        (`query.gateway`, `body.gateway`): like an unknown name in a path, it refers to nothing."""
        if name not in self.gateway_names:
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"{where}: {self.unknown_gateway(name)}")
        return name

    def access(self, method: str, route_path: str | None) -> Access:
        return access_for(method, route_path in self.agent_paths)


async def api_state(request: Request) -> ApiState:
    state: ApiState = request.app.state.api
    return state


State = Annotated[ApiState, Depends(api_state)]


async def get_core(state: State) -> Core:
    return state.core


CoreDep = Annotated[Core, Depends(get_core)]


_bearer = HTTPBearer(
    auto_error=False,
    description="an operator token (role read-only or admin) or, for its own report/heartbeat, a gateway's agent token",
)


async def require_access(
    request: Request,
    state: State,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    """Repeats the middleware's check per route (and puts the bearer scheme into OpenAPI)."""
    header = None if credentials is None else f"{credentials.scheme} {credentials.credentials}"
    principal = state.auth.authenticate(header)
    route = request.scope.get("route")
    path = getattr(route, "path", None)
    authorize(principal, state.access(request.method, path), request.path_params.get("name"))
    return principal


Caller = Annotated[Principal, Depends(require_access)]


async def gateway_name(
    state: State,
    name: Annotated[str, Path(min_length=1, max_length=64, description="gateway name from the config")],
) -> str:
    """404 that lists the known names when `name` is not a configured gateway."""
    if name not in state.gateway_names:
        raise HTTPException(status.HTTP_404_NOT_FOUND, state.unknown_gateway(name))
    return name


async def bucket_index(state: State, b: Annotated[int, Path(description="bucket index 0..K-1")]) -> int:
    if not 0 <= b < state.buckets:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"bucket {b} out of range 0..{state.buckets - 1}")
    return b


GatewayName = Annotated[str, Depends(gateway_name)]
BucketIndex = Annotated[int, Depends(bucket_index)]
