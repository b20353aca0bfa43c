"""The agent's UDP heartbeat thread against the controller's real receiver, and the
gateway's own CPU (never the machine's)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from supergw_controller.heartbeat import HeartbeatReceiver

from supergw_gateway.agent import Sampler
from supergw_gateway.beacon import HeartbeatSender, process_running, udp_target
from supergw_gateway.cgroup import CpuAcct
from supergw_gateway.report import build_report

KEY = b"agent-test-token-0123456789"


def _collect(rx: HeartbeatReceiver, want: int, timeout: float = 3.0) -> list[Any]:
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        got += rx.drain()
        time.sleep(0.01)
    return got


def test_udp_target_is_the_api_host_and_port() -> None:
    assert udp_target("http://10.255.60.2:8080") == ("10.255.60.2", 8080)
    assert udp_target("https://ctl.example/api") == ("ctl.example", 443)
    assert udp_target("http://[2001:db8::1]:8700/") == ("2001:db8::1", 8700)


def test_sender_thread_beats_are_accepted_and_say_when_charon_is_down() -> None:
    rx = HeartbeatReceiver({"gw1": KEY})
    port = rx.open("127.0.0.1", 0).getsockname()[1]
    charon = {"running": True}
    sender = HeartbeatSender("gw1", [(f"http://127.0.0.1:{port}", KEY)], 0.02, lambda: charon["running"])
    sender.start()
    try:
        beats = _collect(rx, 5)
        assert len(beats) >= 5 and not any(b.charon_down for b in beats)
        assert [b.seq for b in beats] == sorted(b.seq for b in beats)
        charon["running"] = False
        time.sleep(0.05)
        rx.drain()
        later = _collect(rx, 2)
        assert later and all(b.charon_down for b in later)
    finally:
        sender.stop()
        rx.close()
    assert rx.rejected == {} and sender.stats.sent >= 7 and sender.stats.failed == 0


def test_a_wrong_key_is_rejected_by_the_controller() -> None:
    rx = HeartbeatReceiver({"gw1": KEY})
    port = rx.open("127.0.0.1", 0).getsockname()[1]
    sender = HeartbeatSender("gw1", [(f"http://127.0.0.1:{port}", b"someone-elses-token-000")], 0.02, lambda: True)
    sender.start()
    try:
        deadline = time.monotonic() + 3
        while not rx.rejected and time.monotonic() < deadline:
            assert rx.drain() == []
            time.sleep(0.01)
    finally:
        sender.stop()
        rx.close()
    assert set(rx.rejected) == {"bad_mac"}


def test_stopped_sender_goes_silent() -> None:
    rx = HeartbeatReceiver({"gw1": KEY})
    port = rx.open("127.0.0.1", 0).getsockname()[1]
    sender = HeartbeatSender("gw1", [(f"http://127.0.0.1:{port}", KEY)], 0.02, lambda: True)
    sender.start()
    _collect(rx, 2)
    sender.stop()
    time.sleep(0.1)
    rx.drain()
    time.sleep(0.1)
    assert rx.drain() == []
    rx.close()


def test_process_running_sees_stopped_and_dead_processes() -> None:
    proc = subprocess.Popen(["sleep", "30"])
    try:
        assert process_running(proc.pid)
        os.kill(proc.pid, signal.SIGSTOP)
        deadline = time.monotonic() + 2
        while process_running(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not process_running(proc.pid)
        os.kill(proc.pid, signal.SIGCONT)
        deadline = time.monotonic() + 2
        while not process_running(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert process_running(proc.pid)
    finally:
        proc.kill()
        proc.wait()
    assert not process_running(proc.pid)
    assert not process_running(None)


def _fake_gw(charon_pid: int | None, backend: str = "auto", quota: float | None = None) -> Any:
    cfg = SimpleNamespace(name="gw1", backend=SimpleNamespace(value=backend), cpu_quota_percent=quota)
    return SimpleNamespace(cfg=cfg, charon_pid=lambda: charon_pid)


def _jiffies(pid: int) -> int:
    """utime + stime of a process (fields 14 and 15 of /proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def test_cpu_is_the_gateways_processes_not_the_machine(tmp_path: Path) -> None:
    """A busy process outside the gateway does not show in its CPU; its charon's does."""
    busy = subprocess.Popen(["sh", "-c", "while :; do :; done"])
    charon = subprocess.Popen(["sleep", "30"])  # an idle "charon"
    try:
        s = Sampler(_fake_gw(charon.pid), CpuAcct("sgw-gw-none", roots=(tmp_path,)))
        a = s.cpu()
        time.sleep(0.5)
        b = s.cpu()
        rep = build_report("gw1", "libipsec", a, b, [], "sgw-gw1")
        assert rep.cpu_scope == "processes" and rep.cpu_cores == float(os.cpu_count() or 1)
        assert rep.cpu_percent < 40, "the busy loop is not the gateway's"
        # The charon itself burning CPU is the gateway's.
        # Compared with the process's own /proc accounting, not a fixed share: on a loaded
        # machine (CI) the busy loop may get well under half a core.
        s2 = Sampler(_fake_gw(busy.pid), CpuAcct("sgw-gw-none", roots=(tmp_path,)))
        t0, j0 = time.monotonic(), _jiffies(busy.pid)
        a = s2.cpu()
        time.sleep(0.5)
        b = s2.cpu()
        t1, j1 = time.monotonic(), _jiffies(busy.pid)
        own = 100.0 * (j1 - j0) / os.sysconf("SC_CLK_TCK") / (t1 - t0)
        got = build_report("gw1", "libipsec", a, b, [], "sgw-gw1").cpu_percent
        assert own > 2.0, f"the busy loop ran {own:.1f} % of a core: nothing to compare"
        assert abs(got - own) < max(8.0, 0.3 * own), f"reported {got:.1f} % of a core, the process used {own:.1f} %"
    finally:
        for p in (busy, charon):
            p.kill()
            p.wait()


def test_cpu_from_the_gateways_cgroup_when_it_has_one(tmp_path: Path) -> None:
    grp = tmp_path / "sgw-gw-gw1"
    grp.mkdir()
    (grp / "cpuacct.usage").write_text("1000000000\n")  # 1 s in ns
    s = Sampler(_fake_gw(None, quota=50.0), CpuAcct("sgw-gw-gw1", roots=(tmp_path,)))
    a = s.cpu()
    (grp / "cpuacct.usage").write_text("1250000000\n")
    b = s.cpu()
    assert (a.scope, a.cores, b.busy - a.busy) == ("cgroup", 0.5, 25)  # 0.25 s = 25 jiffies
    v2 = tmp_path / "v2"
    (v2 / "g").mkdir(parents=True)
    (v2 / "g" / "cpu.stat").write_text("usage_usec 2000000\nuser_usec 1\n")
    assert CpuAcct("g", roots=(tmp_path / "missing", v2)).usage_jiffies() == 200
    assert CpuAcct("nope", roots=(tmp_path,)).usage_jiffies() is None


def _fake_uml(quota: float | None, stat: str, guest: int | None) -> Any:
    cfg = SimpleNamespace(name="gw1", backend=SimpleNamespace(value="uml"), cpu_quota_percent=quota)

    def run(argv: list[str], timeout: float) -> Any:
        if quota is not None and guest is not None:
            raise AssertionError("a guest under a quota is measured from the host: nothing runs in it")
        return SimpleNamespace(stdout=stat + "@@\n")

    return SimpleNamespace(cfg=cfg, charon_pid=lambda: guest, executor=lambda: SimpleNamespace(run=run))


def test_a_uml_guest_under_a_quota_is_measured_by_the_host_against_the_quota() -> None:
    """Throttled, the guest's own ticks stop: its /proc/stat would never show it saturated.
    Under a quota its load is the host's count of the guest's processes (the kernel's and its
    children, as the host sees them) against the quota."""
    stat = "cpu  10 0 10 500 0 0 0 0\ncpu0 10 0 10 500 0 0 0 0\n"
    guest = subprocess.Popen(["sh", "-c", "sh -c 'while :; do :; done' & while :; do :; done"])  # kernel + a child
    try:
        time.sleep(0.2)
        s = Sampler(_fake_uml(10.0, stat, guest.pid))
        t0, j0 = time.monotonic(), _jiffies(guest.pid)
        a = s.cpu()
        time.sleep(0.5)
        b = s.cpu()
        t1, j1 = time.monotonic(), _jiffies(guest.pid)
        assert (a.scope, a.cores) == ("processes", 0.1)
        rep = build_report("gw1", "xfrm_uml", a, b, [], "sgw-gw1")
        own = 100.0 * (j1 - j0) / os.sysconf("SC_CLK_TCK") / (t1 - t0)  # the parent alone
        assert own > 2.0, f"the busy loop ran {own:.1f} % of a core: nothing to compare"
        assert rep.cpu_percent > own + 1.0, "the guest's child process is the guest's too"
        assert rep.cpu_cores == 0.1  # the controller reads cpu_percent / (100 x 0.1): far above 1, saturated
        assert (b.softirq, b.charon) == (0, 0)  # nothing ran in the guest to see them
        without = Sampler(_fake_uml(None, stat, guest.pid)).cpu()
        assert (without.scope, without.cores, without.busy) == ("guest", 1.0, 20)  # no quota: the guest's own view
        gone = Sampler(_fake_uml(10.0, stat, None)).cpu()
        assert gone.scope == "guest"  # no guest process to count: what the guest says
    finally:
        from supergw_gateway.uml import descendants

        for pid in [guest.pid, *descendants(guest.pid)]:
            os.kill(pid, signal.SIGKILL)
        guest.wait()


@pytest.mark.parametrize("n", [1, 2, 4])
def test_uml_guest_cpus_counted(n: int) -> None:
    from supergw_gateway.report import guest_cpus

    stat = "cpu  1 2 3 4 5 6 7 0\n" + "".join(f"cpu{i} 1 2 3 4 5 6 7 0\n" for i in range(n)) + "intr 5\n"
    assert guest_cpus(stat) == float(n)
