"""TCP throughput host-a -> host-b through the lab: IPsec tunnel vs plain routing, CPU quotas."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable


from supergw_gateway.cgroup import CpuGroup
from supergw_gateway.lab import Lab
from supergw_gateway.runtime import Gateway
from supergw_gateway.tunnel import conn_name
from supergw_gateway.uml import UmlGuest, descendants

PORT = 5201


class Iperf:
    def __init__(self, lab: Lab) -> None:
        self.lab = lab
        self.server = subprocess.Popen(["ip", "netns", "exec", lab.host_ns("b"), "iperf3", "-s", "-p", str(PORT)],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)

    def run(self, seconds: float, length: int | None = None, attempts: int = 2) -> float | None:
        """Mb/s received by host-b (`length`: bytes per write, iperf3 -l; None: its default);
        None (with the reason printed) when iperf3 keeps failing."""
        argv = ["ip", "netns", "exec", self.lab.host_ns("a"), "iperf3", "-c", self.lab.sites["b"].host_ip,
                "-p", str(PORT), "-t", str(seconds), "-O", "1", "-J", "--connect-timeout", "5000",
                *([] if length is None else ["-l", str(length)])]
        for attempt in range(attempts):
            try:
                p = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 20)
            except subprocess.TimeoutExpired:
                print(f"iperf3 attempt {attempt + 1}: no result within {seconds + 20:.0f}s", flush=True)
                self._restart_server()
                continue
            doc = json.loads(p.stdout or "{}")
            if "error" not in doc and p.returncode == 0:
                return float(doc["end"]["sum_received"]["bits_per_second"]) / 1e6
            print(f"iperf3 attempt {attempt + 1}: {doc.get('error') or p.stderr.strip()}", flush=True)
            self._restart_server()
        return None

    def _restart_server(self) -> None:
        self.close()
        self.server = subprocess.Popen(["ip", "netns", "exec", self.lab.host_ns("b"), "iperf3", "-s", "-p", str(PORT)],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)

    def close(self) -> None:
        self.server.terminate()
        try:
            self.server.wait(5)
        except subprocess.TimeoutExpired:
            self.server.kill()
            self.server.wait(5)


def set_plain(lab: Lab, gws: dict[str, Gateway], plain: bool) -> None:
    """Plain routing through the same gateways (tunnel down) or the tunnel (routes gone)."""
    if plain:
        with gws["a"].vici() as v:
            v.terminate(ike=conn_name(gws["a"].cfg), timeout_ms=5000)
    for k, peer in (("a", "b"), ("b", "a")):
        op = "replace" if plain else "del"
        gws[k].executor().run(["ip", "route", op, str(lab.sites[peer].lan), "via", lab.sites[peer].wan_ip],
                              check=plain)
    if not plain:
        gws["a"].apply_tunnel()
    time.sleep(0.5)
    for g in gws.values():
        sas = g.status()["sas"]
        if plain and sas:
            raise RuntimeError(f"{g.cfg.name}: SAs still up during the plain measurement")
        if not plain and not sas:
            raise RuntimeError(f"{g.cfg.name}: tunnel did not come back")


def quota_pids(gw: Gateway) -> list[int]:
    """Host processes doing the gateway's IPsec work: charon, or the whole UML guest."""
    if gw.cfg.backend.value == "uml":
        pid = UmlGuest(gw.cfg).pid()
        return [pid, *descendants(pid)] if pid else []
    pid = gw.charon_pid()
    return [pid] if pid else []


def with_quota(gws: dict[str, Gateway], percent: float | None,
               measure: Callable[[], float | None]) -> float | None:
    groups = {k: CpuGroup(f"sgw-gw-{g.cfg.name}") for k, g in gws.items()}
    try:
        for k, g in gws.items():
            groups[k].set_quota(percent)
            for pid in quota_pids(g):
                groups[k].add(pid)
        return measure()
    finally:
        for grp in groups.values():
            grp.remove()


