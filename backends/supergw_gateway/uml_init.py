"""The UML guest's init script, and what it reports when the guest cannot come up.

The init checks its own prerequisites before it configures anything (the commands it runs
come from the host's root over hostfs; the kernel modules from user-mode-linux) and writes
what is wrong into the gateway's run directory, which the host reads while it waits:

    guest-problems      one line per missing command or module that did not load
    guest-checked       "ok" or "failed" once every check ran
    guest-modprobe.log  modprobe's own messages
    charon-exited       charon's exit status, if it ended during or after boot
"""

from __future__ import annotations

import hashlib
import ipaddress
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

from supergw_gateway.config import IPV6_SYSCTLS, GatewayConfig

UML_MODULES = Path("/usr/lib/uml/modules")
MGMT_GUEST_DEV = "sgwmgmt0"
EXEC_PORT = 4503
CHARON = "/usr/sbin/charon-systemd"
GUEST_MODULES = (
    "esp4", "xfrm_user", "xfrm4_tunnel", "tunnel4", "ah4", "xfrm_ipcomp", "gcm", "ghash-generic",
    "aes_generic", "ctr", "seqiv", "echainiv", "authenc", "cbc", "sha256_generic", "sha512_generic",
    "hmac", "drbg", "chacha20poly1305", "x_tables", "ip_tables", "iptable_mangle", "xt_TCPMSS",
    "xt_tcpudp", "xt_policy", "tun",
)
# Every command the init runs, with the Debian package that provides it on the host (the
# guest runs the host's binaries). .ci/check-commands checks these against .ci/install-deps.
GUEST_COMMANDS: dict[str, str] = {
    "mount": "mount",
    "mkdir": "coreutils",
    "modprobe": "kmod",
    "ip": "iproute2",
    "sysctl": "procps",
    "sleep": "coreutils",
    "charon-systemd": "charon-systemd",
}
# Where the guest writes: tmpfs over the read-only host root.
GUEST_TMPFS_DIRS = ("/run", "/tmp", "/var/lib/strongswan", "/etc/swanctl", "/var/log")

PROBLEMS, CHECKED, MODPROBE_LOG, CHARON_EXITED = "guest-problems", "guest-checked", "guest-modprobe.log", "charon-exited"
BOOT_REPORTS = (PROBLEMS, CHECKED, MODPROBE_LOG, CHARON_EXITED, "guest-ready", "charon.log", "charon.stdout")


def stable_mac(gateway: str, device: str) -> str:
    """A locally administered unicast MAC that stays the same across the guest's reboots."""
    digest = hashlib.sha256(f"{gateway}/{device}".encode()).digest()
    return ":".join(f"{b:02x}" for b in (0x02, *digest[:5]))


def kernel_release() -> str:
    return sorted(p.name for p in UML_MODULES.iterdir())[-1]


@dataclass(frozen=True)
class GuestAddrs:
    ns_ip: str
    guest_ip: str
    prefix: int

    @classmethod
    def from_subnet(cls, net: ipaddress.IPv4Network) -> GuestAddrs:
        hosts = list(net.hosts())
        return cls(str(hosts[0]), str(hosts[1]), net.prefixlen)


@dataclass(frozen=True)
class GuestPrereqs:
    """What the init insists on before it starts charon (tests inject missing ones)."""

    modules: tuple[str, ...] = GUEST_MODULES
    commands: dict[str, str] = field(default_factory=lambda: dict(GUEST_COMMANDS))


def host_paths_to_share(paths: list[Path]) -> list[Path]:
    """The paths the guest needs from the host that its tmpfs mounts would hide.

    The guest runs this package with the host's Python: a checkout or virtualenv under
    /tmp or /run (a CI clone, say) would vanish under the guest's tmpfs without these."""
    hidden = sorted(
        {p for p in paths if any(p == Path(d) or Path(d) in p.parents for d in GUEST_TMPFS_DIRS)},
        key=lambda p: len(p.parts),
    )
    outer: list[Path] = []
    for p in hidden:
        if not any(o == p or o in p.parents for o in outer):
            outer.append(p)
    return outer


def _checks(prereqs: GuestPrereqs, python: str) -> list[str]:
    q = shlex.quote
    lines = [
        f"command -v {q(c)} >/dev/null 2>&1 || problem {q(f'missing command {c}: install the Debian package {pkg} (.ci/install-deps installs it)')}"
        for c, pkg in prereqs.commands.items()
    ]
    lines.append(f"[ -x {q(python)} ] || problem {q(f'missing Python {python} (shared from the host over hostfs)')}")
    lines += [
        "if command -v modprobe >/dev/null 2>&1; then",
        f"  for m in {' '.join(q(m) for m in prereqs.modules)}; do",
        f"    if ! err=$(modprobe -d /tmp/modroot \"$m\" 2>&1); then",
        f"      echo \"$m: $err\" >>/run/gw/{MODPROBE_LOG}",
        f"      problem \"kernel module $m did not load: $err (modules come from {UML_MODULES}, package user-mode-linux)\"",
        "    fi",
        "  done",
        "fi",
        f"if [ $problems = 0 ]; then echo ok >/run/gw/{CHECKED}; else",
        f"  echo failed >/run/gw/{CHECKED}",
        "  while :; do sleep 3600; done",
        "fi",
    ]
    return lines


