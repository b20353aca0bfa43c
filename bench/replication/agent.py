"""One gateway's state replication in a process of its own, as in its agent: the real
`Replicator` (`statesync.setup.replicator_for` of the gateway's config) on an asyncio loop, swept
like the agent sweeps it (every report interval, at once when a takeover moved), given orders
the way the controller gives them. The benchmark drives it over stdin/stdout (JSON lines, one
reply per request) and reads what it costs:

- the loop thread's CPU time: the relay itself (charon's sync socket in, the backup link out
  with its TLS, the listener in with its TLS, injections into charon), less what answering the
  benchmark cost on that thread (`rpc_s`, measured and subtracted);
- the whole process's CPU time: the relay plus the sweeps (VICI list-sas and rekeys, in worker
  threads) plus the benchmark's requests;
- every VICI list-sas and rekey the sweeps made, timed;
- the backup link's per-message lags (`LinkStats.lags_ms`), drained at each reading.

A separate process keeps the benchmark's own Python (clients, polling) off the relay's
interpreter lock and out of its CPU time.

Run: `python -m bench.replication.agent CONFIG.json` (the gateway config as JSON).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from supergw_gateway.config import parse_config
from supergw_gateway.runtime import Gateway
from supergw_gateway.statesync.replicator import Replicator
from supergw_gateway.statesync.setup import replicator_for
from supergw_gateway.vici_client import ViciClient
from supergw_proto.replication import ReplicationOrders, ReplicationState
from supergw_proto.reports import DEFAULT_REPORT_INTERVAL_MS

log = logging.getLogger("bench.replication.agent")
REPO = Path(__file__).resolve().parents[2]
CALL_TIMEOUT_S = 60.0


class AgentError(RuntimeError):
    """The agent process failed a request, died, or did not answer."""


# --------------------------------------------------------------------------- in the agent process
@dataclass
class ViciLog:
    """What the sweeps asked of charon: each list-sas (seconds, IKE SAs listed) and each rekey."""

    list_sas: list[tuple[float, int]] = field(default_factory=list)
    rekeys: int = 0
    rekey_s: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def drain(self) -> dict[str, Any]:
        with self.lock:
            out = {"list_sas": list(self.list_sas), "rekeys": self.rekeys, "rekey_s": self.rekey_s}
            self.list_sas.clear()
            self.rekeys, self.rekey_s = 0, 0.0
        return out


class TimedVici(ViciClient):
    """The gateway's VICI client, timing what the sweep asks."""

    def __init__(self, gw: Gateway, vlog: ViciLog) -> None:
        super().__init__(gw.connect)
        self._vlog = vlog

    def raw_sas(self, ike: str | None = None) -> Iterator[dict[str, Any]]:
        t0, n = time.monotonic(), 0
        for entry in super().raw_sas(ike):
            n += 1
            yield entry
        with self._vlog.lock:
            self._vlog.list_sas.append((time.monotonic() - t0, n))

    def rekey_sa(self, ike_id: int | None = None, child_id: int | None = None) -> None:
        t0 = time.monotonic()
        try:
            super().rekey_sa(ike_id=ike_id, child_id=child_id)
        finally:
            with self._vlog.lock:
                self._vlog.rekeys += 1
                self._vlog.rekey_s += time.monotonic() - t0


class Host:
    """The replicator, its sweeps and the benchmark's requests, on one loop."""

    def __init__(self, rep: Replicator, vlog: ViciLog) -> None:
        self.rep, self.vlog = rep, vlog
        self.rpc_s = 0.0
        self.sweep_errors = 0
        self.wake = asyncio.Event()

    async def sweeper(self) -> None:
        """As the agent's report loop: a sweep every report interval, at once on a takeover's progress."""
        while True:
            try:
                await asyncio.wait_for(self.wake.wait(), DEFAULT_REPORT_INTERVAL_MS / 1000)
            except asyncio.TimeoutError:
                pass
            self.wake.clear()
            try:
                await asyncio.to_thread(self.rep.sweep)
            except Exception as exc:
                self.sweep_errors += 1
                log.warning("sweep failed: %s", exc)

    async def handle(self, req: dict[str, Any]) -> dict[str, Any]:
        t0 = time.thread_time()
        try:
            return await self._handle(req)
        finally:
            self.rpc_s += time.thread_time() - t0

    async def _handle(self, req: dict[str, Any]) -> dict[str, Any]:
        op = req.get("op")
        if op == "start":
            await self.rep.start()
            asyncio.get_running_loop().create_task(self.sweeper(), name="sweeper")
            return {"endpoint": self.rep.endpoint}
        if op == "apply":
            self.rep.apply(ReplicationOrders.model_validate_json(req["orders"]))
            return {}
        if op == "state":
            return {"state": self.rep.state().model_dump_json()}
        if op == "meter":
            lags = self.rep.out_stats.lags_ms
            full = len(lags) == lags.maxlen
            drained = list(lags)
            lags.clear()
            return {"loop_s": time.thread_time(), "process_s": time.process_time(), "rpc_s": self.rpc_s,
                    "lags_ms": drained, "lags_full": full, "vici": self.vlog.drain(),
                    "sweep_errors": self.sweep_errors, "parse_errors": self.rep.parse_errors}
        if op == "stop":
            await self.rep.close()
            return {}
        raise ValueError(f"unknown request {op!r}")


