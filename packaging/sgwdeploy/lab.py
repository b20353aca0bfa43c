"""The deployed site of docs/deploy-linux.md, as `make deploy-test` builds and drives it.

Machines (each a fresh Debian 12 with its own systemd and network namespace):
  sw    the switch box: supergw-switch on p1, p2 (LAN hosts) and p11, p12 (gateways)
  ctl   the controller box: supergw-controller, REST API on 10.255.70.3:8080
  gw1, gw2      gateway boxes: supergw-gateway@gwN + supergw-gateway-agent@gwN
  peer1, peer2  the remote site's gateways: supergw-gateway@peerN (responders, no agent)
Hosts (plain namespaces, like the emulation's): h1, h2 on the LAN; r1 (via peer1) and
r2 (via peer2) on the remote LAN. Management: sw, ctl, gw1, gw2 on one bridge.

The configs are packaging/example-site/ (the files the guide shows), secrets filled in
here; the switch's port map and the gateways' LAN MACs are read from those files. REST and
P4Runtime run over TLS, as those files say, with certificates `supergw-gateway pki` issues
on gw1 (standing in for the operator's CA box: it has the command and strongswan-pki).
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
import string
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from sgwdeploy import network
from sgwdeploy.host import DeployError, say, sh, stage, wait_for
from sgwdeploy.machine import Machine
from sgwdeploy.network import End

PACKAGING = Path(__file__).resolve().parent.parent
SITE = PACKAGING / "example-site"
OPERATOR_TOKEN = "/etc/supergw/controller/operator.token"
TLS_DIR = "/etc/supergw/tls"
CA_BOX, PKI_DIR = "gw1", "/root/supergw-pki"
MGMT = {"sw": "10.255.70.2/24", "ctl": "10.255.70.3/24", "gw1": "10.255.70.11/24", "gw2": "10.255.70.12/24"}
LAN_HOSTS = {"h1": (1, "10.70.0.11/24"), "h2": (2, "10.70.0.12/24")}  # switch port, address
REMOTE_HOSTS = {"r1": ("10.71.0.11/24", "peer1"), "r2": ("10.71.0.12/24", "peer2")}  # address, via
GATEWAYS = ("gw1", "gw2")
PEERS = {"gw1": "peer1", "gw2": "peer2"}
PACKAGE_OF = {"sw": "supergw-switch", "ctl": "supergw-controller", "gw1": "supergw-gateway", "gw2": "supergw-gateway",
              "peer1": "supergw-gateway", "peer2": "supergw-gateway"}
# Our packages an operator installs beside a box's own: supergwctl where the guide runs it.
ALSO = {"ctl": ["supergw-proto"]}
# Debian packages an operator installs beside ours (none: the guide's recipes use supergwctl).
EXTRA: dict[str, list[str]] = {}


def _ip(box: str) -> str:
    return MGMT[box].split("/")[0]


# The site's certificates (docs/deploy-linux.md, "Certificates"): the switch's P4Runtime
# server at its management address, the controller's REST API at its own and at 127.0.0.1
# (supergwctl on the box), the controller's P4Runtime client certificate.
PKI_COMMAND = ("supergw-gateway", "pki", "--out", PKI_DIR, "--server", f"p4rt-sw={_ip('sw')}",
               "--server", f"rest-ctl={_ip('ctl')},127.0.0.1", "--client", "p4rt-controller")
# box -> the files of PKI_DIR copied into its TLS_DIR, and the user that reads its keys.
TLS_FILES = {
    "sw": (("ca.crt", "p4rt-sw.crt", "p4rt-sw.key"), "root"),
    "ctl": (("ca.crt", "rest-ctl.crt", "rest-ctl.key", "p4rt-controller.crt", "p4rt-controller.key"), "supergw"),
    **{gw: (("ca.crt",), "root") for gw in GATEWAYS},
}
# What supergwctl needs on the controller box (the guide's checklist exports the same).
SUPERGWCTL_ENV = (f"SUPERGW_TOKEN_FILE={OPERATOR_TOKEN}", "SUPERGW_URL=https://127.0.0.1:8080",
                  f"SUPERGW_CA_FILE={TLS_DIR}/ca.crt")


def packages_of(box: str) -> list[str]:
    """Our packages installed on `box`, as the guide's "Install the packages" says."""
    return [PACKAGE_OF[box], *ALSO.get(box, [])]


