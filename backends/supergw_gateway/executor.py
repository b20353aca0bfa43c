"""Run commands where a gateway lives: the host, a network namespace or a UML guest."""

from __future__ import annotations

import json
import socket
import subprocess
from dataclasses import dataclass
from typing import Protocol

from supergw_gateway.errors import CommandError, GatewayError
from supergw_gateway.nssocket import connect_in_netns


@dataclass(frozen=True)
class Result:
    returncode: int
    stdout: str
    stderr: str


class Executor(Protocol):
    """Where commands of one gateway run. `where` names it in reports."""

    @property
    def where(self) -> str: ...

    def run(self, argv: list[str], check: bool = True, timeout: float = 30.0) -> Result: ...


def _checked(argv: list[str], res: Result, check: bool) -> Result:
    if check and res.returncode != 0:
        raise CommandError(argv, res.returncode, res.stderr or res.stdout)
    return res


@dataclass(frozen=True)
class LocalExecutor:
    """The host itself, or a network namespace via `ip netns exec`."""

    netns: str | None = None

    @property
    def where(self) -> str:
        return f"netns {self.netns}" if self.netns else "host"

    def run(self, argv: list[str], check: bool = True, timeout: float = 30.0) -> Result:
        full = ["ip", "netns", "exec", self.netns, *argv] if self.netns else list(argv)
        try:
            p = subprocess.run(full, capture_output=True, text=True, timeout=timeout)
        except FileNotFoundError:
            return _checked(argv, Result(127, "", f"{argv[0]}: command not found"), check)
        return _checked(argv, Result(p.returncode, p.stdout, p.stderr), check)


@dataclass(frozen=True)
class GuestExecutor:
    """A UML guest, through the exec service (`supergw_gateway.guestd`) on its management link.

    The socket is opened inside the gateway's namespace, where the management link lives.
    """

    netns: str
    address: str
    port: int
    name: str

    @property
    def where(self) -> str:
        return f"uml guest {self.name}"

    def run(self, argv: list[str], check: bool = True, timeout: float = 30.0) -> Result:
        req = json.dumps({"argv": argv, "timeout": timeout}).encode() + b"\n"
        try:
            sock = connect_in_netns(self.netns, (self.address, self.port), timeout=timeout + 5)
        except OSError as exc:
            raise GatewayError(f"{self.where}: exec service unreachable at {self.address}:{self.port}: {exc}") from None
        with sock:
            sock.sendall(req)
            sock.shutdown(socket.SHUT_WR)
            chunks = []
            while data := sock.recv(65536):
                chunks.append(data)
        reply = json.loads(b"".join(chunks) or b"{}")
        if "error" in reply:
            raise GatewayError(f"{self.where}: {reply['error']}")
        return _checked(argv, Result(reply["rc"], reply["stdout"], reply["stderr"]), check)
