"""The port map loader rejects bad maps with a clear error (rootless)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError
from supergw_ptf.portmap import DEFAULT_PORTS_FILE, load, main


def write(tmp_path: Path, data: dict[str, object]) -> Path:
    path = tmp_path / "ports.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def committed() -> dict[str, object]:
    return json.loads(DEFAULT_PORTS_FILE.read_text(encoding="utf-8"))


def test_committed_map_loads() -> None:
    pm = load()
    assert pm.hosts and pm.gateways and pm.unknown
    assert pm.absent_port not in {p.port for p in pm.ports}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["ports"].append(dict(d["ports"][0], switch_iface="x1", ptf_iface="y1")), "duplicate port numbers"),
        (lambda d: d["ports"].append(dict(d["ports"][0], port=99)), "duplicate interface names"),
        (lambda d: d.update(absent_port=d["ports"][0]["port"]), "absent_port"),
        (lambda d: d["ports"][0].update(role="ROUTER"), "role"),
        (lambda d: d["ports"][0].update(switch_iface="a-very-long-interface-name"), "switch_iface"),
        (lambda d: d.update(ports=[p for p in d["ports"] if p["role"] != "GATEWAY"][:]), "GATEWAY"),
        (lambda d: d.update(extra=1), "extra"),
    ],
)
def test_bad_maps_rejected(tmp_path: Path, change, message: str) -> None:  # type: ignore[no-untyped-def]
    data = committed()
    change(data)
    with pytest.raises(ValidationError, match=message):
        load(write(tmp_path, data))


def test_cli_reports_bad_map(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = committed()
    data["cpu_port"] = "not a number"
    assert main([str(write(tmp_path, data))]) == 2
    assert "bad port map" in capsys.readouterr().err


def test_cli_prints_shell_lines(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("namespace ")
    assert sum(line.startswith("port ") for line in lines) == len(load().ports)
