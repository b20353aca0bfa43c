"""Network namespaces and veths (via iproute2); sockets opened inside one: `nssocket`."""

from __future__ import annotations

from pathlib import Path

from supergw_gateway.executor import LocalExecutor


def exists(name: str) -> bool:
    return Path("/run/netns", name).exists()


def create(name: str) -> None:
    """Create a namespace with loopback up (idempotent)."""
    host = LocalExecutor()
    if not exists(name):
        host.run(["ip", "netns", "add", name])
    LocalExecutor(name).run(["ip", "link", "set", "lo", "up"])


def delete(name: str) -> None:
    if exists(name):
        LocalExecutor().run(["ip", "netns", "del", name], check=False)


def add_veth(a: str, a_ns: str | None, b: str, b_ns: str | None) -> None:
    """A veth pair `a`<->`b`, each end moved into its namespace (None = host) and up."""
    host = LocalExecutor()
    host.run(["ip", "link", "add", a, "type", "veth", "peer", "name", b])
    for dev, ns in ((a, a_ns), (b, b_ns)):
        if ns:
            host.run(["ip", "link", "set", dev, "netns", ns])
        LocalExecutor(ns).run(["ip", "link", "set", dev, "up"])
