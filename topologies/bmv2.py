"""BMv2 (`simple_switch_grpc`) as the emulation's switch: what it needs and where it logs.

BMv2 starts without a program (`--no-p4`) on the same veths, device id, P4Runtime address
and CPU port as the eBPF switch (switch.py builds both command lines); the controller
pushes the JSON that `make p4` compiled, with the committed P4Info
(`pipeline.device_config`). Nothing falls back to the eBPF switch: when BMv2 or the JSON is
missing, `missing()` says what to install or run.

The binary is whichever `simple_switch_grpc` comes first on PATH (the Makefile puts
/opt/p4tools/bin there when it exists). That is normally a build with logging compiled in:
the emulation is for watching the system work, and its per-packet log (at debug level:
port in, tables hit, port out) is what BMv2 offers over the eBPF target. The no-logging
build is for measuring, which bench/dataplane does.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from topologies.paths import BMV2_BUILT_P4INFO, BMV2_JSON, P4INFO, REPO

BINARY = "simple_switch_grpc"
INSTALL = (
    "install p4c and BMv2 with P4Runtime support (simple_switch_grpc): p4lang's packages where "
    "your distribution has them, or a source build of p4lang/p4c and p4lang/behavioral-model "
    "(configured --with-pi); see README.md, 'p4c and BMv2'"
)
LOG_LEVEL = "debug"


def binary() -> Path | None:
    found = shutil.which(BINARY)
    return Path(found) if found else None


def stale_json() -> str | None:
    """Why `make p4`'s JSON does not belong to the committed P4Info (p4c wrote its own P4Info
    beside the JSON: a different one means other sources), or None."""
    if not BMV2_BUILT_P4INFO.is_file() or BMV2_BUILT_P4INFO.read_bytes() != P4INFO.read_bytes():
        return f"{BMV2_JSON.relative_to(REPO)} was not compiled from the sources of the committed P4Info: run `make p4`"
    return None


def missing() -> str | None:
    """Why BMv2 cannot be the switch here, with what to do; None when it can."""
    if binary() is None:
        return f"{BINARY} is not on PATH: {INSTALL}"
    json = BMV2_JSON.relative_to(REPO)
    if not BMV2_JSON.is_file():
        if shutil.which("p4c") is None:
            return f"{json} is missing and p4c is not installed: {INSTALL}; then `make p4`"
        return f"{json} is missing: run `make p4` (make run SWITCH=bmv2 does)"
    return stale_json()


def log_file(logs: Path, name: str = "bmv2") -> Path:
    """BMv2 appends `.txt` to the --log-file it is given (`name`: another switch's, e.g. the outside one)."""
    return logs / f"{name}.txt"
