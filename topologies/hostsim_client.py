"""Typed client of supergw-hostsim's control socket (topologies/hostsim/README.md, "Control API").

`HostsimClient(path)` speaks the JSON-lines protocol; `HostsimProcess.start(...)` runs the program
in a network namespace and hands back a client; `run_loss` combines a sender's and a receiver's
stats into the exact loss of a run. `python -m topologies.hostsim_client SOCKET` prints the stats.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

HOSTSIM_BIN = Path(__file__).resolve().parent / "hostsim" / "bin" / "supergw-hostsim"
API_VERSION = 1
MAX_SOCKET_PATH = 107  # sockaddr_un's sun_path less its terminating NUL
Mode = Literal["pairs", "mesh"]


class HostsimError(RuntimeError):
    """The program answered `"ok": false`, or cannot be reached."""


class HostsimClient:
    """One request per call over the unix socket at `path` (a fresh connection each time, so a
    client survives the program's restart and is safe to share between threads)."""

    def __init__(self, path: Path, timeout: float = 10.0) -> None:
        self.path = path
        self.timeout = timeout

    def call(self, cmd: str, **fields: Any) -> dict[str, Any]:
        request = json.dumps({"cmd": cmd, **fields}).encode() + b"\n"
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(self.timeout)
                sock.connect(str(self.path))
                sock.sendall(request)
                buf = b""
                while not buf.endswith(b"\n"):
                    chunk = sock.recv(1 << 20)
                    if not chunk:
                        break
                    buf += chunk
        except FileNotFoundError:
            raise HostsimError(f"{self.path}: no hostsim control socket (is supergw-hostsim running?)") from None
        except ConnectionRefusedError:
            raise HostsimError(f"{self.path}: nobody listens (supergw-hostsim exited; see its log)") from None
        except OSError as exc:
            raise HostsimError(f"{self.path}: {cmd}: {exc}") from None
        if not buf:
            raise HostsimError(f"{self.path}: {cmd}: connection closed without an answer")
        try:
            answer = json.loads(buf)
        except json.JSONDecodeError as exc:
            raise HostsimError(f"{self.path}: {cmd}: answer is not JSON: {exc}") from None
        if not isinstance(answer, dict):
            raise HostsimError(f"{self.path}: {cmd}: answer is not a JSON object")
        if not answer.get("ok"):
            raise HostsimError(f"hostsim {cmd}: {answer.get('error', 'failed without a reason')}")
        return answer

    def hello(self) -> dict[str, Any]:
        return self.call("hello")

    def status(self) -> dict[str, Any]:
        return self.call("status")

    def resolve(self, all_hosts: bool = False) -> int:
        return int(self.call("resolve", all=all_hosts)["requested"])

    def start(self, rate_pps: float, frame_bytes: int, duration_s: float, destinations: list[str],
              mode: Mode = "pairs", hosts: list[int] | None = None, dst_port: int = 5001) -> dict[str, Any]:
        fields: dict[str, Any] = {"rate_pps": rate_pps, "frame_bytes": frame_bytes, "duration_s": duration_s,
                                  "destinations": destinations, "mode": mode, "dst_port": dst_port}
        if hosts is not None:
            fields["hosts"] = hosts
        return self.call("start", **fields)

    def stop(self) -> dict[str, Any]:
        run: dict[str, Any] = self.call("stop")["run"]
        return run

    def stats(self, hosts: bool = False, flows: bool = False) -> dict[str, Any]:
        return self.call("stats", hosts=hosts, flows=flows)

    def metrics(self) -> str:
        """The counters in the Prometheus text format."""
        return str(self.call("metrics")["text"])

    def reset(self) -> None:
        self.call("reset")

    def quit(self) -> None:
        self.call("quit")

    def wait_ready(self, timeout: float = 10.0) -> dict[str, Any]:
        """Until every host resolved IP_G (and, dual stack, the gateway's IPv6 address); the
        program re-ARPs and re-solicits for the unresolved once a second, as a host retries."""
        deadline = time.monotonic() + timeout
        while True:
            st = self.status()
            if st["ready"]:
                return st
            if time.monotonic() >= deadline:
                hosts = self.stats(hosts=True)["hosts"]
                missing = [h["ip"] for h in hosts if h["gateway_mac"] is None]
                missing6 = [h["ip6"] for h in hosts if h.get("ip6") and h.get("gateway_mac6") is None]
                if missing or not missing6:
                    raise HostsimError(f"{len(missing)} of {st['hosts']} simulated hosts did not resolve IP_G within "
                                       f"{timeout:.0f} s (first: {', '.join(missing[:5])}): is the switch up and its "
                                       "ARP responder programmed by the controller?")
                raise HostsimError(f"{len(missing6)} of {st['hosts']} simulated hosts did not resolve the gateway's IPv6 "
                                   f"address within {timeout:.0f} s (first: {', '.join(missing6[:5])}): is the "
                                   "controller's gateway_ip6 (nd_settings) written?")
            time.sleep(0.2)

    def wait_run_done(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            run: dict[str, Any] = self.status()["run"]
            if run["state"] != "running":
                return run
            if time.monotonic() >= deadline:
                raise HostsimError(f"run {run['id']} still running after {timeout:.0f} s (stop it with `stop`)")
            time.sleep(0.1)


@dataclass(frozen=True)
class RunLoss:
    sent: int
    received: int
    lost: int
    loss_ratio: float


def run_loss(tx_stats: dict[str, Any], rx_stats: dict[str, Any]) -> RunLoss:
    """The exact loss of the sender's current run: its per-flow `sent` against what the receiver
    got of the same run (both `stats(flows=True)`; read after the run stopped and frames landed).
    Per-flow gaps, including a flow that stopped arriving for good, are bench/gaps.py's
    `hostsim_flows` (the receiver's `max_gap_ms` alone cannot see that)."""
    run_id = tx_stats["run"]["id"]
    received: dict[tuple[str, str, int], dict[str, Any]] = {
        (f["src"], f["dst"], f["flow"]): f for f in rx_stats.get("flows_rx", []) if f["run"] == run_id}
    sent = got = 0
    for f in tx_stats.get("flows_tx", []):
        sent += f["sent"]
        rx = received.get((f["src"], f["dst"], f["flow"]))
        if rx is not None:
            got += rx["received"] - rx["duplicates"]
    lost = max(0, sent - got)
    return RunLoss(sent=sent, received=got, lost=lost, loss_ratio=lost / sent if sent else 0.0)


@dataclass
class HostsimProcess:
    """supergw-hostsim running in a network namespace, with its client."""

    popen: subprocess.Popen[bytes]
    client: HostsimClient

    @classmethod
    def argv(cls, iface: str, socket_path: Path, gateway_ip: str, first_ip: str, first_mac: str, count: int,
             prefix_len: int = 24, netns: str | None = None, binary: Path = HOSTSIM_BIN, mac_step: int = 1,
             dual_stack: tuple[str, str] | None = None) -> list[str]:
        """`dual_stack`: (the gateway's IPv6 address the hosts resolve, host 0's IPv6 address)."""
        argv = [str(binary), "--iface", iface, "--socket", str(socket_path), "--gateway-ip", gateway_ip,
                "--first-ip", first_ip, "--first-mac", first_mac, "--mac-step", str(mac_step), "--count", str(count),
                "--prefix-len", str(prefix_len)]
        if dual_stack is not None:
            argv += ["--gateway-ip6", dual_stack[0], "--first-ip6", dual_stack[1]]
        return (["ip", "netns", "exec", netns] if netns else []) + argv

    @classmethod
    def start(cls, iface: str, socket: Path, gateway_ip: str, first_ip: str, first_mac: str, count: int,
              log: Path, prefix_len: int = 24, netns: str | None = None, binary: Path = HOSTSIM_BIN,
              timeout: float = 5.0, dual_stack: tuple[str, str] | None = None) -> HostsimProcess:
        if not binary.exists():
            raise HostsimError(f"{binary} is missing: build it with `make hostsim`")
        if len(os.fsencode(socket)) > MAX_SOCKET_PATH:
            raise HostsimError(f"{socket}: longer than a unix socket address holds ({MAX_SOCKET_PATH} bytes): "
                               "use a shorter path")
        socket.unlink(missing_ok=True)
        socket.parent.mkdir(parents=True, exist_ok=True)
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as out:
            popen = subprocess.Popen(cls.argv(iface, socket, gateway_ip, first_ip, first_mac, count, prefix_len,
                                              netns, binary, dual_stack=dual_stack), stdout=out, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        proc = cls(popen, HostsimClient(socket))
        deadline = time.monotonic() + timeout
        while not socket.exists():
            if popen.poll() is not None:
                tail = log.read_text(errors="replace")[-400:]
                raise HostsimError(f"supergw-hostsim exited with {popen.returncode}: {tail.strip()}")
            if time.monotonic() >= deadline:
                popen.kill()
                raise HostsimError(f"supergw-hostsim did not open {socket} within {timeout:.0f} s (log {log})")
            time.sleep(0.05)
        return proc

    def stop(self) -> None:
        if self.popen.poll() is None:
            try:
                self.client.quit()
                self.popen.wait(timeout=3)
            except (HostsimError, subprocess.TimeoutExpired):
                self.popen.kill()
                self.popen.wait(timeout=3)


def _print_stats(client: HostsimClient, hosts: bool) -> None:
    st = client.stats(hosts=hosts)
    t = st["totals"]
    print(f"{client.path}: run {st['run']['id']} {st['run']['state']}  tx {t['tx_packets']} pkts {t['tx_bytes']} B  "
          f"rx {t['rx_packets']} pkts {t['rx_bytes']} B  test tx {t['test_tx_packets']} rx {t['test_rx_packets']} "
          f"lost {t['lost']}  max gap {t['max_gap_ms']:.1f} ms  malformed {t['malformed']}")
    for h in st.get("hosts", []):
        six = f"  {h['ip6']} gw6 {h.get('gateway_mac6') or '-':<17}" if h.get("ip6") else ""
        print(f"  host {h['index']:<4} {h['ip']:<16} {h['mac']}  gw {h['gateway_mac'] or '-':<17}{six}  "
              f"tx {h['tx_packets']:>9} pkts {h['tx_bytes']:>11} B  rx {h['rx_packets']:>9} pkts {h['rx_bytes']:>11} B")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m topologies.hostsim_client",
                                     description="print a supergw-hostsim's counters")
    parser.add_argument("socket", type=Path, nargs="+", help="control socket(s), e.g. .run/sgw-a/hostsim.sock")
    parser.add_argument("--hosts", action="store_true", help="one line per simulated host")
    parser.add_argument("--prometheus", action="store_true", help="the counters in the Prometheus text format")
    args = parser.parse_args(argv)
    try:
        for path in args.socket:
            if args.prometheus:
                print(HostsimClient(path).metrics(), end="")
            else:
                _print_stats(HostsimClient(path), args.hosts)
    except HostsimError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
