"""Full IKEv2 PSK handshakes per second between two gateways (child-less IKE SAs)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from copy import deepcopy
from typing import Any

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
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - t0
    established = _count_sas(initiator)
    progress(f"ike: {sum(done)} handshakes in {elapsed:.1f}s ({sum(failed)} failed), {established} SAs up")
    _terminate_all(initiator)
    return {"handshakes": sum(done), "failed": sum(failed), "elapsed_s": round(elapsed, 2),
            "workers": workers, "ike_per_s": round(sum(done) / elapsed, 1), "established_after": established}
