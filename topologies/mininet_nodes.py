"""Mininet node classes for the supergw emulation (Debian's `mininet` package, no Open vSwitch).

- `SupergwSwitch`: our P4 switch as a Mininet switch. It runs the command line it is given
  (`components.switch_argv`: the eBPF `supergw-switch`, or BMv2 `simple_switch_grpc`) in
  its own namespace when Mininet starts it, and stops it with Mininet.
- `NetnsHost`, `NetnsBridge`: Mininet nodes living in an existing named namespace
  (`ip netns`), adopting the interfaces already there. `topologies/network.py` wires the
  namespaces for `make run` and for Mininet alike (one wiring, one source of truth);
  Mininet then gives the familiar CLI and Python API (`h1 ping r1`, `net`, `h1 ip addr`).

Debian installs Mininet for its own python3 only; `load_mininet()` imports that copy
(only the `mininet` package, not the rest of Debian's dist-packages) into our virtualenv.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

DEBIAN_DIST = Path("/usr/lib/python3/dist-packages")


class MininetMissing(RuntimeError):
    """Mininet (Debian package `mininet`) is not installed."""


def load_mininet() -> ModuleType:
    """The `mininet` package: the virtualenv's if it has one, else Debian's."""
    if "mininet" in sys.modules:
        return sys.modules["mininet"]
    spec = importlib.util.find_spec("mininet") or importlib.machinery.PathFinder.find_spec("mininet", [str(DEBIAN_DIST)])
    if spec is None or spec.loader is None:
        raise MininetMissing("Mininet is not installed: apt-get install mininet (or `make deps`)")
    module = importlib.util.module_from_spec(spec)
    sys.modules["mininet"] = module
    spec.loader.exec_module(module)
    return module


def _classes() -> tuple[Any, Any, Any, Any]:
    load_mininet()
    from mininet.link import Intf, Link  # noqa: PLC0415 - only importable after load_mininet()
    from mininet.node import Host, Switch  # noqa: PLC0415

    return Host, Switch, Intf, Link


_Host, _Switch, _Intf, _Link = _classes()


def _ip_json(netns: str, *args: str) -> Any:
    out = subprocess.run(["ip", "-n", netns, "-j", *args], capture_output=True, text=True, check=True).stdout
    return json.loads(out or "[]")


def netns_links(netns: str) -> list[dict[str, Any]]:
    """`ip -j -d link` of a namespace: every interface but lo, in ifindex order."""
    links = _ip_json(netns, "-d", "link", "show")
    return sorted((link for link in links if link.get("ifname") != "lo"), key=lambda link: link["ifindex"])


def veth_pairs(namespaces: list[str]) -> list[tuple[tuple[str, str], tuple[str, str]]]:
    """The veth pairs between `namespaces`: ((netns, ifname), (peer netns, peer ifname)), each once."""
    names: dict[tuple[str, int], str] = {}
    peers: dict[tuple[str, str], tuple[str, int]] = {}
    for ns in namespaces:
        ids = {int(e["nsid"]): str(e["name"]) for e in _ip_json(ns, "netns", "list-id") if "name" in e}
        for link in netns_links(ns):
            names[(ns, int(link["ifindex"]))] = link["ifname"]
            kind = link.get("linkinfo", {}).get("info_kind")
            if kind == "veth" and "link_index" in link and "link_netnsid" in link:
                peer_ns = ids.get(int(link["link_netnsid"]))
                if peer_ns is not None:
                    peers[(ns, link["ifname"])] = (peer_ns, int(link["link_index"]))
    pairs = []
    seen: set[tuple[str, str]] = set()
    for end, (peer_ns, peer_index) in peers.items():
        other = (peer_ns, names.get((peer_ns, peer_index), ""))
        if end in seen or other[1] == "" or peers.get(other) is None:
            continue
        seen |= {end, other}
        pairs.append((end, other))
    return pairs


class AdoptedLink(_Link):  # type: ignore[misc, valid-type]
    """A veth pair network.py made, known to Mininet (`net`, `links`, `link h1 sw down`)."""

    @classmethod
    def makeIntfPair(cls, *args: Any, **kwargs: Any) -> None:  # noqa: N802 - Mininet's name
        pass  # it exists

    def stop(self) -> None:
        pass  # removed with its namespaces by `make stop`


class _InNetns:
    """Mixin: the node's shell enters the named namespace `netns` instead of a new one."""

    netns: str
    inNamespace: bool  # noqa: N815 - Mininet's attributes
    intfs: dict[int, Any]
    ports: dict[Any, int]
    nameToIntf: dict[str, Any]  # noqa: N815
    _entering: bool = False

    def startShell(self, mnopts: str | None = None) -> None:  # noqa: N802 - Mininet's name
        self._entering = True
        self.inNamespace = False  # no mnexec -n: `ip netns exec` puts the shell in `netns`
        try:
            super().startShell(mnopts)  # type: ignore[misc]
        finally:
            self.inNamespace = True  # later commands attach to the shell's namespace (mnexec -a)
            self._entering = False

    def _popen(self, cmd: list[str], **params: Any) -> Any:
        if self._entering:
            cmd = ["ip", "netns", "exec", self.netns, *cmd]
        return super()._popen(cmd, **params)  # type: ignore[misc]

    def adopt_interfaces(self) -> None:
        """Register the namespace's interfaces (made by network.py) that no link has yet."""
        for link in netns_links(self.netns):
            if link["ifname"] not in self.nameToIntf:
                _Intf(link["ifname"], node=self)
        for intf in self.intfs.values():
            intf.updateIP()

    def addIntf(self, intf: Any, port: int | None = None, moveIntfFn: Any = None) -> None:  # noqa: N802, N803
        # The interface is already in this node's namespace: nothing to move.
        super().addIntf(intf, port=port, moveIntfFn=lambda *_a, **_k: True)  # type: ignore[misc]

    def deleteIntfs(self, checkName: bool = True) -> None:  # noqa: N802, N803 - Mininet's names
        # network.py owns the veths: `make stop` removes them with their namespaces.
        self.intfs.clear()
        self.ports.clear()