ALL_PACKAGES = {p for box in PACKAGE_OF for p in packages_of(box)}


def switch_ports() -> dict[int, str]:
    """P4 port -> interface, from the example switch.env (SUPERGW_SWITCH_PORTS)."""
    text = (SITE / "switch.env").read_text()
    m = re.search(r'^SUPERGW_SWITCH_PORTS="([^"]*)"', text, re.M)
    if not m:
        raise DeployError(f"{SITE / 'switch.env'}: no SUPERGW_SWITCH_PORTS line")
    return {int(p): i for p, i in re.findall(r"-i (\d+)@(\S+)", m[1])}


def controller_config() -> dict[str, Any]:
    data = yaml.safe_load((SITE / "controller.yaml").read_text())
    assert isinstance(data, dict)
    return data


@dataclass(frozen=True)
class Secrets:
    values: dict[str, str] = field(default_factory=dict)

    @classmethod
    def fresh(cls) -> Secrets:
        names = ["PSK_1", "PSK_2", "operator", "viewer", *(f"agent-{g}" for g in GATEWAYS)]
        return cls({n: secrets.token_urlsafe(24) for n in names})


@dataclass
class Ping:
    """`ping` from a LAN host in the background; `stop()` returns what it saw."""

    proc: subprocess.Popen[str]
    interval: float

    def stop(self) -> PingResult:
        self.proc.send_signal(2)  # SIGINT: ping prints its summary
        out, _ = self.proc.communicate(timeout=10)
        return PingResult.parse(out, self.interval)


@dataclass(frozen=True)
class PingResult:
    sent: int
    received: int
    longest_gap_s: float  # between consecutive replies (by sequence number x interval)
    output: str

    @classmethod
    def parse(cls, out: str, interval: float) -> PingResult:
        m = re.search(r"(\d+) packets transmitted, (\d+) received", out)
        if not m:
            raise DeployError(f"ping printed no summary:\n{out[-2000:]}")
        seqs = sorted({int(s) for s in re.findall(r"icmp_seq=(\d+)", out)})
        gaps = [b - a for a, b in zip(seqs, seqs[1:])]
        return cls(int(m[1]), int(m[2]), max(gaps, default=1) * interval, out)

    @property
    def lost(self) -> int:
        return self.sent - self.received