def serve(config_path: Path) -> None:
    cfg = parse_config(json.loads(config_path.read_text()), str(config_path))
    gw = Gateway(cfg)
    vlog = ViciLog()
    loop = asyncio.new_event_loop()
    host_box: list[Host] = []

    def on_change() -> None:  # a takeover made progress: the agent reports (and sweeps) at once
        if host_box:
            host_box[0].wake.set()

    rep = replicator_for(cfg, lambda: TimedVici(gw, vlog), on_change)
    if rep is None:
        raise SystemExit(f"{config_path}: gateway {cfg.name} has no remote_access.replication")
    host = Host(rep, vlog)
    host_box.append(host)
    out = sys.stdout

    def reader() -> None:
        for line in sys.stdin:
            try:
                req = json.loads(line)
                reply = asyncio.run_coroutine_threadsafe(host.handle(req), loop).result()
            except Exception as exc:
                reply = {"error": f"{type(exc).__name__}: {exc}"}
            out.write(json.dumps(reply) + "\n")
            out.flush()
            if req.get("op") == "stop":
                break
        loop.call_soon_threadsafe(loop.stop)

    threading.Thread(target=reader, name="requests", daemon=True).start()
    loop.run_forever()


# --------------------------------------------------------------------------- in the benchmark
@dataclass(frozen=True)
class AgentMeter:
    """An agent's counters at one instant (CPU cumulative; lags and VICI since the last reading)."""

    loop_s: float  # the loop thread's CPU seconds, less the benchmark's requests on it
    process_s: float  # the whole process's CPU seconds
    lags_ms: tuple[float, ...]
    lags_full: bool  # the bounded lag list was full: older samples fell out
    list_sas: tuple[tuple[float, int], ...]
    rekeys: int
    sweep_errors: int
    parse_errors: int


class AgentHandle:
    """The benchmark's end of one agent process."""

    def __init__(self, name: str, config: dict[str, Any], workdir: Path) -> None:
        self.name = name
        workdir.mkdir(parents=True, exist_ok=True)
        path = workdir / f"{name}-agent.json"
        path.write_text(json.dumps(config))
        self.log_path = workdir / f"{name}-agent.log"
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "bench.replication.agent", str(path)], cwd=REPO,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log)
        self._replies: queue.Queue[bytes] = queue.Queue()
        assert self.proc.stdout is not None
        threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True).start()
        self.endpoint = ""

    def _read(self, stream: IO[bytes]) -> None:
        for line in stream:
            self._replies.put(line)
        self._replies.put(b"")

    def call(self, op: str, timeout_s: float = CALL_TIMEOUT_S, **args: Any) -> dict[str, Any]:
        if self.proc.poll() is not None:
            raise AgentError(f"agent {self.name} exited ({self.proc.returncode}); see {self.log_path}")
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"op": op, **args}).encode() + b"\n")
        self.proc.stdin.flush()
        try:
            line = self._replies.get(timeout=timeout_s)
        except queue.Empty:
            raise AgentError(f"agent {self.name}: no answer to {op} within {timeout_s:.0f}s; see {self.log_path}") \
                from None
        if not line:
            raise AgentError(f"agent {self.name} exited during {op}; see {self.log_path}")
        reply: dict[str, Any] = json.loads(line)
        if "error" in reply:
            raise AgentError(f"agent {self.name}: {op}: {reply['error']}")
        return reply

    def start(self) -> str:
        self.endpoint = str(self.call("start")["endpoint"])
        return self.endpoint

    def apply(self, orders: ReplicationOrders) -> None:
        self.call("apply", orders=orders.model_dump_json())

    def state(self) -> ReplicationState:
        return ReplicationState.model_validate_json(self.call("state")["state"])

    def meter(self) -> AgentMeter:
        r = self.call("meter")
        vici = r["vici"]
        return AgentMeter(loop_s=float(r["loop_s"]) - float(r["rpc_s"]), process_s=float(r["process_s"]),
                          lags_ms=tuple(float(x) for x in r["lags_ms"]), lags_full=bool(r["lags_full"]),
                          list_sas=tuple((float(s), int(n)) for s, n in vici["list_sas"]), rekeys=int(vici["rekeys"]),
                          sweep_errors=int(r["sweep_errors"]), parse_errors=int(r["parse_errors"]))

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """The gateway dies: the agent with it."""
        if self.alive():
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        self._log.close()

    def stop(self) -> None:
        if self.alive():
            try:
                self.call("stop", timeout_s=10)
                self.proc.wait(10)
            except (AgentError, subprocess.TimeoutExpired, OSError) as exc:
                print(f"   agent {self.name}: {exc}; killing it", flush=True)
        self.kill()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m bench.replication.agent CONFIG.json")
    serve(Path(sys.argv[1]))
