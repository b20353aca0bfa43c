"""The gateway package installs into a clean venv without the controller or its dependencies.

A gateway host needs strongSwan, the agent and the shared contracts (`supergw-proto`);
the controller's web, P4Runtime and etcd stacks have no business there.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONTROLLER_SIDE = {"supergw-controller", "fastapi", "uvicorn", "finsy", "aetcd", "grpcio", "starlette"}


def test_gateway_package_installs_without_the_controller(tmp_path: Path) -> None:
    # Copies: pip builds in the source tree, which must stay clean.
    skip = shutil.ignore_patterns("*.egg-info", "__pycache__", "build", "tests")
    sources = [shutil.copytree(REPO / pkg, tmp_path / pkg, ignore=skip) for pkg in ("proto", "backends")]
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    install = subprocess.run(
        [str(venv / "bin/pip"), "install", "-q", "--disable-pip-version-check", *map(str, sources)],
        capture_output=True, text=True, timeout=900,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    listed = subprocess.run(
        [str(venv / "bin/pip"), "list", "--format=json", "--disable-pip-version-check"],
        check=True, capture_output=True, text=True,
    )
    installed = {p["name"].lower() for p in json.loads(listed.stdout)}
    assert {"supergw-gateway", "supergw-proto"} <= installed
    assert not installed & CONTROLLER_SIDE, f"the gateway package pulled in {sorted(installed & CONTROLLER_SIDE)}"
    # Every module of the gateway package imports with what it installed.
    modules = sorted(
        "supergw_gateway." + ".".join(p.relative_to(REPO / "backends/supergw_gateway").with_suffix("").parts)
        for p in (REPO / "backends/supergw_gateway").rglob("*.py")
        if p.name != "__init__.py"
    )
    code = "import importlib, sys\nfor m in sys.argv[1:]:\n    importlib.import_module(m)\n"
    imported = subprocess.run([str(venv / "bin/python"), "-c", code, *modules], capture_output=True, text=True)
    assert imported.returncode == 0, imported.stderr[-3000:]
    helped = subprocess.run([str(venv / "bin/supergw-gateway"), "--help"], capture_output=True, text=True)
    assert helped.returncode == 0 and "agent" in helped.stdout, helped.stderr