class Site:
    def __init__(self, base: Path, workdir: Path, debs: dict[str, Path], repo: Path) -> None:
        self.workdir = workdir
        self.debs = debs  # package name -> .deb
        self.repo = repo
        self.secrets = Secrets.fresh()
        caps: dict[str, tuple[str, ...]] = {"sw": ("CAP_BPF", "CAP_PERFMON")}
        self.machines = {
            name: Machine(name, network.ns(name), base, workdir / name, [(repo, "/srv/debian")], caps.get(name, ()))
            for name in PACKAGE_OF
        }

    # -- cabling -----------------------------------------------------------------------
    def cable(self) -> None:
        network.remove_all()
        for name in (*self.machines, *LAN_HOSTS, *REMOTE_HOSTS):
            network.add_namespace(name)
        for segment in ("mgmt", "wan", "rlan"):
            network.add_bridge(segment)
        ports = switch_ports()
        links: list[tuple[End, End]] = []
        for host, (port, addr) in LAN_HOSTS.items():
            links.append((End(host, "eth0", address=addr), End("sw", ports[port])))
        for gw in controller_config()["gateways"]:
            links.append((End(gw["name"], "lan0", mac=gw["mac"]), End("sw", ports[gw["port"]])))
        for box, addr in MGMT.items():
            links.append((End(box, "mgmt0", address=addr), End("mgmt", "br0")))
        for box in (*GATEWAYS, *PEERS.values()):
            links.append((End(box, "wan0"), End("wan", "br0")))
        for peer in PEERS.values():
            links.append((End(peer, "lan0"), End("rlan", "br0")))
        for host, (addr, _via) in REMOTE_HOSTS.items():
            links.append((End(host, "eth0", address=addr), End("rlan", "br0")))
        for i, (a, b) in enumerate(links):
            network.cable(i, a, b)
        gateway_ip = controller_config()["gateway_ip"]
        for host in LAN_HOSTS:
            network.ip(host, "route", "add", "default", "via", gateway_ip)
        for host, (_addr, via) in REMOTE_HOSTS.items():
            peer = yaml.safe_load((SITE / f"{via}.yaml").read_text())
            lan = next(i for i in peer["interfaces"] if i["role"] == "lan")["address"].split("/")[0]
            network.ip(host, "route", "add", "default", "via", lan)

    def boot_all(self) -> None:
        """Fresh machines: whatever an earlier run left in their layers is removed first."""
        for m in self.machines.values():
            m.unmount()
        shutil.rmtree(self.workdir, ignore_errors=True)
        for m in self.machines.values():
            m.boot()

    def teardown(self) -> None:
        for m in self.machines.values():
            try:
                m.shutdown()
            finally:
                m.unmount()
        network.remove_all()

    # -- the operator's steps (docs/deploy-linux.md) ------------------------------------
    def render(self, name: str) -> str:
        return string.Template((SITE / name).read_text()).substitute(self.secrets.values)

    def apt_install(self, box: str, debs: list[Path], extra: list[str]) -> None:
        m = self.machines[box]
        m.write("/etc/apt/sources.list", "deb [trusted=yes] file:/srv/debian ./\n")
        m.run(["rm", "-rf", "/etc/apt/sources.list.d"])
        m.run(["mkdir", "-p", "/root/packages"])
        for d in debs:
            (m.root / "root/packages" / d.name).write_bytes(d.read_bytes())
        m.run(["apt-get", "update", "-qq"])
        m.run(["apt-get", "install", "-y", "-qq", *[f"/root/packages/{d.name}" for d in debs], *extra], timeout=900)

    def install(self, box: str) -> None:
        self.apt_install(box, [self.debs[p] for p in packages_of(box)], EXTRA.get(box, []))

    def write_switch_config(self) -> None:
        self.machines["sw"].write("/etc/supergw/switch.env", self.render("switch.env"))

    def write_controller_config(self) -> None:
        ctl = self.machines["ctl"]
        d = "/etc/supergw/controller"
        for name in ("operator", "viewer", *(f"agent-{g}" for g in GATEWAYS)):
            ctl.write(f"{d}/{name}.token", self.secrets.values[name] + "\n", 0o600, owner="supergw")
        ctl.write(f"{d}/controller.yaml", self.render("controller.yaml"), 0o640)
        ctl.run(["chgrp", "supergw", f"{d}/controller.yaml"])

    def issue_certificates(self) -> dict[str, str]:
        """PKI_COMMAND on the CA box; returns what it printed (file name -> path there)."""
        out = self.machines[CA_BOX].run(list(PKI_COMMAND)).stdout
        files = json.loads(out)
        assert isinstance(files, dict)
        return {str(k): str(v) for k, v in files.items()}

    def install_certificates(self, box: str) -> None:
        """Copies the box's files from the CA box into TLS_DIR: keys mode 0600 owned by the
        user that reads them, certificates 0644."""
        names, owner = TLS_FILES[box]
        ca = self.machines[CA_BOX]
        for name in names:
            text = ca.run(["cat", f"{PKI_DIR}/{name}"]).stdout
            key = name.endswith(".key")
            self.machines[box].write(f"{TLS_DIR}/{name}", text, 0o600 if key else 0o644,
                                     owner=owner if key else None)

    def configure_switch(self) -> None:
        self.write_switch_config()
        self.machines["sw"].run(["systemctl", "enable", "--now", "supergw-switch.service"])

    def configure_controller(self) -> None:
        self.write_controller_config()
        self.machines["ctl"].run(["systemctl", "enable", "--now", "supergw-controller.service"])

    def configure_gateway(self, box: str) -> None:
        m = self.machines[box]
        # charon-systemd's postinst started the distribution's charon: it would hold UDP 500/4500.
        m.run(["systemctl", "disable", "--now", "strongswan.service"])
        m.write(f"/etc/supergw/gateway/{box}.yaml", self.render(f"{box}.yaml"), 0o600)
        units = [f"supergw-gateway@{box}.service"]
        if box in GATEWAYS:
            m.write(f"/etc/supergw/gateway/{box}.token", self.secrets.values[f"agent-{box}"] + "\n", 0o600)
            units.append(f"supergw-gateway-agent@{box}.service")
        m.run(["systemctl", "enable", "--now", *units], timeout=180)

    # -- what the test looks at ----------------------------------------------------------
    def supergwctl(self, *argv: str) -> str:
        """`supergwctl ARGV` on the controller box with the operator's token file and the
        site's CA, as the guide runs it; its output."""
        out = self.machines["ctl"].run(["env", *SUPERGWCTL_ENV, "supergwctl", *argv], check=False, timeout=30)
        if out.returncode != 0:
            raise DeployError(f"supergwctl {' '.join(argv)} on ctl: exit {out.returncode}: {out.stderr.strip()}")
        return out.stdout

    def api(self, *argv: str) -> Any:
        """`supergwctl --json ARGV`: the API's answer."""
        return json.loads(self.supergwctl("--json", *argv))

    def gateways(self) -> dict[str, dict[str, Any]]:
        return {g["name"]: g for g in self.api("gateways")}

    def owner(self, host: str) -> str:
        """The gateway that carries `host`'s bucket now."""
        ip = LAN_HOSTS[host][1].split("/")[0]
        for h in self.api("hosts", "--ip", ip)["hosts"]:  # one page (GET /hosts pages since issue 29)
            if h["ip"] == ip and h["gateway"]:
                return str(h["gateway"])
        raise DeployError(f"the controller has not learned {host} ({ip}) or its bucket has no gateway")

    def remote_avoiding(self, gateway: str) -> tuple[str, str]:
        """A remote host whose replies come back through another gateway than `gateway`
        (the remote site routes to the LAN through one fixed peer per host)."""
        for host, (addr, via) in REMOTE_HOSTS.items():
            if via != PEERS[gateway]:
                return host, addr.split("/")[0]
        raise DeployError(f"no remote host answers through another peer than {PEERS[gateway]}")

    def ping(self, host: str, dest: str, interval: float = 0.05) -> Ping:
        proc = subprocess.Popen(["ip", "netns", "exec", network.ns(host), "ping", "-n", "-i", str(interval), dest],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        return Ping(proc, interval)

    def ping_count(self, host: str, dest: str, count: int, interval: float = 0.2) -> PingResult:
        p = sh(["ip", "netns", "exec", network.ns(host), "ping", "-n", "-c", str(count), "-i", str(interval),
                "-W", "1", dest], check=False, timeout=count * interval + 15)
        return PingResult.parse(p.stdout, interval)

    def wait_alive(self, names: list[str], timeout: float = 60) -> None:
        def probe() -> str | None:
            gws = self.gateways()
            bad = {n: gws[n]["state"] for n in names if not gws[n]["alive"]}
            return None if not bad else f"not alive: {bad}"

        wait_for(f"the controller lists {', '.join(names)} alive", probe, timeout)

    def unit_active(self, box: str, unit: str) -> str | None:
        state = self.machines[box].run(["systemctl", "is-active", unit], check=False).stdout.strip()
        return None if state == "active" else f"{unit} on {box} is {state}"

    def journal(self, box: str, unit: str, lines: int = 40) -> str:
        return self.machines[box].run(["journalctl", "-u", unit, "-n", str(lines), "--no-pager"], check=False).stdout

