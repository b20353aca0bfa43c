"""`up` applies the config's tuning profile and `down` restores exactly what it changed: on a
real gateway namespace (libipsec, with the host-wide sysctls) and inside a UML guest."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from supergw_gateway.config import Backend
from supergw_proto.reports import GatewayReport
from supergw_gateway.executor import LocalExecutor
from supergw_gateway.lab import LAN_DEV, Lab
from supergw_gateway.runtime import Gateway
from supergw_gateway.tuning import lifecycle
from supergw_gateway.tuning.hostwide import HOST_RECORD, HostKnobs
from supergw_gateway.tuning.knobs import HANDLERS, Knob
from supergw_gateway.tuning.plan import TuneRecord
from tests.integration.conftest import require_root_strongswan, require_uml
from tests.integration.helpers import ping

pytestmark = pytest.mark.integration

TUNING = {"enabled": True, "path_mtu": {LAN_DEV: 9000}}


def read(gw: Gateway, knobs: list[Knob], wheres: tuple[str, ...]) -> dict[str, str | None]:
    target = gw.tuning_target()
    return {k.key: HANDLERS[k.kind].read(target.executor_for(k.where), k.params).value
            for k in knobs if k.where in wheres}


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "supergw_gateway.cli", *args], capture_output=True, text=True,
                          timeout=180)


@pytest.fixture
def lab(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Lab, dict[str, Path]]]:
    backend, tuning = request.param
    lab = Lab("lt", backend)
    lab.create()
    paths = {}
    for k in ("a", "b"):
        d = lab.config_dict(k, tuning=tuning if k == "a" else {})
        d["controller"] = {"url": "http://127.0.0.1:9", "token": "tuning-test-agent-token"}
        paths[k] = tmp_path / f"{k}.yaml"
        paths[k].write_text(yaml.safe_dump(d))
    try:
        yield lab, paths
    finally:
        for k in ("a", "b"):
            cli("down", "-c", str(paths[k]))
        lab.destroy()


def gateway(path: Path) -> Gateway:
    from supergw_gateway.config import load_config

    return Gateway(load_config(path), lambda m: print(m, flush=True))


def up(path: Path) -> subprocess.CompletedProcess[str]:
    r = cli("up", "-c", str(path))
    print(r.stdout, r.stderr)
    assert r.returncode == 0, r.stderr
    return r


@pytest.mark.parametrize("lab", [(Backend.LIBIPSEC, {**TUNING, "host_wide": True})], indirect=True)
def test_up_applies_and_down_restores_in_a_namespace(lab: tuple[Lab, dict[str, Path]]) -> None:
    require_root_strongswan()
    the_lab, paths = lab
    gw = gateway(paths["a"])
    knobs = lifecycle.GatewayTuning(gw.cfg, gw.tuning_target(libipsec=True)).knobs()
    assert {k.where for k in knobs} >= {"here", "host"}
    before = read(gw, knobs, ("here", "host"))
    up(paths["b"])
    out = up(paths["a"]).stderr
    assert re.search(r"tuning up \(coalescing, mtu, offloads, softirq, esp_socket\): .*\d+ applied", out), out
    assert "[unsupported]" in out and "interrupt coalescing not supported" in out, "refusals are said at `up`"

    health = lifecycle.health(gw.cfg)
    applied = {a["knob"]: a for a in health["applied"]}  # type: ignore[attr-defined]
    refused = {r["knob"]: r for r in health["refused"]}  # type: ignore[attr-defined]
    assert "mtu dev=sgw-gw-lan" in applied and applied["mtu dev=sgw-gw-lan"]["previous"] == "1500"
    assert "ethtool-coalesce dev=sgw-gw-lan param=rx-usecs" in refused
    assert "path MTU not declared" in refused["mtu dev=sgw-gw-wan"]["reason"]
    assert health["host_wide_held"], "rmem_default is raised on the host (it starts below 4 MB)"
    assert_applied_read_back(gw, knobs)
    # libipsec's ESP socket was opened after the host-wide buffer was raised.
    ss = LocalExecutor(the_lab.gw_ns("a")).run(["ss", "-uamn", "sport = :4500"]).stdout
    rb = [int(x) for x in re.findall(r"rb(\d+)", ss)]
    assert rb and min(rb) >= 4194304, ss
    assert ping(the_lab, count=3) == (3, 3)
    # The agent's /health and reports and `status` say the same, from the record.
    from supergw_gateway.agent import Agent

    agent = Agent(gw.cfg)
    assert agent.health()[1]["tuning"] == health

    async def report() -> GatewayReport:
        try:
            return (await agent.make_report(agent.sampler.cpu()))[0]
        finally:
            await agent.aclose()

    rep = asyncio.run(report())
    assert rep.tuning is not None and rep.tuning == lifecycle.summary(gw.cfg)
    assert rep.tuning.applied == len(applied) + len(health["host_wide_held"])  # type: ignore[arg-type]
    assert rep.tuning.refused == len(refused) > 0
    assert json.loads(cli("status", "-c", str(paths["a"])).stdout)["tuning"] == health
    # `tune plan` shows what `up` set as done, nothing left to change.
    plan = cli("tune", "-c", str(paths["a"]), "plan")
    assert plan.returncode == 0 and "[     change]" not in plan.stdout, plan.stdout

    # `down` from another process: what it restores comes from the record on disk.
    holder = str(gw.cfg.run_dir)
    down = cli("down", "-c", str(paths["a"]))
    assert down.returncode == 0, down.stdout + down.stderr
    assert "restored" in down.stderr and "failed" not in down.stderr
    assert read(gw, knobs, ("here", "host")) == before
    assert not lifecycle.record_path(gw.cfg).exists()
    assert not HOST_RECORD.exists() or holder not in HOST_RECORD.read_text()
    assert HostKnobs(LocalExecutor()).held_by(holder) == []


def assert_applied_read_back(gw: Gateway, knobs: list[Knob]) -> None:
    """Every knob the record says `up` set (here, around a guest, or held on the host) reads its target."""
    rec = TuneRecord.load(lifecycle.record_path(gw.cfg))
    assert rec is not None
    mine = [k for k, _ in rec.knobs()] + [k for k in knobs if k.key in rec.host_held]
    assert mine
    target = gw.tuning_target()
    for k in mine:
        now = HANDLERS[k.kind].read(target.executor_for(k.where), k.params).value
        assert k.satisfied(now), f"{k.key} reads {now!r} after up, wants {k.target!r}"


@pytest.mark.parametrize("lab", [(Backend.UML, TUNING)], indirect=True)
def test_up_applies_and_down_restores_in_a_uml_guest(lab: tuple[Lab, dict[str, Path]], tmp_path: Path) -> None:
    require_uml()
    the_lab, paths = lab
    up(paths["b"])
    plain = yaml.safe_load(paths["a"].read_text())
    off = tmp_path / "a-off.yaml"
    off.write_text(yaml.safe_dump({**plain, "tuning": {"enabled": False, "path_mtu": plain["tuning"]["path_mtu"]}}))
    up(off)  # the guest runs untuned: the values to come back to
    gw = gateway(paths["a"])
    knobs = lifecycle.GatewayTuning(gw.cfg, gw.tuning_target()).knobs()
    assert {k.where for k in knobs} >= {"here", "outer"}, "the guest's knobs and the veths around it"
    assert not any(k.where in ("host", "nowhere") for k in knobs), "in a guest every sysctl is the guest's own"
    before = read(gw, knobs, ("here", "outer"))

    out = up(paths["a"]).stderr  # same guest, now with its tuning
    assert re.search(r"tuning up \(.*\): .*\d+ applied", out), out
    assert_applied_read_back(gw, knobs)
    health = lifecycle.health(gw.cfg)
    lan_mtu = [r for r in [*health["applied"], *health["refused"]]  # type: ignore[misc]
               if r["knob"] == f"mtu dev={LAN_DEV}"]
    # The guest NIC's MTU and the veth under it go together: both set or both refused, with why.
    assert len(lan_mtu) == 2 and len({"reason" in r for r in lan_mtu}) == 1, lan_mtu
    during = read(gw, knobs, ("here", "outer"))
    assert during != before
    assert ping(the_lab, count=3) == (3, 3)

    up(off)  # tuning off on the running guest: exactly the old values
    assert read(gw, knobs, ("here", "outer")) == before
    assert not lifecycle.record_path(gw.cfg).exists()

    up(paths["a"])
    down = cli("down", "-c", str(paths["a"]))
    assert down.returncode == 0 and "restored" in down.stderr and "failed" not in down.stderr, down.stderr
    assert read(gw, knobs, ("outer",)) == {k.key: before[k.key] for k in knobs if k.where == "outer"}
    assert not lifecycle.record_path(gw.cfg).exists()
