"""Full IKEv2 PSK handshakes per second between two gateways (child-less IKE SAs)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from copy import deepcopy
from typing import Any

import os
from pathlib import Path

from supergw_gateway.runtime import Gateway
from supergw_gateway.tunnel import build_conn, conn_name

BENCH_CONN = "sgw-ikebench"


def load_bench_conn(gw: Gateway) -> None:
    """A child-less copy of the gateway's connection: each initiate is one IKE_SA_INIT + IKE_AUTH."""
    conn = deepcopy(build_conn(gw.cfg)[conn_name(gw.cfg)])
    conn.pop("children")
    conn["childless"] = "force"
    conn["unique"] = "never"
    conn["dpd_delay"] = "0s"
    with gw.vici() as v:
        v.load_conn({BENCH_CONN: conn})


def _count_sas(gw: Gateway) -> int:
    with gw.vici() as v:
        return sum(1 for sa in v.list_sas() if sa.name == BENCH_CONN and sa.state == "ESTABLISHED")


def _terminate_all(gw: Gateway) -> None:
    with gw.vici() as v:
        ids = [int(ike.get("uniqueid", 0)) for e in v.raw_sas() for n, ike in e.items() if n == BENCH_CONN]
        for i in ids:
            v.terminate(ike_id=i, timeout_ms=-1)


def _cpu_s(pid: int | None) -> float:
    """utime + stime of a process (all its threads), in seconds."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu_all() -> tuple[float, ...]:
    busy, total = 0, 0
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("cpu "):
            v = [int(x) for x in line.split()[1:]]
            total = sum(v[:8])
            busy = total - v[3] - v[4]
    return busy / os.sysconf("SC_CLK_TCK"), total / os.sysconf("SC_CLK_TCK")


def measure(initiator: Gateway, responder: Gateway, duration_s: float, workers: int,
            progress: Callable[[str], None]) -> dict[str, Any]:
    """`workers` VICI sessions each initiate child-less IKE SAs back to back for `duration_s`."""
    load_bench_conn(initiator)
    load_bench_conn(responder)
    done = [0] * workers
    failed = [0] * workers
    stop = time.monotonic() + duration_s

    def work(i: int) -> None:
        with initiator.vici() as v:
            while time.monotonic() < stop:
                try:
                    v.initiate(BENCH_CONN, None, timeout_ms=10000, loglevel=-1)
                    done[i] += 1
                except Exception:
                    failed[i] += 1

    threads = [threading.Thread(target=work, args=(i,)) for i in range(workers)]
    pids = {"initiator": initiator.charon_pid(), "responder": responder.charon_pid()}
    cpu0 = {k: _cpu_s(p) for k, p in pids.items()}
    me0, box0 = os.times(), _cpu_all()
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - t0
    me1, box1 = os.times(), _cpu_all()
    # Where the CPU went: CPU-seconds per second of wall time (2.0 = both cores busy).
    cpu = {k: round((_cpu_s(p) - cpu0[k]) / elapsed, 2) for k, p in pids.items()}
    cpu["bench_initiators"] = round((me1.user + me1.system - me0.user - me0.system) / elapsed, 2)
    cpu["whole_box_busy"] = round((box1[0] - box0[0]) / elapsed, 2)
    cpu["box_cores"] = round((box1[1] - box0[1]) / elapsed, 2)
    established = _count_sas(initiator)
    progress(f"ike: {sum(done)} handshakes in {elapsed:.1f}s ({sum(failed)} failed), {established} SAs up; "
             f"CPU cores used: {cpu}")
    _terminate_all(initiator)
    return {"handshakes": sum(done), "failed": sum(failed), "elapsed_s": round(elapsed, 2),
            "workers": workers, "ike_per_s": round(sum(done) / elapsed, 1), "established_after": established,
            "cpu_cores": cpu,
            "cpu_ms_per_handshake": {k: round(v * 1000 * elapsed / max(1, sum(done)), 2)
                                     for k, v in cpu.items() if k in pids or k == "bench_initiators"}}
