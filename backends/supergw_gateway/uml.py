"""Gateways as User-Mode Linux guests: real kernel XFRM on hosts whose kernel lacks ESP.

The guest boots the host's root over hostfs read-only (so it runs the host's strongSwan and
this package), with tmpfs where it writes. Its NICs are `vec` raw sockets on veths inside
the gateway's namespace; a management veth pair carries VICI (TCP) and the exec service.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from supergw_gateway.charon import CharonSettings, render_strongswan_conf
from supergw_gateway.config import GatewayConfig
from supergw_gateway.errors import GatewayError
from supergw_gateway.executor import GuestExecutor, LocalExecutor
from supergw_gateway.nssocket import connect_in_netns
from supergw_gateway.ra import gateway as ra_gateway
from supergw_gateway.uml_init import (
    BOOT_REPORTS,
    EXEC_PORT,
    MGMT_GUEST_DEV,
    GuestAddrs,
    GuestPrereqs,
    boot_failure,
    render_init,
)

log = logging.getLogger(__name__)

UML_BIN = Path("/usr/bin/linux.uml")
VICI_PORT = 4502
_MCONSOLE_MAGIC, _MCONSOLE_VERSION = 0xCAFEBABE, 2
MGMT_NS_DEV = "sgwmgmt1"

# UML 6.1 saves guest FPU state with PTRACE_{GET,SET}REGSET(NT_X86_XSTATE) into a fixed
# 2696-byte buffer; hosts with AMX have a larger XSAVE area, SETREGSET then fails with
# EFAULT and the guest's init dies. The fix (upstream in later UML kernels) sizes the buffer
# from the host; here we make UML take its FXSAVE fallback instead (have_xstate_support
# stays 0), and keep guest userspace off AVX state, which that fallback does not preserve.
_XSTATE_STORE = bytes.fromhex("48b8808da46000000000c70001000000")
_AVX_OFF = (
    "GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX,-AVX2,-AVX512F,-AVX512VL,-AVX512BW,-AVX512DQ,"
    "-AVX512CD,-EVEX,-AVX_Fast_Unaligned_Load,-FMA,-AMX_TILE"
)
_OPENSSL_CAP = "OPENSSL_ia32cap=~0x1000000000000000:0"


def uml_kernel(state_dir: Path) -> Path:
    """The UML binary to boot: Debian's, with the XSTATE fallback forced (see above)."""
    if not UML_BIN.exists():
        raise GatewayError(f"{UML_BIN} missing: install the Debian package user-mode-linux")
    out = state_dir / "linux.uml.fxsave"
    if out.exists():
        return out
    data = bytearray(UML_BIN.read_bytes())
    at = data.find(_XSTATE_STORE)
    if at < 0 or data.count(_XSTATE_STORE) != 1:
        log.warning("UML binary differs from Debian's 6.1 build: booting it unpatched")
        return UML_BIN
    data[at + 12] = 0
    state_dir.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_bytes(bytes(data))
    tmp.chmod(0o755)
    tmp.rename(out)
    return out


