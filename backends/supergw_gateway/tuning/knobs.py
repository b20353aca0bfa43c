"""Knob kinds: how to read and write one tunable where a gateway's kernel is.

A knob is data (kind + params + target), so the state file can hold it and revert works
without recomputing the profile. Reading returns None when the knob is not available there,
with the reason.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from supergw_gateway.executor import Executor


@dataclass(frozen=True)
class Knob:
    kind: str
    params: dict[str, str]
    target: str
    why: str  # the paper section / reason this knob is in the profile
    scope: str  # "namespace <ns>", "device <dev>", "host", "uml guest <name>"
    group: str = ""  # its group (tuning/groups.py); "" in records written before groups existed

    @property
    def key(self) -> str:
        return f"{self.kind}:" + ",".join(f"{k}={v}" for k, v in sorted(self.params.items()))

    @property
    def label(self) -> str:
        """What it is, for people: kind and the parameters that name it (`sysctl key=...`)."""
        shown = " ".join(f"{a}={b}" for a, b in sorted(self.params.items())
                         if a not in ("where", "want", "floor", "follows"))
        return f"{self.kind} {shown}".strip()

    @property
    def where(self) -> str:
        """Which kernel holds it: "here" (the gateway's), "outer" (the namespace around a UML
        guest), "host" (the machine), or a reason it has no place ("nowhere", "undeclared")."""
        return self.params.get("where", "here")

    def satisfied(self, value: str | None) -> bool:
        """Whether `value` already meets the target: equal, or for a floor (a buffer size or a
        queue length, `floor=1`) at least as large: the profile never shrinks what a machine has."""
        if value is not None and self.params.get("floor") == "1" and value.isdigit() and self.target.isdigit():
            return int(value) >= int(self.target)
        return equal(self.kind, value, self.target)

    @classmethod
    def from_entry(cls, e: Mapping[str, object]) -> Knob:
        """A knob from a record entry (the fields of `asdict(knob)`, plus the entry's own)."""
        params = e["params"]
        if not isinstance(params, dict) or e["kind"] not in HANDLERS:
            raise ValueError(f"not a knob: {dict(e)!r}")
        return cls(str(e["kind"]), {str(k): str(v) for k, v in params.items()}, str(e["target"]),
                   str(e["why"]), str(e["scope"]), str(e.get("group", "")))


@dataclass(frozen=True)
class Reading:
    value: str | None
    reason: str = ""


class Handler(Protocol):
    def read(self, ex: Executor, p: dict[str, str]) -> Reading: ...
    def write(self, ex: Executor, p: dict[str, str], value: str) -> str | None:
        """Returns None on success, else the reason it failed."""
        ...


def _norm_ws(s: str) -> str:
    return " ".join(s.split())


def _err(res_stderr: str, res_stdout: str = "") -> str:
    return (res_stderr.strip() or res_stdout.strip() or "failed").splitlines()[-1]


class Sysctl:
    def read(self, ex: Executor, p: dict[str, str]) -> Reading:
        r = ex.run(["sysctl", "-n", p["key"]], check=False)
        if r.returncode != 0:
            return Reading(None, f"not available in {ex.where}: {_err(r.stderr)}")
        return Reading(_norm_ws(r.stdout))

    def write(self, ex: Executor, p: dict[str, str], value: str) -> str | None:
        r = ex.run(["sysctl", "-qw", f"{p['key']}={value}"], check=False)
        if r.returncode != 0:
            return f"read-only in {ex.where}: {_err(r.stderr)}"
        now = self.read(ex, p).value
        if now != _norm_ws(value):
            return f"{ex.where} kept {now!r} after writing {value!r}"
        return None


class SysfsFile:
    """A file under /sys (RPS masks, NAPI knobs); path relative to /sys/class/net."""

    def read(self, ex: Executor, p: dict[str, str]) -> Reading:
        r = ex.run(["cat", f"/sys/class/net/{p['path']}"], check=False)
        if r.returncode != 0:
            return Reading(None, f"not supported: {_err(r.stderr)}")
        return Reading(_norm_ws(r.stdout))

    def write(self, ex: Executor, p: dict[str, str], value: str) -> str | None:
        path = shlex.quote(f"/sys/class/net/{p['path']}")
        r = ex.run(["sh", "-c", f"echo {shlex.quote(value)} > {path}"], check=False)
        return None if r.returncode == 0 else f"not writable: {_err(r.stderr)}"


_MASK_RE = re.compile(r"^[0-9a-f,]+$")


def mask_equal(a: str, b: str) -> bool:
    if _MASK_RE.match(a) and _MASK_RE.match(b):
        return int(a.replace(",", ""), 16) == int(b.replace(",", ""), 16)
    return a == b


class EthtoolFeature:
    """ethtool -k/-K: offloads such as gro, gso, tso."""

    NAMES = {"gro": "generic-receive-offload", "gso": "generic-segmentation-offload",
             "tso": "tcp-segmentation-offload", "rx-gro-list": "rx-gro-list"}

    def read(self, ex: Executor, p: dict[str, str]) -> Reading:
        r = ex.run(["ethtool", "-k", p["dev"]], check=False)
        if r.returncode != 0:
            return Reading(None, f"ethtool -k {p['dev']}: {_err(r.stderr, r.stdout)}")
        name = self.NAMES.get(p["feature"], p["feature"])
        for line in r.stdout.splitlines():
            if line.strip().startswith(name + ":"):
                rest = line.split(":", 1)[1].split()
                if "[fixed]" in line:
                    return Reading(None, f"{p['feature']} is fixed {rest[0]} on {p['dev']}")
                return Reading(rest[0])
        return Reading(None, f"{p['dev']} has no {name}")

    def write(self, ex: Executor, p: dict[str, str], value: str) -> str | None:
        r = ex.run(["ethtool", "-K", p["dev"], p["feature"], value], check=False)
        if r.returncode != 0:
            return f"ethtool -K {p['dev']} {p['feature']}: {_err(r.stderr, r.stdout)}"
        return None


class EthtoolCoalesce:
    """ethtool -c/-C: interrupt coalescing (§5.2)."""

    def read(self, ex: Executor, p: dict[str, str]) -> Reading:
        r = ex.run(["ethtool", "-c", p["dev"]], check=False)
        if r.returncode != 0:
            return Reading(None, f"interrupt coalescing not supported by {p['dev']}: {_err(r.stderr, r.stdout)}")
        for line in r.stdout.splitlines():
            k, _, v = line.partition(":")
            if k.strip() == p["param"]:
                v = v.strip()
                if v in ("n/a", ""):
                    return Reading(None, f"{p['param']} not supported by {p['dev']}")
                return Reading(v)
        return Reading(None, f"{p['dev']} reports no {p['param']}")

    def write(self, ex: Executor, p: dict[str, str], value: str) -> str | None:
        r = ex.run(["ethtool", "-C", p["dev"], p["param"], value], check=False)
        return None if r.returncode == 0 else f"ethtool -C {p['dev']}: {_err(r.stderr, r.stdout)}"


class LinkMtu:
    def read(self, ex: Executor, p: dict[str, str]) -> Reading:
        r = ex.run(["ip", "-d", "-o", "link", "show", p["dev"]], check=False)
        if r.returncode != 0:
            return Reading(None, f"no device {p['dev']}")
        m = re.search(r" mtu (\d+)", r.stdout)
        mx = re.search(r" maxmtu (\d+)", r.stdout)
        if mx and int(p.get("want", "0")) > int(mx.group(1)):
            return Reading(None, f"{p['dev']} max MTU is {mx.group(1)}")
        return Reading(m.group(1) if m else None, "" if m else "mtu not reported")

    def write(self, ex: Executor, p: dict[str, str], value: str) -> str | None:
        r = ex.run(["ip", "link", "set", "dev", p["dev"], "mtu", value], check=False)
        return None if r.returncode == 0 else f"ip link set {p['dev']} mtu {value}: {_err(r.stderr)}"


class MssClamp:
    """A TCPMSS rule in mangle/FORWARD; value is the MSS or "absent"."""

    def _ipt(self, ex: Executor) -> str | None:
        for tool in ("iptables-legacy", "iptables"):
            if ex.run(["sh", "-c", f"command -v {tool}"], check=False).returncode == 0:
                return tool
        return None

    def _rule(self, mss: str) -> list[str]:
        return ["FORWARD", "-p", "tcp", "--tcp-flags", "SYN,RST", "SYN", "-j", "TCPMSS", "--set-mss", mss]

    def read(self, ex: Executor, p: dict[str, str]) -> Reading:
        tool = self._ipt(ex)
        if tool is None:
            return Reading(None, f"iptables is not installed in {ex.where}")
        r = ex.run([tool, "-t", "mangle", "-S", "FORWARD"], check=False)
        if r.returncode != 0:
            return Reading(None, f"netfilter mangle table unavailable in {ex.where}: {_err(r.stderr)}")
        m = re.search(r"-j TCPMSS --set-mss (\d+)", r.stdout)
        return Reading(m.group(1) if m else "absent")

    def write(self, ex: Executor, p: dict[str, str], value: str) -> str | None:
        tool = self._ipt(ex)
        if tool is None:
            return "iptables is not installed"
        cur = self.read(ex, p).value
        if cur is not None and cur != "absent":
            ex.run([tool, "-t", "mangle", "-D", *self._rule(cur)], check=False)
        if value == "absent":
            return None
        r = ex.run([tool, "-t", "mangle", "-A", *self._rule(value)], check=False)
        return None if r.returncode == 0 else f"TCPMSS rule: {_err(r.stderr)}"


HANDLERS: dict[str, Handler] = {
    "sysctl": Sysctl(),
    "sysfs": SysfsFile(),
    "ethtool-feature": EthtoolFeature(),
    "ethtool-coalesce": EthtoolCoalesce(),
    "mtu": LinkMtu(),
    "mss-clamp": MssClamp(),
}


def equal(kind: str, a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return a == b
    if kind == "sysfs":
        return mask_equal(a, b)
    return _norm_ws(a) == _norm_ws(b)


@dataclass
class KnobSet:
    knobs: list[Knob] = field(default_factory=list)

    def add(self, group: str, kind: str, target: str, why: str, scope: str, **params: str) -> None:
        self.knobs.append(Knob(kind, dict(params), target, why, scope, group))
