"""REST and P4Runtime over TLS in the emulation (`make run TLS=1`, `controller.tls: true`):
one CA per site and its certificates from `supergw-gateway pki`, as docs/deploy-linux.md
issues them -

- `rest`: the controllers' REST API (https), every controller address and 127.0.0.1 as SANs;
- `p4rt-switch`: the site's switches' P4Runtime server (the LAN switch, and the outside
  switch of a remote-access site), the addresses the controllers dial as SANs;
- `p4rt-controller`: the controllers' client certificate (the switch requires one).

The agents, the emulation's own clients and `curl` trust the site's CA only.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

from supergw_gateway.pki import Leaf, make_pki
from supergw_proto.rest import trust

from topologies.model import Topology
from topologies.paths import SitePaths

REST = "rest"
SWITCH = "p4rt-switch"
CONTROLLER = "p4rt-controller"


@dataclass(frozen=True)
class ApiPki:
    """The files of one site's TLS, all signed by `ca`."""

    dir: Path

    @property
    def ca(self) -> Path:
        return self.dir / "ca.crt"

    def pair(self, name: str) -> tuple[Path, Path]:
        """Certificate and key of `name` (REST, SWITCH or CONTROLLER)."""
        return self.dir / f"{name}.crt", self.dir / f"{name}.key"


def site_pki(paths: SitePaths) -> ApiPki:
    return ApiPki(paths.config / "tls")


def rest_sans(topo: Topology) -> list[str]:
    """Every address a controller's API is reached at."""
    return [str(ip) for ip in (topo.mgmt.controller_ip, *topo.replica_ips().values())] + ["127.0.0.1", "localhost"]


def switch_sans(topo: Topology) -> list[str]:
    """The hosts the controllers dial (`p4runtime_addr`, and `outside_p4runtime_addr` with
    remote access), and the switch's management address."""
    addrs = [topo.p4runtime_addr, *([topo.outside_p4runtime_addr] if topo.remote_access is not None else [])]
    hosts = [a.rpartition(":")[0].strip("[]") for a in addrs]
    return list(dict.fromkeys([*hosts, str(topo.mgmt.controller_ip), "localhost"]))


def make_site_pki(topo: Topology, paths: SitePaths) -> ApiPki:
    """The site's CA and its three certificates (`supergw-gateway pki --server rest=... --server
    p4rt-switch=... --client p4rt-controller`)."""
    pki = site_pki(paths)
    make_pki(pki.dir, [Leaf("server", REST, REST, tuple(rest_sans(topo))),
                       Leaf("server", SWITCH, SWITCH, tuple(switch_sans(topo))),
                       Leaf("client", CONTROLLER, CONTROLLER)], ca_cn=f"supergw {topo.prefix} API CA")
    return pki


def api_tls_config(pki: ApiPki) -> dict[str, str]:
    """The controller config's `api.tls`."""
    cert, key = pki.pair(REST)
    return {"cert": str(cert), "key": str(key)}


def switch_tls_config(pki: ApiPki) -> dict[str, str]:
    """The controller config's `switch.tls`: verify the switch, present the client certificate."""
    cert, key = pki.pair(CONTROLLER)
    return {"cacert": str(pki.ca), "cert": str(cert), "key": str(key)}


def switch_options(topo: Topology, paths: SitePaths) -> tuple[str, ...]:
    """A switch's P4Runtime TLS flags (simple_switch_grpc's, which the eBPF switch takes
    too): its certificate, and client certificates signed by the site's CA required. The
    LAN switch and the outside switch of a remote-access site serve the same certificate."""
    if not topo.controller.tls:
        return ()
    pki = site_pki(paths)
    cert, key = pki.pair(SWITCH)
    return ("--grpc-server-ssl", "--grpc-server-cert", str(cert), "--grpc-server-key", str(key),
            "--grpc-server-cacert", str(pki.ca), "--grpc-server-with-client-auth")


def probe_options(topo: Topology, paths: SitePaths) -> list[str]:
    """`python -m topologies.probe`'s TLS options: as the controller dials the switch."""
    if not topo.controller.tls:
        return []
    tls = switch_tls_config(site_pki(paths))
    return ["--cacert", tls["cacert"], "--cert", tls["cert"], "--key", tls["key"]]


def verify(topo: Topology, paths: SitePaths) -> bool | ssl.SSLContext:
    """What a REST client of the site checks the controller's certificate against (http: unused)."""
    return trust(site_pki(paths).ca) if topo.controller.tls else True
