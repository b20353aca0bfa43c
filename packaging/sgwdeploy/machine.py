"""One machine: a systemd-nspawn container booting Debian's systemd on a network namespace.

Its root file system is an overlay of the base image (its own writes stay in its upper
layer, so a machine that is killed and booted again keeps what was installed on it). This
machine's PID 1 is not systemd and its cgroups are v1, so nspawn runs with
--register=no --keep-unit and SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=0
(docs/environment-notes.md). The switch role needs the bpf() system call and
CAP_BPF/CAP_PERFMON, which nspawn withholds by default: --system-call-filter=bpf and
--capability=CAP_BPF,CAP_PERFMON; every machine gets CAP_NET_ADMIN (nspawn grants it only
with a namespace of its own making); bpffs is mounted in the switch machine after boot, as
systemd does on a real host (not in containers). Commands run
inside with nsenter into the machine's namespaces, as an operator's shell would.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from sgwdeploy.host import DeployError, sh, wait_for

ENV = ["env", "-i", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root",
       "LANG=C.UTF-8", "DEBIAN_FRONTEND=noninteractive", "SYSTEMD_PAGER=", "SYSTEMD_COLORS=0"]


@dataclass
class Machine:
    name: str
    netns: str  # the network namespace the test built for it
    base: Path
    workdir: Path  # upper, work, root, console.log
    binds: list[tuple[Path, str]] = field(default_factory=list)  # host path -> read-only path inside
    extra_caps: tuple[str, ...] = ()
    nspawn: subprocess.Popen[bytes] | None = None
    leader: int | None = None

    @property
    def root(self) -> Path:
        return self.workdir / "root"

    @property
    def console(self) -> Path:
        return self.workdir / "console.log"

    def mount(self) -> None:
        for d in ("upper", "work", "root"):
            (self.workdir / d).mkdir(parents=True, exist_ok=True)
        if subprocess.run(["mountpoint", "-q", str(self.root)]).returncode != 0:
            sh(["mount", "-t", "overlay", "overlay", "-o",
                f"lowerdir={self.base},upperdir={self.workdir / 'upper'},workdir={self.workdir / 'work'}", self.root])

    def boot(self, timeout: float = 60) -> None:
        self.mount()
        (self.root / "etc/hostname").write_text(self.name + "\n")
        argv = ["systemd-nspawn", "--register=no", "--keep-unit", "--console=read-only", "--boot",
                f"--directory={self.root}", f"--machine=pkgdt-{self.name}", f"--hostname={self.name}",
                f"--network-namespace-path=/run/netns/{self.netns}"]
        argv += [f"--bind-ro={src}:{dst}" for src, dst in self.binds]
        # A host's root has CAP_NET_ADMIN; nspawn withholds it unless it made the namespace.
        argv.append(f"--capability={','.join(('CAP_NET_ADMIN', *self.extra_caps))}")
        if "CAP_BPF" in self.extra_caps:
            argv.append("--system-call-filter=bpf")
        env = {**os.environ, "SYSTEMD_NSPAWN_UNIFIED_HIERARCHY": "0"}
        with open(self.console, "ab") as log:
            self.nspawn = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env)
        wait_for(f"machine {self.name} boots to multi-user", self._booted, timeout, interval=0.2)
        if "CAP_BPF" in self.extra_caps:
            # systemd mounts bpffs at boot on a host, not in a container: give the machine its own.
            self.run(["sh", "-c", "mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf"])

    def _booted(self) -> str | None:
        assert self.nspawn is not None
        if self.nspawn.poll() is not None:
            tail = self.console.read_text(errors="replace")[-3000:]
            raise DeployError(f"machine {self.name}: systemd-nspawn exited {self.nspawn.returncode}:\n{tail}")
        if self.leader is None:
            # nspawn's first child only sets up and forks the container's PID 1 (systemd).
            try:
                kids = Path(f"/proc/{self.nspawn.pid}/task/{self.nspawn.pid}/children").read_text().split()
                pid1 = [int(k) for k in kids if Path(f"/proc/{k}/comm").read_text().strip() == "systemd"]
            except OSError:
                return "nspawn's child is starting"
            if not pid1:
                return "systemd has not started yet"
            self.leader = pid1[0]
        state = self.run(["systemctl", "is-system-running"], check=False).stdout.strip()
        return None if state in ("running", "degraded") else f"systemd says {state or 'nothing'}"

    def run(self, argv: list[str], check: bool = True, timeout: float = 600,
            input_text: str | None = None) -> subprocess.CompletedProcess[str]:
        if self.leader is None:
            raise DeployError(f"machine {self.name} is not running")
        return sh(["nsenter", "-t", str(self.leader), "-m", "-u", "-i", "-n", "-p", "--", *ENV, *argv],
                  check=check, timeout=timeout, input_text=input_text)

    def write(self, path: str, text: str, mode: int = 0o644, owner: str | None = None) -> None:
        """A file inside the machine, written from inside (owner names resolve there)."""
        self.run(["install", "-D", "-m", f"{mode:04o}", *(["-o", owner, "-g", owner] if owner else []),
                  "/dev/stdin", path], input_text=text)

    def power_cut(self) -> None:
        """SIGKILL to the machine's PID 1: every process in it dies at once, like pulling the plug."""
        if self.leader is not None:
            try:
                os.kill(self.leader, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self._reap(10)

    def shutdown(self, timeout: float = 30) -> None:
        if self.nspawn is None or self.nspawn.poll() is not None:
            self.leader = None
            return
        self.run(["systemctl", "poweroff", "--no-block"], check=False, timeout=10)
        try:
            self.nspawn.wait(timeout)
        except subprocess.TimeoutExpired:
            self.power_cut()
        self.leader = None

    def _reap(self, timeout: float) -> None:
        assert self.nspawn is not None
        deadline = time.monotonic() + timeout
        while self.nspawn.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if self.nspawn.poll() is None:
            self.nspawn.kill()
            self.nspawn.wait(5)
        self.leader = None

    def unmount(self) -> None:
        sh(["umount", "-R", self.root], check=False)
