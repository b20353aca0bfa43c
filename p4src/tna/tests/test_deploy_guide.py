"""docs/deploy-tofino.md: every command is tagged, and what it claims here is true.

Each command line in the guide's sh blocks ends with `# [here]` (runs in this repo; this
test or `make p4` runs it) or `# [SDE]` (needs the Tofino SDE, Stratum or the switch).
This test runs the `[here]` ones that are not `make p4` itself: the resource estimate,
the controller config check and the vmac one-liner, and compares with what the guide says.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from tna_scripts import load

from supergw_controller.config import load_config

ROOT = Path(__file__).resolve().parents[3]
GUIDE = ROOT / "docs" / "deploy-tofino.md"
TNA = ROOT / "p4src" / "tna"


pre_prune = load("pre_prune")

# `[here]` commands and the test or make target that runs each (see the guide's table).
RUN_HERE = {
    "make p4": "make p4 (make test, CI)",
    "p4src/tna/check.sh": "make p4",
    ".venv/bin/python p4src/tna/resources.py": "test_resources_table_is_the_scripts_output",
    ".venv/bin/supergw-controller --config tofino.yaml --check": "test_controller_config_validates",
    ".venv/bin/python -c": "test_vmac_one_liner",
}


def _guide() -> str:
    return GUIDE.read_text()


def _commands() -> list[tuple[str, str]]:
    """(command, tag) for every command in the guide's sh blocks, continuations joined."""
    out: list[tuple[str, str]] = []
    for block in re.findall(r"```sh\n(.*?)```", _guide(), re.S):
        pending = ""
        for line in block.splitlines():
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1] + " "
                continue
            line = pending + line
            pending = ""
            if not line.strip():
                continue
            m = re.search(r"#\s*\[(here|SDE)\]", line)
            assert m, f"untagged command in {GUIDE.name}: {line.strip()}"
            out.append((line[: m.start()].strip(), m.group(1)))
    return out


def test_every_command_is_tagged_and_every_here_command_is_run() -> None:
    cmds = _commands()
    assert sum(1 for _, t in cmds if t == "SDE") >= 8
    here = [c for c, t in cmds if t == "here"]
    assert here
    for c in here:
        assert any(c.startswith(k) for k in RUN_HERE), f"[here] command nobody runs: {c}"


def test_resources_table_is_the_scripts_output() -> None:
    run = subprocess.run([sys.executable, str(TNA / "resources.py")], capture_output=True, text=True, check=True)
    m = re.search(r"<!-- resources:begin -->\n(.*?)<!-- resources:end -->", _guide(), re.S)
    assert m, "resources markers missing"
    assert m.group(1) == run.stdout, "section 9 is stale: paste the output of p4src/tna/resources.py"


def test_controller_config_validates(tmp_path: Path) -> None:
    m = re.search(r"<!-- controller-config -->\n```yaml\n(.*?)```", _guide(), re.S)
    assert m
    data = yaml.safe_load(m.group(1))
    # The pipeline files exist only after bf-p4c; stand in the Tofino-shaped P4Info.
    shape = TNA / "supergw.tofino-shape.p4info.txtpb"
    (tmp_path / "p4info.txtpb").write_text(shape.read_text())
    (tmp_path / "pipeline.pb.bin").write_bytes(b"\0")
    data["pipeline"] = {"p4info": "p4info.txtpb", "device_config": "pipeline.pb.bin"}
    data["state_db"] = str(tmp_path / "state.sqlite3")
    for token in data["api"]["tokens"]:  # the operator's token files, here stand-ins
        if "token_file" in token:
            token_file = tmp_path / Path(token["token_file"]).name
            token_file.write_text("x" * 32 + "\n")
            token_file.chmod(0o600)
            token["token_file"] = str(token_file)
    cfg_path = tmp_path / "tofino.yaml"
    cfg_path.write_text(yaml.safe_dump(data))
    cfg = load_config(cfg_path)
    assert cfg.buckets == 4096
    ports = set(cfg.ports)
    for p in ports:  # device ports that the PRE prune script accepts
        pre_prune.l2_xid(p)
    assert {g.port for g in cfg.gateways} <= ports
    cpu_ports = {192, 320, 0}
    assert not ports & cpu_ports
    prune_line = next(c for c, _ in _commands() if "pre_prune.py" in c)
    listed = set(pre_prune.parse_ports(re.search(r"SUPERGW_PORTS=(\S+)", prune_line).group(1)))  # type: ignore[union-attr]
    assert listed == ports, "the prune command and the config list different ports"


def test_vmac_one_liner() -> None:
    cmd, _ = next((c, t) for c, t in _commands() if c.startswith(".venv/bin/python -c"))
    argv = shlex.split(cmd)
    run = subprocess.run([sys.executable, *argv[1:]], capture_output=True, text=True, check=True, cwd=ROOT)
    printed = run.stdout.strip()
    assert re.search(rf"prints {re.escape(printed)}", _guide())
    assert f"[{printed}]" in _guide()  # the arping line shows the same MAC


@pytest.mark.parametrize("name", ["check.sh", "compile-tofino.sh", "pre_prune.py", "resources.py"])
def test_referenced_scripts_exist(name: str) -> None:
    assert (TNA / name).is_file() and f"p4src/tna/{name}" in _guide()
