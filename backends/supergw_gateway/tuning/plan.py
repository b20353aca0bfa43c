"""Plan, apply, verify and revert a knob set; the record on disk remembers what was changed.

The record (`TuneRecord`, JSON) holds every value a knob had before it was first written
(saved *before* the write, so a crash in the middle still leaves a record that reverts
exactly what was touched), what was refused and why, and the identity of each kernel the
changes live in: a record whose namespace or UML guest has since been replaced describes
settings that went away with it, so they are dropped ("gone"), never written into the new
kernel.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

from supergw_gateway.errors import GatewayError
from supergw_gateway.executor import Executor
from supergw_gateway.tuning.knobs import HANDLERS, Knob, equal

Status = Literal["change", "ok", "unsupported", "applied", "failed", "drift", "restored", "gone", "shared"]
ExecutorFor = Callable[[str], Executor]  # knob.where -> executor
# knob.where -> the identity of the kernel there now (boot id + netns inode); None: gone.
Identity = Mapping[str, str | None]


@dataclass(frozen=True)
class Item:
    knob: Knob
    status: Status
    current: str | None
    reason: str = ""

    def line(self) -> str:
        k = self.knob
        if self.status in ("change", "applied", "drift"):
            detail = f"{self.current!r} -> {k.target!r}"
        elif self.status == "restored":
            detail = f"back to {self.current!r}"
        elif self.status == "ok":
            detail = f"already {self.current!r}" + (f" (at least {k.target!r})" if k.params.get("floor") else "")
        else:
            detail = self.reason
        return f"[{self.status:>11}] {k.scope}: {k.label}: {detail}  ({k.why})"


def no_place_reason(knob: Knob) -> str | None:
    """Why a knob cannot be set anywhere, or None when it has a place."""
    if knob.where == "nowhere":
        return ("host-wide knob: a network namespace cannot set it (tuning.host_wide in the config, or "
                "--host-wide, sets it on the host for every namespace)")
    if knob.where == "undeclared":
        return ("path MTU not declared: set tuning.path_mtu {DEV: N} in the config (or --mtu DEV=N) "
                "when every hop of the path takes N")
    return None


def _read(knob: Knob, ex_for: ExecutorFor) -> tuple[str | None, str]:
    if (reason := no_place_reason(knob)) is not None:
        return None, reason
    r = HANDLERS[knob.kind].read(ex_for(knob.where), knob.params)
    return r.value, r.reason


def plan(knobs: Iterable[Knob], ex_for: ExecutorFor) -> list[Item]:
    items = []
    for k in knobs:
        cur, reason = _read(k, ex_for)
        if cur is None:
            items.append(Item(k, "unsupported", None, reason))
        elif k.satisfied(cur):
            items.append(Item(k, "ok", cur))
        else:
            items.append(Item(k, "change", cur))
    return _refuse_orphans(items)


def _refuse_orphans(items: list[Item]) -> list[Item]:
    """A knob that only serves another (`follows`: the veth under a UML guest's NIC serves
    the NIC's MTU) is refused when that other one is refused: it would change for nothing."""
    by_key = {i.knob.key: i for i in items}
    out = []
    for i in items:
        k = i.knob
        if "follows" in k.params and i.status == "change":
            params = {a: b for a, b in k.params.items() if a != "follows"} | {"where": k.params["follows"]}
            served = by_key.get(Knob(k.kind, params, k.target, k.why, k.scope).key)
            if served is None or served.status == "unsupported":
                why = served.reason if served is not None else "it is not in the profile"
                i = Item(k, "unsupported", i.current, f"serves the same knob in {k.params['follows']!r}, which "
                                                      f"cannot be set: {why}")
        out.append(i)
    return out


@dataclass
class TuneRecord:
    gateway: str
    role: str
    created: float
    entries: list[dict[str, object]]  # {kind, params, target, why, scope, group, previous}
    refused: list[dict[str, object]] = field(default_factory=list)  # {knob..., status, reason}
    identity: dict[str, str] = field(default_factory=dict)  # where -> kernel identity when written
    groups: list[str] = field(default_factory=list)
    updated: float = 0.0
    ok: int = 0  # knobs found already at their target (nothing to record)
    host_held: list[str] = field(default_factory=list)  # host-wide knobs held (hostwide.py keeps their values)

    @classmethod
    def load(cls, path: Path) -> TuneRecord | None:
        try:
            rec = cls(**json.loads(path.read_text()))
            for e in [*rec.entries, *rec.refused]:
                Knob.from_entry(e)
            for e in rec.entries:
                str(e["previous"])
            return rec
        except FileNotFoundError:
            return None
        except (ValueError, TypeError, KeyError) as exc:
            raise GatewayError(f"tuning record {path} is corrupt ({exc}): restore the values it lists by hand, "
                               "then delete it") from None

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.updated = time.time()
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2))
        tmp.rename(path)

    def save_or_remove(self, path: Path) -> None:
        """Save while it holds anything; an empty record is removed."""
        if self.entries or self.refused or self.host_held:
            self.save(path)
        else:
            path.unlink(missing_ok=True)

    def knobs(self) -> list[tuple[Knob, str]]:
        """(knob, previous value) of every change the record owns, in the order made."""
        return [(Knob.from_entry(e), str(e["previous"])) for e in self.entries]

    def applied(self) -> list[tuple[Knob, str]]:
        """The changes that took: a knob whose write failed stays on record (a half-done
        write is restored too) but is listed among the refusals, not here."""
        failed = {Knob.from_entry(e).key for e in self.refused if e.get("status") == "failed"}
        return [(k, prev) for k, prev in self.knobs() if k.key not in failed]


