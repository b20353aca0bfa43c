"""Tuning planning, apply and revert against an in-memory kernel (no root needed)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from supergw_gateway.executor import Result
from supergw_gateway.tuning import plan as tplan
from supergw_gateway.tuning.profile import TCP_BUF, ProfileInput, build


@dataclass
class MemKernel:
    """Just enough of sysctl, ethtool, sysfs and iptables for the planner."""

    where: str = "netns test"
    sysctl: dict[str, str] = field(default_factory=lambda: {
        "net.ipv4.ip_forward": "0", "net.ipv4.udp_rmem_min": "4096", "net.ipv4.tcp_rmem": "4096\t131072\t6291456",
        "net.ipv4.tcp_wmem": "4096 16384 4194304", "net.ipv4.tcp_window_scaling": "1",
        "net.ipv4.tcp_timestamps": "0", "net.ipv4.tcp_sack": "1",
    })
    readonly: set[str] = field(default_factory=set)
    features: dict[str, str] = field(default_factory=lambda: {"gro": "off", "gso": "on", "tso": "on"})
    sysfs: dict[str, str] = field(default_factory=lambda: {
        "eth0/napi_defer_hard_irqs": "0", "eth0/gro_flush_timeout": "0", "eth0/queues/rx-0/rps_cpus": "0"})
    mss: str | None = None

    def run(self, argv: list[str], check: bool = True, timeout: float = 30.0) -> Result:
        cmd = argv[0]
        if cmd == "sysctl" and argv[1] == "-n":
            v = self.sysctl.get(argv[2])
            return Result(0, v + "\n", "") if v is not None else Result(255, "", f"cannot stat {argv[2]}")
        if cmd == "sysctl" and argv[1] == "-qw":
            k, _, v = argv[2].partition("=")
            if k in self.readonly or k not in self.sysctl:
                return Result(255, "", f"permission denied on key {k}")
            self.sysctl[k] = v
            return Result(0, "", "")
        if cmd == "ethtool" and argv[1] == "-k":
            names = {"gro": "generic-receive-offload", "gso": "generic-segmentation-offload",
                     "tso": "tcp-segmentation-offload"}
            return Result(0, "".join(f"{names[f]}: {v}\n" for f, v in self.features.items()), "")
        if cmd == "ethtool" and argv[1] == "-K":
            self.features[argv[3]] = argv[4]
            return Result(0, "", "")
        if cmd == "ethtool" and argv[1] == "-c":
            return Result(1, "", "netlink error: Operation not supported")
        if cmd == "cat":
            rel = argv[1].removeprefix("/sys/class/net/")
            return Result(0, self.sysfs[rel] + "\n", "") if rel in self.sysfs else Result(1, "", "No such file")
        if cmd == "sh" and argv[2].startswith("command -v"):
            return Result(0, "/usr/sbin/iptables\n", "")
        if cmd == "sh" and argv[2].startswith("echo "):
            val, path = argv[2][5:].split(" > ")
            self.sysfs[path.strip("'").removeprefix("/sys/class/net/")] = val.strip("'")
            return Result(0, "", "")
        if cmd.startswith("iptables"):
            if "-S" in argv:
                rule = f"-A FORWARD -j TCPMSS --set-mss {self.mss}\n" if self.mss else ""
                return Result(0, "-P FORWARD ACCEPT\n" + rule, "")
            if "-A" in argv:
                self.mss = argv[-1]
            if "-D" in argv:
                self.mss = None
            return Result(0, "", "")
        if cmd == "ip":
            return Result(0, "2: eth0: <UP> mtu 1500 qdisc noqueue maxmtu 65535\n", "")
        return Result(127, "", f"{cmd}: unknown")


def _gateway_input(**kw: object) -> ProfileInput:
    base: dict[str, object] = dict(role="gateway", where="netns test", whole_kernel=False, devices=["eth0"], cpus=2,
                                   wan_device="eth0")
    base.update(kw)
    return ProfileInput(**base)  # type: ignore[arg-type]


def test_gateway_plan_reports_every_knob() -> None:
    k = MemKernel()
    items = tplan.plan(build(_gateway_input()).knobs, lambda w: k)
    by = {(i.knob.kind, i.knob.params.get("key") or i.knob.params.get("path") or i.knob.params.get("feature")
           or i.knob.params.get("param") or i.knob.kind): i for i in items}
    assert by[("sysctl", "net.ipv4.ip_forward")].status == "change"
    assert by[("sysctl", "net.core.rmem_default")].status == "unsupported"
    assert "host-wide" in by[("sysctl", "net.core.rmem_default")].reason
    assert by[("ethtool-coalesce", "rx-usecs")].status == "unsupported"
    assert "Operation not supported" in by[("ethtool-coalesce", "rx-usecs")].reason
    assert by[("ethtool-feature", "gro")].status == "change"
    assert by[("ethtool-feature", "gso")].status == "ok"
    assert by[("sysfs", "eth0/queues/rx-0/rps_cpus")].knob.target == "3"
    assert by[("mtu", "mtu")].status == "unsupported" and "--mtu" in by[("mtu", "mtu")].reason
    assert by[("mss-clamp", "mss-clamp")].knob.target == str(1500 - 65 - 40)
    assert all(i.line() for i in items)


def test_libipsec_mss_follows_tun_mtu() -> None:
    mss = next(k for k in build(_gateway_input(libipsec=True)).knobs if k.kind == "mss-clamp")
    assert mss.target == "1360"


def test_uml_guest_owns_host_wide_knobs() -> None:
    knobs = build(_gateway_input(whole_kernel=True, where="uml guest g")).knobs
    assert all(k.params["where"] == "here" for k in knobs if k.kind == "sysctl")


def test_apply_then_revert_restores_everything(tmp_path: Path) -> None:
    k = MemKernel()
    before = (dict(k.sysctl), dict(k.features), dict(k.sysfs), k.mss)
    knobs = build(_gateway_input()).knobs
    state = tmp_path / "tune.json"
    applied = tplan.apply(knobs, lambda w: k, state, "gw", "gateway")
    assert {i.status for i in applied} <= {"applied", "ok", "unsupported"}
    assert k.sysctl["net.ipv4.ip_forward"] == "1" and k.features["gro"] == "on" and k.mss == "1395"
    assert all(i.status != "drift" for i in tplan.verify(knobs, lambda w: k))
    # A second apply changes nothing and keeps the original previous values.
    again = tplan.apply(knobs, lambda w: k, state, "gw", "gateway")
    assert not [i for i in again if i.status == "applied"]
    reverted = tplan.revert(lambda w: k, state)
    assert {i.status for i in reverted} == {"restored"}
    assert (dict(k.sysctl), dict(k.features), dict(k.sysfs), k.mss) == before
    assert not state.exists()


def test_readonly_knob_fails_visibly(tmp_path: Path) -> None:
    k = MemKernel(readonly={"net.ipv4.tcp_timestamps"})
    inp = ProfileInput(role="endpoint", where="netns h", whole_kernel=False)
    items = tplan.apply(build(inp).knobs, lambda w: k, tmp_path / "s.json", "gw", "endpoint")
    failed = [i for i in items if i.status == "failed"]
    assert [i.knob.params["key"] for i in failed] == ["net.ipv4.tcp_timestamps"]
    assert "read-only" in failed[0].reason
    assert k.sysctl["net.ipv4.tcp_rmem"] == TCP_BUF


def test_revert_without_state_is_clear(tmp_path: Path) -> None:
    import pytest

    from supergw_gateway.errors import GatewayError

    with pytest.raises(GatewayError, match="nothing to revert"):
        tplan.revert(lambda w: MemKernel(), tmp_path / "none.json")
