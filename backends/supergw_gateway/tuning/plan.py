"""Plan, apply, verify and revert a knob set; the state file remembers previous values."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from supergw_gateway.errors import GatewayError
from supergw_gateway.executor import Executor
from supergw_gateway.tuning.knobs import HANDLERS, Knob, equal

Status = Literal["change", "ok", "unsupported", "applied", "failed", "drift", "restored"]
ExecutorFor = Callable[[str], Executor]  # knob.params["where"] -> executor


@dataclass(frozen=True)
class Item:
    knob: Knob
    status: Status
    current: str | None
    reason: str = ""

    def line(self) -> str:
        k = self.knob
        what = f"{k.kind} {' '.join(f'{a}={b}' for a, b in sorted(k.params.items()) if a not in ('where', 'want'))}"
        if self.status in ("change", "applied", "drift"):
            detail = f"{self.current!r} -> {k.target!r}"
        elif self.status == "restored":
            detail = f"back to {self.current!r}"
        elif self.status == "ok":
            detail = f"already {k.target!r}"
        else:
            detail = self.reason
        return f"[{self.status:>11}] {k.scope}: {what}: {detail}  ({k.why})"


def _read(knob: Knob, ex_for: ExecutorFor) -> tuple[str | None, str]:
    if knob.params.get("where") == "nowhere":
        return None, "host-wide knob: a network namespace cannot set it (use --host-wide to set it on the host)"
    if knob.params.get("where") == "undeclared":
        return None, "path MTU not declared: pass --mtu DEV=N when every hop of the path takes N"
    r = HANDLERS[knob.kind].read(ex_for(knob.params.get("where", "here")), knob.params)
    return r.value, r.reason


def plan(knobs: list[Knob], ex_for: ExecutorFor) -> list[Item]:
    items = []
    for k in knobs:
        cur, reason = _read(k, ex_for)
        if cur is None:
            items.append(Item(k, "unsupported", None, reason))
        elif equal(k.kind, cur, k.target):
            items.append(Item(k, "ok", cur))
        else:
            items.append(Item(k, "change", cur))
    return items


@dataclass
class TuneState:
    gateway: str
    role: str
    created: float
    entries: list[dict[str, object]]  # {kind, params, target, why, scope, previous}

    @classmethod
    def load(cls, path: Path) -> TuneState | None:
        try:
            return cls(**json.loads(path.read_text()))
        except FileNotFoundError:
            return None
        except (ValueError, TypeError) as exc:
            raise GatewayError(f"tuning state file {path} is corrupt: {exc}") from None

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2))
        tmp.rename(path)


def apply(knobs: list[Knob], ex_for: ExecutorFor, state_path: Path, gateway: str, role: str) -> list[Item]:
    """Write every knob off target; previous values go to the state file before the write.

    Applying twice keeps the first previous value, so revert restores the original.
    """
    state = TuneState.load(state_path) or TuneState(gateway, role, time.time(), [])
    known = {Knob(e["kind"], e["params"], e["target"], e["why"], e["scope"]).key  # type: ignore[arg-type]
             for e in state.entries}
    out = []
    for item in plan(knobs, ex_for):
        if item.status != "change":
            out.append(item)
            continue
        k = item.knob
        if k.key not in known:
            state.entries.append({**asdict(k), "previous": item.current})
            state.save(state_path)
        err = HANDLERS[k.kind].write(ex_for(k.params.get("where", "here")), k.params, k.target)
        out.append(Item(k, "failed", item.current, err) if err else Item(k, "applied", item.current))
    if not state.entries:
        state_path.unlink(missing_ok=True)
    return out


def verify(knobs: list[Knob], ex_for: ExecutorFor) -> list[Item]:
    return [Item(i.knob, "drift", i.current) if i.status == "change" else i for i in plan(knobs, ex_for)]


def revert(ex_for: ExecutorFor, state_path: Path) -> list[Item]:
    state = TuneState.load(state_path)
    if state is None:
        raise GatewayError(f"nothing to revert: no tuning state file {state_path}")
    out = []
    remaining = []
    for e in reversed(state.entries):
        k = Knob(e["kind"], e["params"], e["target"], e["why"], e["scope"])  # type: ignore[arg-type]
        prev = str(e["previous"])
        ex = ex_for(k.params.get("where", "here"))
        err = HANDLERS[k.kind].write(ex, k.params, prev)
        now = HANDLERS[k.kind].read(ex, k.params).value
        if err or not equal(k.kind, now, prev):
            out.append(Item(k, "failed", now, err or f"reads {now!r}, expected {prev!r}"))
            remaining.append(e)
        else:
            out.append(Item(k, "restored", prev))
    if remaining:
        state.entries = list(reversed(remaining))
        state.save(state_path)
    else:
        state_path.unlink(missing_ok=True)
    return out