def render_init(cfg: GatewayConfig, addrs: GuestAddrs, python: str, prereqs: GuestPrereqs = GuestPrereqs()) -> str:
    rel = kernel_release()
    shared = host_paths_to_share([Path(sys.prefix).resolve(), Path(__file__).resolve().parents[2]])
    lines = [
        "#!/bin/sh",
        "# generated by supergw-gateway: init of a UML gateway guest",
        "export PATH=/usr/sbin:/usr/bin:/sbin:/bin",
        "problems=0",
        # On the console (uml.console) too: before /run/gw is mounted it is the only witness.
        f'problem() {{ echo "supergw guest: $*"; echo "$*" >>/run/gw/{PROBLEMS} 2>/dev/null; problems=1; }}',
        "mount -t proc proc /proc",
        "mount -t sysfs sys /sys",
        f"for d in {' '.join(GUEST_TMPFS_DIRS)}; do mount -t tmpfs tmpfs $d; done",
        *(f"mkdir -p {p} && mount -r -t hostfs none {p} -o {p}" for p in shared),
        # Without the run directory the host learns nothing: dying shows the console to the host.
        f"mkdir -p /run/gw && mount -t hostfs none /run/gw -o {cfg.run_dir} || {{ problem 'cannot mount {cfg.run_dir}'; exit 1; }}",
        f"mkdir -p /tmp/modroot/lib/modules/{rel}",
        f"mount -t hostfs none /tmp/modroot/lib/modules/{rel} -o {UML_MODULES / rel}",
        *_checks(prereqs, python),
        "ip link set lo up",
    ]
    devices = [(f"vec{i}", itf.device) for i, itf in enumerate(cfg.interfaces)]
    devices.append((f"vec{len(cfg.interfaces)}", MGMT_GUEST_DEV))
    for vec, name in devices:
        lines.append(f"ip link set {vec} name {name}")
        # UML picks a random MAC per boot: a restarted gateway would be unreachable to peers
        # until their ARP entry for it went stale.
        lines.append(f"ip link set {name} address {stable_mac(cfg.name, name)}")
    if cfg.ipv6:
        lines += [f"sysctl -qw {key}" for key in IPV6_SYSCTLS]
    for itf in cfg.interfaces:
        if itf.mtu:
            lines.append(f"ip link set {itf.device} mtu {itf.mtu}")
        lines.append(f"ip addr add {itf.address} dev {itf.device}")
        lines += [f"ip -6 addr add {a6} dev {itf.device} nodad" for a6 in itf.addresses6]
        lines.append(f"ip link set {itf.device} up")
    lines += [
        f"ip addr add {addrs.guest_ip}/{addrs.prefix} dev {MGMT_GUEST_DEV}",
        f"ip link set {MGMT_GUEST_DEV} up",
    ]
    for r in cfg.routes:
        lines.append(f"ip route add {r.destination} via {r.via}")
    lines += [
        "sysctl -qw net.ipv4.ip_forward=1",
        f"{python} -m supergw_gateway.guestd --listen {addrs.guest_ip}:{EXEC_PORT} >>/run/gw/guestd.log 2>&1 &",
        f"STRONGSWAN_CONF=/run/gw/strongswan.conf {CHARON} >>/run/gw/charon.stdout 2>&1 &",
        "charon=$!",
        "echo $charon >/run/charon.pid",
        "echo up >/run/gw/guest-ready",
        # The host stops waiting for VICI as soon as this file appears.
        "wait $charon",
        f"echo $? >/run/gw/{CHARON_EXITED}",
        "while :; do sleep 3600; done",
    ]
    return "\n".join(lines) + "\n"


def _tail(path: Path, lines: int) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join("    " + line for line in text.strip().splitlines()[-lines:])


def boot_failure(run_dir: Path) -> str | None:
    """Why the guest cannot come up, from what its init wrote; None while nothing is wrong."""
    try:
        checked = (run_dir / CHECKED).read_text().strip()
    except OSError:
        checked = ""
    if checked == "failed":
        problems = (run_dir / PROBLEMS).read_text(errors="replace").strip().splitlines()
        msg = "its init found missing prerequisites:\n" + "\n".join(f"  - {p}" for p in problems)
        if any("missing command modprobe" in p for p in problems):
            msg += "\nno kernel module (esp4, xfrm_user, ...) can load without modprobe: install kmod (.ci/install-deps)"
        if log := _tail(run_dir / MODPROBE_LOG, 8):
            msg += f"\nlast lines of {run_dir / MODPROBE_LOG}:\n{log}"
        return msg
    try:
        status = (run_dir / CHARON_EXITED).read_text().strip()
    except OSError:
        return None
    if not status:  # written, not yet flushed
        return None
    msg = f"charon exited during boot (status {status})"
    log = _tail(run_dir / "charon.log", 12) or _tail(run_dir / "charon.stdout", 12)
    if "kernel-ipsec" in log:
        msg += (": it found no kernel IPsec backend, so the guest kernel's XFRM modules (esp4, xfrm_user)"
                " are not loaded; check that kmod and user-mode-linux are installed (.ci/install-deps)")
    if log:
        msg += f"\nlast lines of {run_dir / 'charon.log'}:\n{log}"
    return msg