def _entry(k: Knob, **extra: object) -> dict[str, object]:
    return {**asdict(k), **extra}


def _stale(where: str, rec: TuneRecord, identity: Identity | None) -> bool:
    """Whether the kernel a change of `rec` lived in is gone or was replaced since."""
    if identity is None or where not in identity:
        return False
    now = identity[where]
    return now is None or (where in rec.identity and rec.identity[where] != now)


def _restore(k: Knob, prev: str, ex_for: ExecutorFor) -> Item:
    ex = ex_for(k.where)
    if equal(k.kind, HANDLERS[k.kind].read(ex, k.params).value, prev):
        return Item(k, "restored", prev)  # e.g. a write that failed and changed nothing
    err = HANDLERS[k.kind].write(ex, k.params, prev)
    now = HANDLERS[k.kind].read(ex, k.params).value
    if err or not equal(k.kind, now, prev):
        return Item(k, "failed", now, err or f"reads {now!r}, expected {prev!r}")
    return Item(k, "restored", prev)


def _write(k: Knob, current: str | None, ex_for: ExecutorFor) -> Item:
    """Write the target and read it back: a write the kernel quietly ignored is a failure."""
    ex = ex_for(k.where)
    err = HANDLERS[k.kind].write(ex, k.params, k.target)
    if err is None:
        now = HANDLERS[k.kind].read(ex, k.params).value
        if not k.satisfied(now):
            err = f"reads {now!r} after writing {k.target!r}"
    return Item(k, "failed", current, err) if err else Item(k, "applied", current)


def _gone(k: Knob, where: str) -> Item:
    return Item(k, "gone", None, f"the {where} kernel it was set in no longer exists: the setting went with it")


def _drop(rec: TuneRecord, ex_for: ExecutorFor, identity: Identity | None,
          keep: Callable[[Knob], bool]) -> list[Item]:
    """Restore (newest first) the record's changes that `keep` rejects; stale ones are gone."""
    out: list[Item] = []
    kept: list[dict[str, object]] = []
    for e in reversed(rec.entries):
        k, prev = Knob.from_entry(e), str(e["previous"])
        if _stale(k.where, rec, identity):
            out.append(_gone(k, k.where))
        elif keep(k):
            kept.append(e)
        else:
            item = _restore(k, prev, ex_for)
            out.append(item)
            if item.status == "failed":
                kept.append(e)
    rec.entries = list(reversed(kept))
    return out


def reconcile(knobs: list[Knob], ex_for: ExecutorFor, path: Path, gateway: str, role: str,
              identity: Identity | None = None, groups: Iterable[str] = ()) -> list[Item]:
    """Make the kernel match `knobs` and the record match the kernel.

    Changes the record holds for knobs no longer asked for are restored first; changes in a
    replaced kernel are dropped. Then every asked-for knob off its target is written, its
    previous value saved before the write (a second run keeps the first previous value, so
    a revert restores the original). Refused and failed knobs are recorded with the reason.
    """
    rec = TuneRecord.load(path) or TuneRecord(gateway, role, time.time(), [])
    wanted = {k.key for k in knobs}
    out = _drop(rec, ex_for, identity, keep=lambda k: k.key in wanted)
    rec.identity = {w: i for w, i in (identity or {}).items() if i is not None}
    rec.groups = list(groups)
    rec.refused = []
    rec.ok = 0
    known = {Knob.from_entry(e).key for e in rec.entries}
    for item in plan(knobs, ex_for):
        k = item.knob
        if item.status == "change":
            if k.key not in known:
                rec.entries.append(_entry(k, previous=item.current))
                rec.save(path)
            item = _write(k, item.current, ex_for)
        if item.status in ("unsupported", "failed"):
            rec.refused.append(_entry(k, status=item.status, reason=item.reason))
        rec.ok += item.status == "ok"
        out.append(item)
    rec.save_or_remove(path)
    return out


def note_host(path: Path, gateway: str, role: str, refused: list[Item], held: list[str]) -> None:
    """Add to the record what happened to the host-wide knobs (whose values hostwide.py keeps)."""
    rec = TuneRecord.load(path) or TuneRecord(gateway, role, time.time(), [])
    rec.refused += [_entry(i.knob, status=i.status, reason=i.reason) for i in refused]
    rec.host_held = held
    rec.save_or_remove(path)


def apply(knobs: list[Knob], ex_for: ExecutorFor, path: Path, gateway: str, role: str,
          identity: Identity | None = None) -> list[Item]:
    """Write every knob off target and keep what the record already holds (`tune apply`)."""
    rec = TuneRecord.load(path)
    held = [k for k, _ in rec.knobs()] if rec else []
    asked = {k.key for k in knobs}
    items = reconcile([*knobs, *(k for k in held if k.key not in asked)], ex_for, path, gateway, role, identity)
    return [i for i in items if i.knob.key in asked or i.status == "gone"]


def verify(knobs: list[Knob], ex_for: ExecutorFor) -> list[Item]:
    return [Item(i.knob, "drift", i.current) if i.status == "change" else i for i in plan(knobs, ex_for)]


def revert(ex_for: ExecutorFor, path: Path, identity: Identity | None = None, missing_ok: bool = False) -> list[Item]:
    """Restore every change of the record, newest first; what cannot be restored stays recorded."""
    rec = TuneRecord.load(path)
    if rec is None:
        if missing_ok:
            return []
        raise GatewayError(f"nothing to revert: no tuning record {path}")
    out = _drop(rec, ex_for, identity, keep=lambda k: False)
    rec.refused = []
    rec.save_or_remove(path)
    return out
