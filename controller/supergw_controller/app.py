"""The process: the core (`compose.build_core`) and the REST API (uvicorn) in one asyncio loop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import signal
import socket
import ssl
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

from supergw_controller.api.auth import Authenticator
from supergw_controller.compose import ControllerCore, ReplicaCore, build_core
from supergw_controller.config import Config, ConfigError
from supergw_controller.gcpolicy import GcPolicy

log = logging.getLogger(__name__)


class ListenError(RuntimeError):
    """The REST API cannot listen on `api.listen`."""


def _listen_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on connections of a socket that says
    # so, and without it every small answer on a kept-alive connection (a status, a
    # heartbeat's 204) waited ~40 ms for the client's delayed ACK (bench/scale).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise ListenError(f"api.listen {host}:{port}: {exc.strerror or exc}") from None
    sock.setblocking(False)
    return sock


def _api_server_class() -> type[Any]:
    import uvicorn

    class ApiServer(uvicorn.Server):
        """uvicorn's Server without its own signal handling.

        uvicorn 0.38 installs SIGINT/SIGTERM handlers with signal.signal() for the time
        of `serve()` (`capture_signals`), replacing ours, and re-raises the signal when
        it returns. `serve()` below handles both signals itself: stop the API and the
        core, close the store, return normally (exit status 0).
        """

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    return ApiServer


ASGIApp = Callable[[dict[str, Any], Any, Any], Awaitable[None]]


class Arrivals(Protocol):
    """What `AgentArrivals` tells (`liveness.Liveness`)."""

    def agent_arriving(self, gateway: str) -> float | None: ...
    def agent_settled(self, gateway: str, arrived: float) -> None: ...


class AgentArrivals:
    """ASGI wrapper: tells the core when an agent's heartbeat or report arrives.

    FastAPI runs the routes' plain-`def` dependencies in a thread pool, so on a busy
    loop a POST can take hundreds of milliseconds from arrival to `accept_heartbeat`.
    Its agent (valid token, configured gateway) is alive and waits for our answer
    meanwhile: the core does not count that time as the gateway's silence.
    """

    def __init__(self, app: ASGIApp, arrivals: Arrivals, auth: Authenticator, prefix: str) -> None:
        self._app = app
        self._arrivals = arrivals
        self._auth = auth
        self._path = re.compile(re.escape(prefix) + r"/gateways/([^/]+)/(?:heartbeat|report)")

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        name = self._agent(scope)
        arrived = None if name is None else self._arrivals.agent_arriving(name)
        if name is None or arrived is None:
            await self._app(scope, receive, send)
            return
        try:
            await self._app(scope, receive, send)
        finally:
            self._arrivals.agent_settled(name, arrived)

    def _agent(self, scope: dict[str, Any]) -> str | None:
        if scope.get("type") != "http" or scope.get("method") != "POST":
            return None
        m = self._path.fullmatch(scope.get("path", ""))
        if m is None:
            return None
        auth = next((v for k, v in scope.get("headers", ()) if k == b"authorization"), None)
        scheme, _, token = (b"" if auth is None else auth).decode("latin-1").partition(" ")
        principal = self._auth.lookup(token.strip()) if scheme.lower() == "bearer" else None
        # Only the gateway's own agent proves it alive; the route answers 401/403 to anyone else.
        return m.group(1) if principal is not None and principal.gateway == m.group(1) else None


def _check_tls(cert: Path, key: Path) -> None:
    """A bad certificate or key is a clear ConfigError now, not a uvicorn traceback later."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        ctx.load_cert_chain(str(cert), str(key))
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(
            f"api.tls: cannot use certificate {cert} with key {key}: {exc}; "
            "give a PEM certificate and its matching unencrypted PEM key"
        ) from None


async def serve(config: Config, announce: Callable[[str], None] = print) -> None:
    """Run until SIGINT/SIGTERM or until the core fails; the survivors of large full garbage
    collections frozen meanwhile (`gcpolicy`: a full collection of a large site stopped the
    event loop for ~300 ms)."""
    with GcPolicy().installed():
        await _serve(config, announce)


async def _serve(config: Config, announce: Callable[[str], None]) -> None:
    import uvicorn

    from supergw_controller.api import API_PREFIX, create_app

    if config.api.tls is not None:
        _check_tls(config.api.tls.cert, config.api.tls.key)
    # Bind first: a busy port is a clear error before anything else starts.
    sock = _listen_socket(config.api.host, config.api.port)
    try:
        core: ControllerCore = build_core(config)
        auth = Authenticator.from_config(config)
    except BaseException:
        sock.close()
        raise
    replica = core.replica if isinstance(core, ReplicaCore) else None
    api_app = create_app(core, config, auth=auth)
    if replica is not None:
        from supergw_controller.ha.metrics import HaCollector

        api_app.state.api.metrics.registry.register(HaCollector(replica))
    app = AgentArrivals(api_app, core.liveness, auth, API_PREFIX)
    tls = config.api.tls
    server = _api_server_class()(
        uvicorn.Config(
            app,
            log_level="warning",
            access_log=False,
            lifespan="on",
            ssl_certfile=None if tls is None else str(tls.cert),
            ssl_keyfile=None if tls is None else str(tls.key),
        )
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    core_task = asyncio.create_task(core.run(), name="core")
    tasks = {core_task}
    replica_task = None if replica is None else asyncio.create_task(replica.run(), name="ha-replica")
    if replica_task is not None:
        tasks.add(replica_task)
    api = asyncio.create_task(server.serve(sockets=[sock]), name="api")
    stopper = asyncio.create_task(stop.wait(), name="stop")
    base = f"{config.api.scheme}://{config.api.listen}"
    announce(
        f"supergw-controller: switch {config.switch.address} (device {config.switch.device_id}, "
        + (
            f"election id {config.switch.election_id.high}:{config.switch.election_id.low})\n"
            if config.ha is None
            else f"replica {config.ha.replica}: election id from the etcd term)\n"
        )
        + f"  REST API   {base}{API_PREFIX}   (OpenAPI: {base}/docs)\n"
        f"  metrics    {base}/metrics\n"
        f"  dashboard  {base}/dashboard/"
    )
    try:
        done, _ = await asyncio.wait({*tasks, api, stopper}, return_when=asyncio.FIRST_COMPLETED)
        for t in done:
            if t is not stopper and not t.cancelled() and t.exception() is not None:
                raise t.exception()  # type: ignore[misc]
    finally:
        core.stop_waiting()  # agents' long-polls answer now, not after the API's shutdown timeout
        server.should_exit = True
        if replica_task is not None:
            # A leader resigns (gives up primary, deletes its key) while its stream is still up.
            replica_task.cancel()
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError, Exception):
                await asyncio.wait_for(replica_task, timeout=3)
        for t in (*tasks, stopper):
            t.cancel()
        with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError, Exception):
            await asyncio.wait_for(api, timeout=5)
        for t in (*tasks, stopper):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        sock.close()
        with contextlib.suppress(Exception):
            await core.close()
