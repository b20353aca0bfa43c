"""A real etcd for tests: the Debian `etcd` binary on 127.0.0.1, free ports, a tmp data dir.

Fixtures (registered for every test under controller/tests by its conftest.py; elsewhere
`from etcd_server import etcd_server`):

    etcd_server            function scope, yields a started, healthy EtcdServer; stopped
                           and cleaned up afterwards; skipped (with the reason) when `etcd`
                           is not installed.

EtcdServer:
    .endpoint              "127.0.0.1:PORT", the client address (no scheme), as the
                           controller's `store.etcd.endpoints` takes it
    .host, .port           the same, split
    .url                   "http://127.0.0.1:PORT"
    .start()               start (again, on the same ports and data: the data survives
                           stop/kill); returns once /health answers, raises EtcdStartError
                           with the log tail if it does not within `start_timeout_s`
    .stop()                SIGTERM, wait (a clean shutdown)
    .kill()                SIGKILL, wait (a crash)
    .pause() / .resume()   SIGSTOP / SIGCONT: etcd holds its connections but answers
                           nothing, as when it is partitioned away
    .running               the process is alive
    .log_tail(n)           the last n lines of its log (log file: .log_path)

    start_etcd(dir) -> EtcdServer   the same without pytest (a context manager too:
                                    `with start_etcd(d) as etcd: ...` stops it on exit)

Timing flags: `--heartbeat-interval 50 --election-timeout 500` (etcd's defaults are 100 and
1000 ms). etcd grants no lease shorter than its minimum TTL, 1.5 election timeouts rounded
up to whole seconds (lessor: minLeaseTTL = 3/2 * election ticks * heartbeat): 2 s with the
defaults, 1 s with these, so tests (and the HA emulation) can use 1 s leases and see a
lease expire within about a second. A single member elects itself at once, so the
shorter timeouts cost nothing on a loaded 2-core machine: the member never waits for peers.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from topologies.etcd_auth import EtcdPki, client_ssl_context, member_tls_flags

ETCD = "etcd"
HEARTBEAT_MS = 50
ELECTION_MS = 500
MISSING = "etcd is not installed (Debian package etcd-server; `make deps` / .ci/install-deps installs it)"


class EtcdStartError(RuntimeError):
    """etcd did not start or did not become healthy in time."""


def etcd_binary() -> str | None:
    return shutil.which(ETCD)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class EtcdServer:
    """`pki` (topologies.etcd_auth): serve clients over TLS with client certificates
    (`--client-cert-auth`); the health check then presents root's certificate."""

    def __init__(
        self, workdir: Path, *, start_timeout_s: float = 15.0, name: str = "test", pki: EtcdPki | None = None
    ) -> None:
        binary = etcd_binary()
        if binary is None:
            raise EtcdStartError(MISSING)
        self._binary = binary
        self.peer_port = _free_port()
        self.name = f"{name}-{self.peer_port}"  # unique: the health check knows its own member
        self.workdir = workdir
        self.data_dir = workdir / "etcd-data"
        self.log_path = workdir / "etcd.log"
        self.host = "127.0.0.1"
        self.port = _free_port()
        self.start_timeout_s = start_timeout_s
        self.pki = pki
        self._ssl = None if pki is None else client_ssl_context(pki)
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def url(self) -> str:
        return f"{'https' if self.pki else 'http'}://{self.endpoint}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self.running and self._proc is not None else None

    def _argv(self) -> list[str]:
        peer = f"http://{self.host}:{self.peer_port}"
        return [
            self._binary,
            "--name", self.name,
            "--data-dir", str(self.data_dir),
            "--listen-client-urls", self.url,
            "--advertise-client-urls", self.url,
            "--listen-peer-urls", peer,
            "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"{self.name}={peer}",
            "--heartbeat-interval", str(HEARTBEAT_MS),
            "--election-timeout", str(ELECTION_MS),
            "--logger", "zap",
            "--log-outputs", "stderr",
            *([] if self.pki is None else member_tls_flags(self.pki, "server", peers=False)),
        ]  # fmt: skip

    def start(self) -> None:
        if self.running:
            return
        self.workdir.mkdir(parents=True, exist_ok=True)
        # etcd reads ETCD_* variables as flags: a stray one in the caller's env must not leak in.
        env = {k: v for k, v in os.environ.items() if not k.startswith("ETCD_")}
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(
                self._argv(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
            )
        self._wait_healthy()

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        last = "no answer yet"
        while time.monotonic() < deadline:
            proc = self._proc
            if proc is None or proc.poll() is not None:
                code = None if proc is None else proc.returncode
                self._proc = None
                raise EtcdStartError(
                    f"etcd exited with status {code} while starting on {self.endpoint};"
                    f" its log ({self.log_path}) ends:\n{self.log_tail()}"
                )
            try:
                if self._healthy_and_ours():
                    return
                last = "unhealthy, or another etcd on this port"
            except (OSError, urllib.error.URLError, ValueError) as exc:
                last = str(exc)
            time.sleep(0.05)
        self.kill()
        raise EtcdStartError(
            f"etcd on {self.endpoint} not healthy after {self.start_timeout_s:.0f} s (last: {last});"
            f" its log ({self.log_path}) ends:\n{self.log_tail()}"
        )

    def _healthy_and_ours(self) -> bool:
        """/health says true, and the member answering is this one (the port may be another's)."""
        with urllib.request.urlopen(f"{self.url}/health", timeout=1.0, context=self._ssl) as resp:
            if json.loads(resp.read()).get("health") != "true":
                return False
        req = urllib.request.Request(f"{self.url}/v3/cluster/member/list", data=b"{}", method="POST")
        with urllib.request.urlopen(req, timeout=1.0, context=self._ssl) as resp:
            members = json.loads(resp.read()).get("members", [])
        return any(m.get("name") == self.name for m in members)

    def _signal_and_wait(self, sig: signal.Signals, timeout_s: float) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGCONT)  # a paused etcd cannot act on SIGTERM
            proc.send_signal(sig)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)

    def stop(self) -> None:
        self._signal_and_wait(signal.SIGTERM, 5.0)

    def kill(self) -> None:
        self._signal_and_wait(signal.SIGKILL, 5.0)

    def pause(self) -> None:
        if self._proc is not None:
            self._proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self._proc is not None:
            self._proc.send_signal(signal.SIGCONT)

    def log_tail(self, n: int = 20) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(lines[-n:])

    def cleanup(self) -> None:
        self.kill()
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> EtcdServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()


def start_etcd(workdir: Path, *, start_timeout_s: float = 15.0, pki: EtcdPki | None = None) -> EtcdServer:
    """A started, healthy etcd; one retry on fresh ports if the chosen ones were taken meanwhile."""
    server = EtcdServer(workdir, start_timeout_s=start_timeout_s, pki=pki)
    try:
        server.start()
    except EtcdStartError as exc:
        if "address already in use" not in str(exc):
            raise
        server = EtcdServer(workdir, start_timeout_s=start_timeout_s, pki=pki)
        server.start()
    return server


@pytest.fixture
def etcd_server(tmp_path: Path) -> Iterator[EtcdServer]:
    if etcd_binary() is None:
        pytest.skip(MISSING)
    server = start_etcd(tmp_path / "etcd")
    try:
        yield server
    finally:
        server.cleanup()
