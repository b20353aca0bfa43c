"""The engine without root: the state file round-trips with the plan in it, `attach` rebuilds
the emulation from it, process records are replaced per site, and a running emulation that
does not fit is refused rather than stopped."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from topologies import processes
from topologies.emulation import Emulation, EmulationError, running_or_booted
from topologies.paths import RunLayout
from topologies.processes import ProcRecord
from topologies.schema import TWO_SITE_TOPOLOGY, load
from topologies.state import RunState


def me(name: str, site: str = "") -> ProcRecord:
    """A record of this test process: a live process the state file names."""
    pid = os.getpid()
    return ProcRecord(name, pid, processes.start_ticks(pid) or 0, [], "", site=site)


def test_state_round_trip_and_bad_file(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    assert RunState.load(path) is None
    rec = processes.ProcRecord("x", 1, 2, ["a"], "log", site="sgw-a")
    spec = load().model_dump(mode="json")
    RunState("topo.yaml", spec, 1.0, "up", [rec], {"switch": "ok: x"}).save(path)
    loaded = RunState.load(path)
    assert loaded is not None and loaded.processes == [rec] and loaded.stages == {"switch": "ok: x"}
    assert loaded.spec == spec
    path.write_text("{not json")
    with pytest.raises(ValueError, match="unreadable state file"):
        RunState.load(path)


def test_attach_rebuilds_the_emulation_with_its_overrides(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path)
    assert Emulation.attach(layout) is None
    booted = Emulation.from_file(TWO_SITE_TOPOLOGY, replicas=3, replicas_site="sgw-a", layout=layout,
                                 changes={"gateways": 2})
    booted.run.track(me("controller-c1", "sgw-a"))
    again = Emulation.attach(layout)
    assert again is not None and again.spec == booted.spec and again.is_running()
    a = again.site("sgw-a")
    assert a.topo.replicated and len(a.topo.gateways) == 2 and not again.site("sgw-b").topo.replicated
    assert a.paths.root == tmp_path / "sgw-a" and a.paths.logs == tmp_path / "logs" / "sgw-a"
    assert a.process("controller-c1") is not None and again.site("sgw-b").process("controller-c1") is None
    a.run.replace("sgw-a", "controller-c1", None)
    assert Emulation.attach(layout).site("sgw-a").process("controller-c1") is None  # type: ignore[union-attr]
    with pytest.raises(EmulationError, match="2 sites"):
        again.site()
    assert "controller replicas at sgw-a" in again.describe()


def test_one_site_keeps_its_files_in_run_itself(tmp_path: Path) -> None:
    site = Emulation.from_file(layout=RunLayout(tmp_path)).site()
    assert site.paths.token_file == tmp_path / "config" / "api-token" and site.paths.logs == tmp_path / "logs"


def test_a_state_with_a_plan_that_does_not_validate_is_refused(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path)
    RunState("x", {"sites": []}, 0.0).save(layout.state)
    with pytest.raises(ValueError, match="does not validate"):
        Emulation.attach(layout)


def test_a_running_emulation_is_used_when_it_fits_and_refused_when_not(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path)
    running = Emulation.from_file(layout=layout)
    running.run.track(me("controller"))
    want = Emulation.from_file(TWO_SITE_TOPOLOGY, layout=layout)
    with running_or_booted(want, lambda emu: None) as got:
        assert got.spec == running.spec and got is not want
    with pytest.raises(EmulationError, match="does not fit: one site only"):
        with running_or_booted(want, lambda emu: "one site only"):
            pass
    assert layout.state.exists()  # not stopped: it is someone else's


def test_where_to_look_names_every_site_and_its_replicas(tmp_path: Path) -> None:
    from topologies.where import where_lines

    emu = Emulation.from_file(TWO_SITE_TOPOLOGY, replicas=3, replicas_site="sgw-a", layout=RunLayout(tmp_path))
    text = "\n".join(where_lines(emu))
    assert "site sgw-a:" in text and "site sgw-b:" in text
    assert "replicas     c1 http://10.255.61.31:8080 (" in text and "10.255.62" in text
    assert f"{tmp_path}/sgw-b/config/api-token" in text and "hostsim_client" in text
    assert "pairs        agw1<->bgw1" in text and "make stop" in text
