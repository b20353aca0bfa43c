"""Runs the core and part B's REST API (uvicorn) in one asyncio loop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
from collections.abc import Callable

from supergw_controller.config import Config
from supergw_controller.dispatcher import Dispatcher

log = logging.getLogger(__name__)


def build_dispatcher(config: Config) -> Dispatcher:
    from supergw_controller.intent_store import IntentStore

    config.state_db.parent.mkdir(parents=True, exist_ok=True)
    return Dispatcher(config, IntentStore(config.state_db))


class ListenError(RuntimeError):
    """The REST API cannot listen on `api.listen`."""


def _listen_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise ListenError(f"api.listen {host}:{port}: {exc.strerror or exc}") from None
    sock.setblocking(False)
    return sock


async def serve(config: Config, announce: Callable[[str], None] = print) -> None:
    """Run until SIGINT/SIGTERM or until the core fails."""
    import uvicorn

    from supergw_controller.api import API_PREFIX, create_app

    # Bind first: a busy port is a clear error before anything else starts.
    sock = _listen_socket(config.api.host, config.api.port)
    dispatcher = build_dispatcher(config)
    app = create_app(dispatcher, config)
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    )
    # Our own signal handling: stop both halves, then return normally.
    server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    core = asyncio.create_task(dispatcher.run(), name="core")
    api = asyncio.create_task(server.serve(sockets=[sock]), name="api")
    stopper = asyncio.create_task(stop.wait(), name="stop")
    base = f"http://{config.api.listen}"
    announce(
        f"supergw-controller: switch {config.switch.address} (device {config.switch.device_id}, "
        f"election id {config.switch.election_id.high}:{config.switch.election_id.low})\n"
        f"  REST API   {base}{API_PREFIX}   (OpenAPI: {base}/docs)\n"
        f"  metrics    {base}/metrics\n"
        f"  dashboard  {base}/dashboard/"
    )
    try:
        done, _ = await asyncio.wait({core, api, stopper}, return_when=asyncio.FIRST_COMPLETED)
        for t in done:
            if t is not stopper and not t.cancelled() and t.exception() is not None:
                raise t.exception()  # type: ignore[misc]
    finally:
        server.should_exit = True
        for t in (core, stopper):
            t.cancel()
        with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError, Exception):
            await asyncio.wait_for(api, timeout=5)
        for t in (core, stopper):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        sock.close()
        if dispatcher._store is not None:  # noqa: SLF001 - app owns the dispatcher's store
            with contextlib.suppress(Exception):
                await dispatcher._store.close()  # noqa: SLF001
