"""The tuning profile in the gateway's lifecycle (`up` applies, `down` restores exactly the
record), host-wide knobs held by reference among gateways, the config section, and what
/health and the reports say; against in-memory kernels (no root needed)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from supergw_gateway.config import GatewayConfig, parse_config
from supergw_proto.reports import GatewayReport, TuningState
from supergw_gateway.errors import ConfigError, GatewayError
from supergw_gateway.tuning import lifecycle
from supergw_gateway.tuning.cli import groups_for
from supergw_gateway.tuning.hostwide import HostKnobs
from supergw_gateway.tuning.knobs import Knob
from tests.memkernel import Crash, MemKernel

HOST_SYSCTLS = {"net.core.rmem_default": "212992", "net.core.rmem_max": "212992", "net.core.wmem_max": "212992",
                "net.core.netdev_max_backlog": "1000", "net.core.netdev_budget": "300"}


def _host() -> MemKernel:
    return MemKernel(where="host", sysctl=dict(HOST_SYSCTLS), devices=())


def _cfg(gw_dict: dict[str, Any], tmp_path: Path, name: str = "gw1", **tuning: Any) -> GatewayConfig:
    d = copy.deepcopy(gw_dict)
    d["name"] = name
    d["state_dir"] = str(tmp_path)
    d["tuning"] = tuning
    return parse_config(d)


class Rig:
    """One gateway: its namespace kernel, the shared host, the host record."""

    def __init__(self, cfg: GatewayConfig, host: MemKernel, host_record: Path, ns: MemKernel | None = None) -> None:
        self.cfg, self.host = cfg, host
        self.ns = ns or MemKernel(where=f"netns {cfg.netns}", devices=("lan0", "wan0"))
        self.hosts = HostKnobs(host, host_record)

    def tuning(self, alive: bool = True) -> lifecycle.GatewayTuning:
        target = lifecycle.Target(here=self.ns, whole_kernel=False, libipsec=True, here_alive=alive, host=self.host)
        return lifecycle.GatewayTuning(self.cfg, target, self.hosts)


@pytest.fixture
def host() -> MemKernel:
    return _host()


def test_up_applies_records_refusals_and_down_restores_exactly(gw_dict: dict[str, Any], tmp_path: Path,
                                                                host: MemKernel) -> None:
    cfg = _cfg(gw_dict, tmp_path, enabled=True)
    rig = Rig(cfg, host, tmp_path / "host.json")
    before = rig.ns.state(), host.state()
    items = rig.tuning().up()
    assert {i.status for i in items} <= {"applied", "ok", "unsupported"}
    assert rig.ns.features["wan0"]["gro"] == "on" and rig.ns.mss == "1360"
    assert host.state() == before[1], "host-wide knobs stay untouched without tuning.host_wide"
    h = lifecycle.health(cfg)
    refused = {r["knob"]: r for r in h["refused"]}  # type: ignore[attr-defined]
    assert "sysctl key=net.core.rmem_default" in refused
    assert "host-wide" in refused["sysctl key=net.core.rmem_default"]["reason"]
    assert any("Operation not supported" in r["reason"] for r in refused.values())
    assert any("path MTU not declared" in r["reason"] for r in refused.values())
    applied = {a["knob"]: a for a in h["applied"]}  # type: ignore[attr-defined]
    assert applied["ethtool-feature dev=wan0 feature=gro"]["previous"] == "off"
    s = lifecycle.summary(cfg)
    assert s is not None and s.enabled and s.applied == len(applied) and s.refused == len(refused) and s.failed == 0
    # `up` again (a restart of the agent, a re-applied config) changes nothing.
    assert not [i for i in rig.tuning().up() if i.status == "applied"]
    down = rig.tuning().down()
    assert {i.status for i in down} == {"restored"}
    assert (rig.ns.state(), host.state()) == before
    assert not lifecycle.record_path(cfg).exists()
    assert lifecycle.health(cfg)["state"] == "not applied yet (`supergw-gateway up` applies it)"


def test_crashed_up_is_reverted_by_down(gw_dict: dict[str, Any], tmp_path: Path, host: MemKernel) -> None:
    cfg = _cfg(gw_dict, tmp_path, enabled=True)
    rig = Rig(cfg, host, tmp_path / "host.json")
    before = rig.ns.state()
    rig.ns.crash_after = 4
    with pytest.raises(Crash):
        rig.tuning().up()
    assert rig.ns.state() != before and lifecycle.record_path(cfg).exists()
    rig.ns.crash_after = None
    rig.tuning().down()
    assert rig.ns.state() == before


def test_up_with_tuning_off_restores_what_an_earlier_up_did(gw_dict: dict[str, Any], tmp_path: Path,
                                                            host: MemKernel) -> None:
    rig = Rig(_cfg(gw_dict, tmp_path, enabled=True, knobs=["offloads"]), host, tmp_path / "host.json")
    before = rig.ns.state()
    rig.tuning().up()
    assert rig.ns.state() != before
    off = _cfg(gw_dict, tmp_path, enabled=False)
    assert "remains" in str(lifecycle.health(off)["state"])
    rig.cfg = off
    assert {i.status for i in rig.tuning().up()} == {"restored"}
    assert rig.ns.state() == before
    assert lifecycle.summary(off) == TuningState(enabled=False, groups=[], applied=0, refused=0, failed=0)


def test_down_after_the_namespace_is_gone_drops_the_record(gw_dict: dict[str, Any], tmp_path: Path,
                                                           host: MemKernel) -> None:
    rig = Rig(_cfg(gw_dict, tmp_path, enabled=True, knobs=["offloads"]), host, tmp_path / "host.json")
    rig.tuning().up()
    rig.ns.writes = 0
    items = rig.tuning(alive=False).down()
    assert items and {i.status for i in items} == {"gone"} and rig.ns.writes == 0
    assert not lifecycle.record_path(rig.cfg).exists()


def test_host_wide_knobs_are_held_by_reference(gw_dict: dict[str, Any], tmp_path: Path, host: MemKernel) -> None:
    record = tmp_path / "host.json"
    gw1 = Rig(_cfg(gw_dict, tmp_path, "gw1", enabled=True, knobs=["esp_socket"], host_wide=True), host, record)
    gw2 = Rig(_cfg(gw_dict, tmp_path, "gw2", enabled=True, knobs=["esp_socket"], host_wide=True), host, record)
    original = host.state()
    gw1.tuning().up()
    assert host.sysctl["net.core.rmem_default"] == "4194304"
    assert lifecycle.summary(gw1.cfg).applied == 4  # type: ignore[union-attr]
    gw2.tuning().up()
    assert sorted(lifecycle.health(gw2.cfg)["host_wide_held"]) == sorted(  # type: ignore[arg-type]
        Knob("sysctl", {"key": k, "where": "host", "floor": "1"}, "", "", "").key
        for k in ("net.core.rmem_default", "net.core.rmem_max", "net.core.wmem_max"))
    shared = gw1.tuning().down()
    assert {i.status for i in shared if i.knob.where == "host"} == {"shared"}
    assert host.sysctl["net.core.rmem_default"] == "4194304", "gw2 still relies on it"
    gw2.tuning().down()
    assert host.state() == original
    assert not record.exists()


def test_floors_never_shrink_what_the_machine_has(gw_dict: dict[str, Any], tmp_path: Path, host: MemKernel) -> None:
    host.sysctl["net.core.rmem_max"] = "16777216"
    rig = Rig(_cfg(gw_dict, tmp_path, enabled=True, knobs=["esp_socket"], host_wide=True), host, tmp_path / "h.json")
    rig.ns.sysctl["net.ipv4.udp_rmem_min"] = "65536"
    by = {i.knob.params["key"]: i for i in rig.tuning().up()}
    assert by["net.core.rmem_max"].status == "ok" and host.sysctl["net.core.rmem_max"] == "16777216"
    assert by["net.ipv4.udp_rmem_min"].status == "ok" and rig.ns.sysctl["net.ipv4.udp_rmem_min"] == "65536"
    assert "at least '4194304'" in by["net.core.rmem_max"].line()
    assert by["net.core.rmem_default"].status == "applied"
    rig.tuning().down()
    assert host.sysctl["net.core.rmem_default"] == "212992"


def test_host_wide_knob_held_at_another_value_is_refused(tmp_path: Path, host: MemKernel) -> None:
    hosts = HostKnobs(host, tmp_path / "host.json")
    mine = Knob("sysctl", {"key": "net.core.rmem_default", "where": "host"}, "4194304", "", "host", "esp_socket")
    other = Knob("sysctl", {"key": "net.core.rmem_default", "where": "host"}, "8388608", "", "host", "esp_socket")
    assert [i.status for i in hosts.acquire("a", [mine])] == ["applied"]
    (item,) = hosts.acquire("b", [other])
    assert item.status == "failed" and "held at '4194304' by a" in item.reason
    assert [i.status for i in hosts.release("a")] == ["restored"]


def test_corrupt_host_record_is_a_clear_error(tmp_path: Path, host: MemKernel) -> None:
    record = tmp_path / "host.json"
    record.write_text(json.dumps({"entries": {"x": {"kind": "sysctl"}}}))
    with pytest.raises(GatewayError, match="host tuning record .* is corrupt"):
        HostKnobs(host, record).release("a")


def test_tuning_section_defaults_and_refusals(gw_dict: dict[str, Any]) -> None:
    cfg = parse_config(gw_dict)
    assert not cfg.tuning.enabled and cfg.tuning.knobs == ["coalescing", "mtu", "offloads", "softirq", "esp_socket"]
    assert not cfg.tuning.host_wide and cfg.tuning.path_mtu == {}
    ok = parse_config({**gw_dict, "tuning": {"enabled": True, "knobs": ["mtu"], "path_mtu": {"wan0": 9000}}})
    assert ok.tuning.path_mtu == {"wan0": 9000}
    for tuning, needle in [
        ({"knobs": ["tcp"]}, "belongs to the TCP endpoints"),
        ({"knobs": ["jumbo"]}, "tuning.knobs"),
        ({"knobs": []}, "tuning.knobs"),
        ({"knobs": ["mtu", "mtu"]}, "listed twice"),
        ({"path_mtu": {"eth9": 9000}}, "not interfaces of this gateway"),
        ({"path_mtu": {"wan0": 100000}}, "tuning.path_mtu"),
        ({"enabled": "sometimes"}, "tuning.enabled"),
        ({"jumbo": True}, "tuning.jumbo"),
    ]:
        with pytest.raises(ConfigError, match=needle):
            parse_config({**gw_dict, "tuning": tuning})


def test_tune_knobs_option(gw_dict: dict[str, Any]) -> None:
    cfg = parse_config({**gw_dict, "tuning": {"knobs": ["mtu", "offloads"]}})
    assert groups_for(cfg, "gateway", None) == ("mtu", "offloads")
    assert groups_for(cfg, "gateway", "all") == ("coalescing", "mtu", "offloads", "softirq", "esp_socket")
    assert groups_for(cfg, "endpoint", None) == ("tcp", "mtu")
    assert groups_for(cfg, "gateway", "softirq,coalescing") == ("coalescing", "softirq")
    with pytest.raises(GatewayError, match="tcp is not a knob group of a gateway"):
        groups_for(cfg, "gateway", "tcp")
    with pytest.raises(GatewayError, match="unknown knob group"):
        groups_for(cfg, "endpoint", "tcp,bogus")


def test_reports_carry_tuning_as_an_optional_field(gw_dict: dict[str, Any], tmp_path: Path, host: MemKernel) -> None:
    cfg = _cfg(gw_dict, tmp_path, enabled=True, knobs=["coalescing"])
    Rig(cfg, host, tmp_path / "host.json").tuning().up()
    state = lifecycle.summary(cfg)
    assert state is not None and state.groups == ["coalescing"] and state.refused == 2 and state.applied == 4
    base = {"gateway": "gw1", "timestamp": 1.0, "backend": "libipsec", "cpu_percent": 0, "softirq_percent": 0,
            "charon_cpu_percent": 0, "tunnel_bytes_in": 0, "tunnel_bytes_out": 0, "tunnel_packets_in": 0,
            "tunnel_packets_out": 0}
    assert GatewayReport.model_validate(base).tuning is None, "an older agent's report stays valid"
    rep = GatewayReport.model_validate({**base, "tuning": state.model_dump()})
    assert GatewayReport.model_validate_json(rep.model_dump_json()).tuning == state
    lifecycle.record_path(cfg).write_text("{")
    assert lifecycle.summary(cfg) is None, "a corrupt record never stops the reports"
    assert "is corrupt" in str(lifecycle.health(cfg)["error"])


def test_a_failed_write_is_a_refusal_not_an_applied_knob(gw_dict: dict[str, Any], tmp_path: Path,
                                                         host: MemKernel) -> None:
    cfg = _cfg(gw_dict, tmp_path, enabled=True, knobs=["esp_socket"])
    rig = Rig(cfg, host, tmp_path / "host.json")
    rig.ns.readonly.add("net.ipv4.udp_rmem_min")
    (item,) = [i for i in rig.tuning().up() if i.knob.params.get("key") == "net.ipv4.udp_rmem_min"]
    assert item.status == "failed"
    h = lifecycle.health(cfg)
    assert not [a for a in h["applied"] if "udp_rmem_min" in a["knob"]]  # type: ignore[attr-defined]
    (failed,) = [r for r in h["refused"] if r["status"] == "failed"]  # type: ignore[attr-defined]
    assert failed["knob"] == "sysctl key=net.ipv4.udp_rmem_min" and "read-only" in failed["reason"]
    assert lifecycle.summary(cfg).failed == 1  # type: ignore[union-attr]
    down = rig.tuning().down()
    assert {i.status for i in down} == {"restored"}, "a knob that never changed does not block `down`"
    assert not lifecycle.record_path(cfg).exists()
