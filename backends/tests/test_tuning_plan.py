"""Tuning: the profile by group, and plan/apply/revert with its record, against an in-memory
kernel (no root needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from supergw_gateway.errors import GatewayError
from supergw_gateway.tuning import plan as tplan
from supergw_gateway.tuning.groups import GATEWAY_GROUPS, parse_groups
from supergw_gateway.tuning.profile import TCP_BUF, ProfileInput, build
from supergw_gateway.executor import Result
from tests.memkernel import Crash, MemKernel


def _gateway_input(**kw: object) -> ProfileInput:
    base: dict[str, object] = dict(role="gateway", where="netns test", whole_kernel=False, devices=["eth0"], cpus=2,
                                   wan_device="eth0")
    base.update(kw)
    return ProfileInput(**base)  # type: ignore[arg-type]


def _by(items: list[tplan.Item]) -> dict[tuple[str, str], tplan.Item]:
    p = lambda i: i.knob.params  # noqa: E731
    return {(i.knob.kind, p(i).get("key") or p(i).get("path") or p(i).get("feature") or p(i).get("param")
             or i.knob.kind): i for i in items}


def test_gateway_plan_reports_every_knob() -> None:
    k = MemKernel()
    knobs = build(_gateway_input()).knobs
    items = tplan.plan(knobs, lambda w: k)
    assert len(items) == len(knobs), "every knob gets a line, refused ones too"
    by = _by(items)
    assert by[("sysctl", "net.core.rmem_default")].status == "unsupported"
    assert "host-wide" in by[("sysctl", "net.core.rmem_default")].reason
    assert by[("ethtool-coalesce", "rx-usecs")].status == "unsupported"
    assert "Operation not supported" in by[("ethtool-coalesce", "rx-usecs")].reason
    assert by[("ethtool-feature", "gro")].status == "change"
    assert by[("ethtool-feature", "gso")].status == "ok"
    assert by[("sysfs", "eth0/queues/rx-0/rps_cpus")].knob.target == "3"
    assert by[("mtu", "mtu")].status == "unsupported" and "path_mtu" in by[("mtu", "mtu")].reason
    assert by[("mss-clamp", "mss-clamp")].knob.target == str(1500 - 65 - 40)
    assert all(i.line() for i in items)
    assert {kn.group for kn in knobs} == set(GATEWAY_GROUPS)
    assert not any(kn.params.get("key") == "net.ipv4.ip_forward" for kn in knobs), "forwarding is `up`'s, not a knob"


def test_each_group_alone_builds_only_its_knobs() -> None:
    full = build(_gateway_input()).knobs
    for g in GATEWAY_GROUPS:
        alone = build(_gateway_input(groups=(g,))).knobs
        assert alone and {k.group for k in alone} == {g}
        assert [k.key for k in alone] == [k.key for k in full if k.group == g]
    assert parse_groups("all") == ("tcp", *GATEWAY_GROUPS)
    assert parse_groups("mtu,tcp") == ("tcp", "mtu")
    with pytest.raises(ValueError, match="unknown knob group"):
        parse_groups("mtu,jumbo")


def test_declared_jumbo_path_sets_mtu_and_lifts_the_mss_clamp() -> None:
    knobs = build(_gateway_input(groups=("mtu",), path_mtu={"eth0": 9000})).knobs
    mtu = [k for k in knobs if k.kind == "mtu"]
    assert [(k.target, k.where) for k in mtu] == [("9000", "here")]
    assert next(k for k in knobs if k.kind == "mss-clamp").target == str(9000 - 65 - 40)


def test_uml_guest_nic_mtu_goes_on_the_outer_veth_first() -> None:
    knobs = build(_gateway_input(groups=("mtu",), whole_kernel=True, where="uml guest g", outer="netns ns-g",
                                 path_mtu={"eth0": 9000})).knobs
    mtu = [k for k in knobs if k.kind == "mtu"]
    assert [(k.where, k.scope) for k in mtu] == [("outer", "device eth0 in netns ns-g"),
                                                 ("here", "device eth0 in uml guest g")]


def test_endpoint_groups() -> None:
    tcp = build(ProfileInput(role="endpoint", where="netns h", whole_kernel=False, groups=("tcp",))).knobs
    assert {k.group for k in tcp} == {"tcp"} and any(k.target == TCP_BUF for k in tcp)
    mtu = build(ProfileInput(role="endpoint", where="netns h", whole_kernel=False, groups=("mtu",),
                             path_mtu={"eth0": 9000})).knobs
    assert [(k.kind, k.target) for k in mtu] == [("mtu", "9000")]


def test_libipsec_mss_follows_tun_mtu() -> None:
    mss = next(k for k in build(_gateway_input(libipsec=True)).knobs if k.kind == "mss-clamp")
    assert mss.target == "1360"


def test_uml_guest_owns_host_wide_knobs() -> None:
    knobs = build(_gateway_input(whole_kernel=True, where="uml guest g")).knobs
    assert all(k.params["where"] == "here" for k in knobs if k.kind == "sysctl")


def test_apply_then_revert_restores_everything(tmp_path: Path) -> None:
    k = MemKernel()
    before = k.state()
    knobs = build(_gateway_input(path_mtu={"eth0": 9000})).knobs
    state = tmp_path / "tune.json"
    applied = tplan.apply(knobs, lambda w: k, state, "gw", "gateway")
    assert {i.status for i in applied} <= {"applied", "ok", "unsupported"}
    assert k.features["eth0"]["gro"] == "on" and k.mss == str(9000 - 65 - 40) and k.mtu["eth0"] == "9000"
    assert all(i.status != "drift" for i in tplan.verify(knobs, lambda w: k))
    rec = json.loads(state.read_text())
    assert {e["status"] for e in rec["refused"]} == {"unsupported"}
    assert all(e["reason"] for e in rec["refused"])
    # A second apply changes nothing and keeps the original previous values.
    again = tplan.apply(knobs, lambda w: k, state, "gw", "gateway")
    assert not [i for i in again if i.status == "applied"]
    reverted = tplan.revert(lambda w: k, state)
    assert {i.status for i in reverted} == {"restored"}
    assert k.state() == before
    assert not state.exists()


def test_reconcile_restores_knobs_no_longer_asked_for(tmp_path: Path) -> None:
    k = MemKernel()
    before = k.state()
    state = tmp_path / "tuning.json"
    tplan.reconcile(build(_gateway_input()).knobs, lambda w: k, state, "gw", "gateway")
    assert k.features["eth0"]["gro"] == "on" and k.sysfs["eth0/queues/rx-0/rps_cpus"] == "3"
    items = tplan.reconcile(build(_gateway_input(groups=("softirq",))).knobs, lambda w: k, state, "gw", "gateway",
                            groups=["softirq"])
    restored = {i.knob.group for i in items if i.status == "restored"}
    assert restored == {"offloads", "coalescing", "mtu", "esp_socket"}
    assert k.features["eth0"]["gro"] == "off" and k.mss is None
    assert k.sysfs["eth0/queues/rx-0/rps_cpus"] == "3", "the knob still asked for stays"
    rec = tplan.TuneRecord.load(state)
    assert rec is not None and rec.groups == ["softirq"] and {kn.group for kn, _ in rec.knobs()} == {"softirq"}
    tplan.revert(lambda w: k, state)
    assert k.state() == before


def test_crash_in_the_middle_leaves_a_record_that_reverts_it(tmp_path: Path) -> None:
    k = MemKernel(crash_after=3)
    before = k.state()
    state = tmp_path / "tuning.json"
    with pytest.raises(Crash):
        tplan.reconcile(build(_gateway_input()).knobs, lambda w: k, state, "gw", "gateway")
    assert k.writes == 3 and k.state() != before
    rec = tplan.TuneRecord.load(state)
    assert rec is not None and len(rec.entries) == 3, "each previous value is saved before its write"
    k.crash_after = None
    tplan.revert(lambda w: k, state)
    assert k.state() == before and not state.exists()


def test_changes_in_a_replaced_kernel_are_gone_not_written(tmp_path: Path) -> None:
    k = MemKernel()
    state = tmp_path / "tuning.json"
    tplan.reconcile(build(_gateway_input()).knobs, lambda w: k, state, "gw", "gateway", identity={"here": "ns-1"})
    fresh = MemKernel(features={"eth0": {"gro": "on", "gso": "on", "tso": "on"}})  # a namespace made again
    items = tplan.revert(lambda w: fresh, state, identity={"here": "ns-2"})
    assert items and {i.status for i in items} == {"gone"}
    assert fresh.writes == 0 and not state.exists()
    # And a namespace that is gone altogether: the same.
    k2 = MemKernel()
    tplan.reconcile(build(_gateway_input()).knobs, lambda w: k2, state, "gw", "gateway", identity={"here": "ns-1"})
    assert {i.status for i in tplan.revert(lambda w: k2, state, identity={"here": None})} == {"gone"}


def test_failed_restore_stays_on_record(tmp_path: Path) -> None:
    k = MemKernel()
    state = tmp_path / "tuning.json"
    tplan.reconcile(build(_gateway_input(groups=("esp_socket",))).knobs, lambda w: k, state, "gw", "gateway")
    assert k.sysctl["net.ipv4.udp_rmem_min"] == "16384"
    k.readonly.add("net.ipv4.udp_rmem_min")
    items = tplan.revert(lambda w: k, state)
    assert [i.status for i in items] == ["failed"] and "read-only" in items[0].reason
    rec = tplan.TuneRecord.load(state)
    assert rec is not None and [kn.params["key"] for kn, _ in rec.knobs()] == ["net.ipv4.udp_rmem_min"]
    k.readonly.clear()
    assert [i.status for i in tplan.revert(lambda w: k, state)] == ["restored"]
    assert k.sysctl["net.ipv4.udp_rmem_min"] == "4096" and not state.exists()


def test_readonly_knob_fails_visibly(tmp_path: Path) -> None:
    k = MemKernel(readonly={"net.ipv4.tcp_timestamps"})
    inp = ProfileInput(role="endpoint", where="netns h", whole_kernel=False)
    items = tplan.apply(build(inp).knobs, lambda w: k, tmp_path / "s.json", "gw", "endpoint")
    failed = [i for i in items if i.status == "failed"]
    assert [i.knob.params["key"] for i in failed] == ["net.ipv4.tcp_timestamps"]
    assert "read-only" in failed[0].reason
    assert k.sysctl["net.ipv4.tcp_rmem"] == TCP_BUF


def test_revert_without_state_is_clear(tmp_path: Path) -> None:
    with pytest.raises(GatewayError, match="nothing to revert"):
        tplan.revert(lambda w: MemKernel(), tmp_path / "none.json")
    assert tplan.revert(lambda w: MemKernel(), tmp_path / "none.json", missing_ok=True) == []


@pytest.mark.parametrize("text", ["{", '{"gateway": "gw"}', json.dumps(
    {"gateway": "gw", "role": "gateway", "created": 0, "entries": [{"kind": "nonsense", "params": {}}]})])
def test_corrupt_record_is_a_clear_error(tmp_path: Path, text: str) -> None:
    state = tmp_path / "tuning.json"
    state.write_text(text)
    with pytest.raises(GatewayError, match="is corrupt"):
        tplan.revert(lambda w: MemKernel(), state)
    assert state.read_text() == text, "a corrupt record is left for the operator, never overwritten"


def test_outer_veth_mtu_is_refused_when_the_guest_nic_cannot_follow(tmp_path: Path) -> None:
    guest, outer = MemKernel(where="uml guest g", max_mtu=1500), MemKernel(where="netns ns-g")
    kernels = {"here": guest, "outer": outer}
    knobs = build(_gateway_input(groups=("mtu",), whole_kernel=True, where="uml guest g", outer="netns ns-g",
                                 path_mtu={"eth0": 9000})).knobs
    items = tplan.reconcile(knobs, lambda w: kernels[w], tmp_path / "t.json", "g", "gateway")
    by = {i.knob.where: i for i in items if i.knob.kind == "mtu"}
    assert by["here"].status == "unsupported" and "max MTU is 1500" in by["here"].reason
    assert by["outer"].status == "unsupported" and "max MTU is 1500" in by["outer"].reason
    assert outer.mtu["eth0"] == "1500" and outer.writes == 0
    guest2 = MemKernel(where="uml guest g")
    items = tplan.reconcile(knobs, lambda w: {"here": guest2, "outer": outer}[w], tmp_path / "u.json", "g", "gateway")
    assert {i.status for i in items if i.knob.kind == "mtu"} == {"applied"}
    assert (outer.mtu["eth0"], guest2.mtu["eth0"]) == ("9000", "9000")


def test_a_write_the_kernel_ignores_is_a_failure(tmp_path: Path) -> None:
    class Stubborn(MemKernel):
        def run(self, argv: list[str], check: bool = True, timeout: float = 30.0) -> Result:
            if argv[:2] == ["ethtool", "-K"]:
                return Result(0, "", "")  # says yes, changes nothing (a fixed feature on some drivers)
            return super().run(argv, check, timeout)

    k = Stubborn()
    items = tplan.reconcile(build(_gateway_input(groups=("offloads",))).knobs, lambda w: k, tmp_path / "t.json",
                            "gw", "gateway")
    (gro,) = [i for i in items if i.knob.params.get("feature") == "gro"]
    assert gro.status == "failed" and gro.reason == "reads 'off' after writing 'on'"
