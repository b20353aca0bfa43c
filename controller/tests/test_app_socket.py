"""The REST API's listening socket: every connection it accepts sends without Nagle's delay.

asyncio sets TCP_NODELAY only on connections whose listening socket was made with
IPPROTO_TCP; made with protocol 0, every small answer on a kept-alive connection (a status,
the 204 of an agent's report) waited for the client's delayed ACK, ~40 ms (bench/scale)."""

from __future__ import annotations

import asyncio
import socket

from supergw_controller.app import _listen_socket


async def test_accepted_connections_have_tcp_nodelay() -> None:
    sock = _listen_socket("127.0.0.1", 0)
    seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = writer.get_extra_info("socket")
        seen.set_result(conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()

    server = await asyncio.start_server(accepted, sock=sock)
    async with server:
        port = sock.getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        assert await asyncio.wait_for(seen, 5) == 1
        writer.close()