@dataclass
class UmlGuest:
    cfg: GatewayConfig
    on_progress: Callable[[str], None] = lambda msg: None
    prereqs: GuestPrereqs = field(default_factory=GuestPrereqs)

    @property
    def run_dir(self) -> Path:
        return self.cfg.run_dir

    @property
    def umid(self) -> str:
        return f"sgw-gw-{self.cfg.name}"

    @property
    def uml_dir(self) -> Path:
        return self.cfg.state_dir / "uml"

    @property
    def addrs(self) -> GuestAddrs:
        return GuestAddrs.from_subnet(self.cfg.uml.mgmt_subnet)

    @property
    def pid_path(self) -> Path:
        return self.run_dir / "uml.pid"

    def executor(self) -> GuestExecutor:
        return GuestExecutor(self.cfg.netns, self.addrs.guest_ip, EXEC_PORT, self.cfg.name)

    def connect_vici(self) -> socket.socket:
        return connect_in_netns(self.cfg.netns, (self.addrs.guest_ip, VICI_PORT), timeout=10)

    def pid(self) -> int | None:
        try:
            pid = int(self.pid_path.read_text())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, ValueError):
            return None
        return pid if f"umid={self.umid}".encode() in cmdline else None

    def _mgmt_link(self) -> None:
        ns = LocalExecutor(self.cfg.netns)
        if ns.run(["ip", "link", "show", MGMT_NS_DEV], check=False).returncode != 0:
            ns.run(["ip", "link", "add", MGMT_GUEST_DEV, "type", "veth", "peer", "name", MGMT_NS_DEV])
        ns.run(["ip", "addr", "replace", f"{self.addrs.ns_ip}/{self.addrs.prefix}", "dev", MGMT_NS_DEV])
        for dev in (MGMT_GUEST_DEV, MGMT_NS_DEV):
            ns.run(["ip", "link", "set", dev, "up"])

    def start(self) -> int:
        if (pid := self.pid()) is not None:
            return pid
        self.run_dir.mkdir(parents=True, exist_ok=True)
        for stale in BOOT_REPORTS:
            (self.run_dir / stale).unlink(missing_ok=True)
        self._mgmt_link()
        settings = CharonSettings(
            vici_uri=f"tcp://{self.addrs.guest_ip}:{VICI_PORT}", log_path=Path("/run/gw/charon.log"), libipsec=False,
            tuning=self.cfg.charon, options=ra_gateway.charon_options(self.cfg),
        )
        (self.run_dir / "strongswan.conf").write_text(render_strongswan_conf(settings))
        init = self.run_dir / "guest-init.sh"
        init.write_text(render_init(self.cfg, self.addrs, sys.executable, self.prereqs))
        init.chmod(0o755)
        self.uml_dir.mkdir(parents=True, exist_ok=True)
        nics = [f"vec{i}:transport=raw,ifname={itf.device}" for i, itf in enumerate(self.cfg.interfaces)]
        nics.append(f"vec{len(self.cfg.interfaces)}:transport=raw,ifname={MGMT_GUEST_DEV}")
        argv = [
            "ip", "netns", "exec", self.cfg.netns, str(uml_kernel(self.cfg.state_dir)),
            f"umid={self.umid}", f"uml_dir={self.uml_dir}", f"mem={self.cfg.uml.mem_mb}M",
            "root=/dev/root", "rootfstype=hostfs", "rootflags=/", "ro", f"init={init}",
            *nics, "con=null", "con0=null,fd:1", _AVX_OFF, _OPENSSL_CAP,
        ]
        self.on_progress(f"{self.cfg.name}: booting UML guest (umid {self.umid})")
        with open(self.run_dir / "uml.console", "wb") as out:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        self.pid_path.write_text(str(proc.pid))
        self._wait_ready(proc)
        self.on_progress(f"{self.cfg.name}: guest up, charon answering on VICI")
        return proc.pid

    def _wait_ready(self, proc: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + self.cfg.uml.boot_timeout_s
        last = ""
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                tail = (self.run_dir / "uml.console").read_text(errors="replace")[-1500:]
                raise GatewayError(f"UML guest {self.umid} exited during boot ({proc.returncode}):\n{tail}")
            if (why := boot_failure(self.run_dir)) is not None:
                self.stop()
                raise GatewayError(f"UML guest {self.umid} cannot come up: {why}")
            try:
                self.connect_vici().close()
                self.executor().run(["true"], timeout=5)
                return
            except (OSError, GatewayError) as exc:
                last = str(exc)
                time.sleep(0.2)
        self.stop()
        guestd_log = self.run_dir / "guestd.log"
        detail = guestd_log.read_text(errors="replace")[-800:].strip() if guestd_log.exists() else ""
        raise GatewayError(
            f"UML guest {self.umid} not ready after {self.cfg.uml.boot_timeout_s:.0f}s: {last}"
            + (f"\nguest exec service log ({guestd_log}):\n{detail}" if detail else "")
            + f"\nguest console: {self.run_dir / 'uml.console'}"
        )

    def stop(self, timeout: float = 10.0) -> None:
        """Halt through the management console, then make sure every UML process is gone."""
        pid = self.pid()
        if pid is None:
            return
        pids = [pid, *descendants(pid)]
        _mconsole_halt(self.uml_dir / self.umid / "mconsole")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.05)
        for p in pids:
            if _alive(p):
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        _reap(pid)
        self.pid_path.unlink(missing_ok=True)


def _mconsole_halt(sock: Path) -> None:
    """Ask the guest to halt over its management console (the protocol uml_mconsole speaks).

    The guest halts before it answers: the reply is not awaited."""
    request = struct.pack("=III512s", _MCONSOLE_MAGIC, _MCONSOLE_VERSION, len(b"halt"), b"halt")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        try:
            s.bind(b"")  # an autobound abstract address, so the guest has somewhere to reply
            s.sendto(request, str(sock))
        except OSError:
            pass  # no console (guest already gone): the caller kills what is left


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (its children, theirs, ...), read from /proc."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(d.name))
    out: list[int] = []
    todo = [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    if state == "Z":
        _reap(pid)
        return False
    return True


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