class NetnsHost(_InNetns, _Host):  # type: ignore[misc, valid-type]
    """A host, gateway, peer or remote host of the emulation, adopted from its namespace."""

    def __init__(self, name: str, netns: str, **params: Any) -> None:
        self.netns = netns
        params.pop("inNamespace", None)
        params.pop("ip", None)  # the address is the one network.py gave it
        super().__init__(name, inNamespace=True, **params)


class NetnsBridge(_InNetns, _Switch):  # type: ignore[misc, valid-type]
    """A Linux bridge namespace of the emulation (WAN, remote LAN, management): already forwarding."""

    def __init__(self, name: str, netns: str, dpid: str, **params: Any) -> None:
        self.netns = netns
        params.pop("inNamespace", None)
        super().__init__(name, dpid=dpid, inNamespace=True, **params)

    def start(self, controllers: Sequence[Any]) -> None:
        pass  # network.py built and enabled its bridge

    def stop(self, deleteIntfs: bool = True) -> None:  # noqa: N803
        pass  # removed with its namespace by `make stop`


class SupergwSwitch(_InNetns, _Switch):  # type: ignore[misc, valid-type]
    """Our P4 switch: `start` runs `argv` (eBPF target or BMv2) in the switch's namespace.

    The controller connects to it over P4Runtime (the address in `argv`), not over
    OpenFlow: Mininet's controller list is ignored."""

    def __init__(self, name: str, netns: str, argv: Sequence[str], log: Path, kind: str, dpid: str = "1", **params: Any) -> None:
        self.netns = netns
        self.argv = list(argv)
        self.log = log
        self.kind = kind
        self.proc: Any = None
        params.pop("inNamespace", None)
        super().__init__(name, dpid=dpid, inNamespace=True, **params)

    def start(self, controllers: Sequence[Any]) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:
            self.proc = self.popen(self.argv, stdout=out, stderr=subprocess.STDOUT)

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, deleteIntfs: bool = True) -> None:  # noqa: N803
        if self.running():
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        super().stop(deleteIntfs)
