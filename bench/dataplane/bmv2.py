"""BMv2 for the dataplane benchmark: which `simple_switch_grpc` runs, whether it was built
with its per-packet logging, and the P4 program compiled for it by p4c in this run.

BMv2 is measured with a build without logging macros (p4lang's own performance notes do
the same: a logging build forwarding through its logger measures the logger). Where
none is found, the benchmark still measures whatever `simple_switch_grpc` is on PATH and
records that it logs; where BMv2 or p4c is missing, the BMv2 figures are null with the reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

# Where p4lang-style installs put the tools when they are not on PATH (p4src/README.md);
# perf/ holds a build configured with --disable-logging-macros --disable-elogger.
P4TOOLS = Path("/opt/p4tools")
PERF_BUILD = P4TOOLS / "perf" / "bin" / "simple_switch_grpc"
# A format string of BMLOG_DEBUG_PKT in simple_switch: present only when logging is compiled in.
PACKET_LOG_MARK = b"Processing packet received on port"


class Bmv2Unavailable(RuntimeError):
    """BMv2 cannot be measured here; the message says why and what to do."""


@dataclass(frozen=True)
class Bmv2:
    binary: Path
    logging_compiled_in: bool
    p4c: Path
    p4c_version: str
    json: Path
    p4info: Path

    def describe(self) -> str:
        build = "built with per-packet logging (figures err low)" if self.logging_compiled_in else "no logging macros"
        return f"{self.binary} ({build}), started without --log-file/--log-console; program compiled by {self.p4c_version}"


def _tool(name: str, preferred: Path | None = None) -> Path | None:
    if preferred is not None and os.access(preferred, os.X_OK):
        return preferred
    found = shutil.which(name) or shutil.which(name, path=str(P4TOOLS / "bin"))
    return Path(found) if found else None


def logging_compiled_in(binary: Path) -> bool:
    """Whether `binary` (or the BMv2 libraries it loads) carries the packet-logging macros."""
    files = [binary]
    ldd = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=False)
    for line in ldd.stdout.splitlines():
        parts = line.split("=>")
        if len(parts) == 2 and "libbm" in parts[0]:
            files.append(Path(parts[1].split("(")[0].strip()))
    return any(PACKET_LOG_MARK in f.read_bytes() for f in files if f.is_file())


def prepare(program: Path, out_dir: Path) -> Bmv2:
    """Find simple_switch_grpc (the perf build first) and p4c, and compile `program` into
    `out_dir`. Raises Bmv2Unavailable with the reason."""
    binary = _tool("simple_switch_grpc", PERF_BUILD)
    if binary is None:
        raise Bmv2Unavailable(
            "simple_switch_grpc is not installed (no registry packages it for Debian 12; "
            "install p4lang's BMv2 with PI, see p4src/README.md)"
        )
    p4c = _tool("p4c")
    if p4c is None:
        raise Bmv2Unavailable("p4c is not installed, so there is no BMv2 JSON to load (see p4src/README.md)")
    version = subprocess.run([str(p4c), "--version"], capture_output=True, text=True, check=False).stdout.strip()
    out_dir.mkdir(parents=True, exist_ok=True)
    # p4c names the JSON after the program.
    json_path, p4info = out_dir / f"{program.stem}.json", out_dir / f"{program.stem}.p4info.txtpb"
    proc = subprocess.run(
        [str(p4c), "--target", "bmv2", "--arch", "v1model", "--p4runtime-files", str(p4info),
         "-o", str(out_dir), str(program)],
        capture_output=True, text=True, timeout=300, check=False,
    )
    if proc.returncode != 0 or not json_path.is_file():
        raise Bmv2Unavailable(f"p4c failed on {program.name}: {proc.stderr.strip()[-600:]}")
    return Bmv2(binary, logging_compiled_in(binary), p4c, version or str(p4c), json_path, p4info)
