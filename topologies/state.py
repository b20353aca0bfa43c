"""What a running emulation is, in `.run/state.json`: the plan it booted, every process it
started (pid and start time, so a recycled pid is never taken for ours), each stage's
result. `down`, `status` and every program that attaches to the running emulation
(benchmarks, tests) read it from here.
"""

from __future__ import annotations

import json
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from topologies import processes
from topologies.processes import ProcRecord

PHASES = ("starting", "up", "degraded")


@dataclass
class RunState:
    source: str  # the topology file it came from
    spec: dict[str, Any]  # the EmulationSpec it booted (JSON), overrides included
    started_at: float
    phase: str = "starting"  # then "up" (every stage ok) or "degraded"
    processes: list[ProcRecord] = field(default_factory=list)
    stages: dict[str, str] = field(default_factory=dict)  # stage -> "ok: ..." / "failed: ..."
    front_end: str = "run"  # "run" (python -m topologies.run) or "mininet"

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2) + "\n")
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path) -> RunState | None:
        try:
            data = json.loads(path.read_text())
            procs = [ProcRecord(**p) for p in data.pop("processes", [])]
            return cls(processes=procs, **data)
        except FileNotFoundError:
            return None
        except (ValueError, TypeError) as exc:
            raise ValueError(f"{path}: unreadable state file ({exc}); remove it after checking nothing runs") from None

    def running(self) -> list[ProcRecord]:
        return [p for p in self.processes if processes.alive(p)]

    def process(self, site: str, name: str) -> ProcRecord | None:
        """The live process `name` of site `site`, or None."""
        return next((p for p in self.processes if p.site == site and p.name == name and processes.alive(p)), None)

    def replace(self, site: str, name: str, rec: ProcRecord | None) -> None:
        """`rec` is now site `site`'s process `name` (None: it has none)."""
        self.processes = [p for p in self.processes if not (p.site == site and p.name == name)]
        if rec is not None:
            self.processes.append(rec)

    def failed_stages(self) -> dict[str, str]:
        return {k: v for k, v in self.stages.items() if not v.startswith("ok")}


class StateFile:
    """The running emulation's state and its file: every change is saved at once, so `down`
    finds each process even when the program that started it dies the next moment."""

    def __init__(self, path: Path, state: RunState) -> None:
        self.path, self.state = path, state
        self._lock = threading.RLock()  # bench/chaos restarts processes from several threads at once

    def save(self) -> None:
        with self._lock:
            self.state.save(self.path)

    def track(self, rec: ProcRecord) -> None:
        with self._lock:
            self.state.processes.append(rec)
            self.save()

    def replace(self, site: str, name: str, rec: ProcRecord | None) -> None:
        with self._lock:
            self.state.replace(site, name, rec)
            self.save()

    def stage(self, stage: str, ok: bool, detail: str) -> None:
        first_line = detail.splitlines()[0] if detail else ""
        self.state.stages[stage] = ("ok: " if ok else "failed: ") + first_line
        self.save()
