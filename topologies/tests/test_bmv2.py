"""BMv2 as the emulation's switch: selection, port limits, the generated controller config,
the command line, and a clear refusal (before anything is built) when BMv2 is missing."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from topologies import bmv2, paths, run
from topologies.configs import Secrets, controller_config, write_all
from topologies.emulation import Emulation
from topologies.model import DEFAULT_TOPOLOGY, Topology, TopologyError
from topologies.network import switch_interfaces
from topologies.paths import SitePaths
from topologies.schema import load
from topologies.switch import site_command
from topologies.where import switch_lines


def load_topology(path: Path = DEFAULT_TOPOLOGY, switch: Any = None) -> Topology:
    return load(path, switch=switch).single


def _topology_file(tmp_path: Path, **switch: Any) -> Path:
    data = yaml.safe_load(DEFAULT_TOPOLOGY.read_text())
    data["switch"] = {**data["switch"], **switch}
    path = tmp_path / "topo.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _fake_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, p4info: bytes | None = None) -> None:
    """A `make p4` output in tmp_path: the JSON and p4c's P4Info (the committed one unless given)."""
    json_path, built = tmp_path / "supergw.json", tmp_path / "supergw.p4info.txtpb"
    json_path.write_text("{}")
    built.write_bytes(paths.P4INFO.read_bytes() if p4info is None else p4info)
    monkeypatch.setattr(bmv2, "BMV2_JSON", json_path)
    monkeypatch.setattr(bmv2, "BMV2_BUILT_P4INFO", built)
    monkeypatch.setattr(bmv2, "REPO", tmp_path)


def _which(present: set[str]) -> Any:
    return lambda name, *a, **kw: f"/usr/bin/{name}" if name in present else None


def test_default_switch_is_ebpf_and_the_override_wins(tmp_path: Path) -> None:
    assert load_topology().switch.kind == "ebpf"
    assert load_topology(switch="bmv2").switch.kind == "bmv2"
    assert load_topology(_topology_file(tmp_path, kind="bmv2")).switch.kind == "bmv2"
    assert load_topology(_topology_file(tmp_path, kind="bmv2"), switch="ebpf").switch.kind == "ebpf"


def test_bad_switch_kind_names_the_key(tmp_path: Path) -> None:
    with pytest.raises(TopologyError, match=r"switch\.kind: Input should be 'ebpf' or 'bmv2'"):
        load_topology(_topology_file(tmp_path, kind="tofino"))


def test_bmv2_refuses_ports_wider_than_9_bits(tmp_path: Path) -> None:
    data = yaml.safe_load(DEFAULT_TOPOLOGY.read_text())
    data["hosts"][0]["port"] = 600
    path = tmp_path / "wide.yaml"
    path.write_text(yaml.safe_dump(data))
    assert load_topology(path).hosts[0].port == 600  # fine for the eBPF target
    with pytest.raises(TopologyError, match=r"switch\.kind bmv2: ports \[600\] do not fit v1model's 9-bit ports"):
        load_topology(path, switch="bmv2")


def test_controller_pushes_the_json_only_to_bmv2(tmp_path: Path) -> None:
    site = SitePaths(tmp_path, tmp_path / "logs")
    assert controller_config(load_topology(), site)["pipeline"] == {"p4info": str(paths.P4INFO)}
    pipeline = controller_config(load_topology(switch="bmv2"), site)["pipeline"]
    assert pipeline == {"p4info": str(paths.P4INFO), "device_config": str(paths.BMV2_JSON)}


def test_generated_bmv2_config_passes_the_controllers_loader(tmp_path: Path) -> None:
    pytest.importorskip("supergw_controller.config")
    from supergw_controller.config import load_config

    if not paths.BMV2_JSON.is_file():
        pytest.skip(f"{paths.BMV2_JSON} not built (`make p4`): the controller's loader checks it exists")
    gen = write_all(load_topology(switch="bmv2"), SitePaths(tmp_path, tmp_path / "logs"), Secrets.fresh(16))
    assert load_config(gen.controllers["controller"]).pipeline.device_config == paths.BMV2_JSON


def test_argv_has_simple_switch_grpcs_shape(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(shutil, "which", _which({"simple_switch_grpc"}))
    topo = load_topology(switch="bmv2")
    argv = site_command(topo, tmp_path).argv()
    assert argv[:4] == ["/usr/bin/simple_switch_grpc", "--device-id", str(topo.switch.device_id), "--no-p4"]
    ports = [argv[i + 1] for i, a in enumerate(argv) if a == "-i"]
    assert ports == [f"{p}@{name}" for p, name in switch_interfaces(topo).items()]
    # Target options come after `--`; BMv2 appends .txt to the log file it is given.
    sep = argv.index("--")
    assert argv[sep + 1 :] == ["--grpc-server-addr", topo.switch.grpc_addr, "--cpu-port", str(topo.switch.cpu_port)]
    assert argv[argv.index("--log-file") + 1] + ".txt" == str(bmv2.log_file(tmp_path))


@pytest.mark.parametrize(
    ("present", "built", "message"),
    [
        (set(), True, "simple_switch_grpc is not on PATH: install p4c and BMv2"),
        ({"simple_switch_grpc"}, False, "supergw.json is missing and p4c is not installed: install p4c"),
        ({"simple_switch_grpc", "p4c"}, False, "supergw.json is missing: run `make p4`"),
    ],
)
def test_missing_says_what_to_install_or_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, present: set[str], built: bool, message: str
) -> None:
    monkeypatch.setattr(shutil, "which", _which(present))
    _fake_build(tmp_path, monkeypatch)
    if not built:
        (tmp_path / "supergw.json").unlink()
    why = bmv2.missing()
    assert why is not None and message in why, why


def test_json_from_other_sources_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(shutil, "which", _which({"simple_switch_grpc", "p4c"}))
    _fake_build(tmp_path, monkeypatch, p4info=b"pkg_info {}\n")
    assert "not compiled from the sources of the committed P4Info: run `make p4`" in (bmv2.missing() or "")
    _fake_build(tmp_path, monkeypatch)
    assert bmv2.missing() is None


def test_up_on_missing_bmv2_fails_at_once_without_building(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(shutil, "which", _which(set()))
    started: list[object] = []

    def fake_up(*args: object) -> int:
        started.append(args)
        return 0

    monkeypatch.setattr(run, "cmd_up", fake_up)
    assert run.main(["up", "--switch", "bmv2"]) == 2
    assert started == [], "nothing may be built or started, and no fallback to the eBPF switch"
    err = capsys.readouterr().err
    assert "cannot run the emulation on BMv2: simple_switch_grpc is not on PATH" in err
    assert "source build" in err


def test_up_with_bmv2_present_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bmv2, "missing", lambda: None)
    kinds: list[str] = []

    def fake_up(emu: Emulation) -> int:
        kinds.append(emu.spec.single.switch.kind)
        return 0

    monkeypatch.setattr(run, "cmd_up", fake_up)
    assert run.main(["up", "--switch", "bmv2"]) == 0
    assert run.main(["up"]) == 0
    assert kinds == ["bmv2", "ebpf"]


def test_where_to_look_names_the_bmv2_log() -> None:
    emu = Emulation.from_file(switch="bmv2")
    lines = "\n".join(switch_lines(emu.site()))
    assert str(bmv2.log_file(emu.site().paths.logs)) in lines and "simple_switch_grpc" in lines
    assert "eBPF supergw-switch" in "\n".join(switch_lines(Emulation.from_file().site()))
