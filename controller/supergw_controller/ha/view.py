"""A replica's HA state as the REST layer and metrics show it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass
class WriteWindow:
    """The switch writes one term of this replica had accepted (wall clock, seconds):
    `first_sent` just before the first left, `last_answered` just after the last was
    answered OK (or with per-update results: the switch applied it)."""

    term: int
    writes: int
    first_sent: float
    last_answered: float


def overlaps(windows: Mapping[int, tuple[str, Mapping[str, Any]]]) -> list[tuple[int, int]]:
    """Pairs of terms (older, newer) whose accepted switch writes could overlap in time:
    the older term's last write answered after the newer term's first write was sent.
    `windows` maps a term to (replica, its `/healthz` `ha.writes` entry). The split-brain
    rule of the partition test and bench/ha."""
    terms = sorted(t for t in windows if t > 0)
    out = []
    for i, older in enumerate(terms):
        for newer in terms[i + 1 :]:
            if windows[older][1]["last_answered"] >= windows[newer][1]["first_sent"]:
                out.append((older, newer))
    return out


def write_windows(views: Mapping[str, Mapping[str, Any]]) -> dict[int, tuple[str, Mapping[str, Any]]]:
    """term -> (replica, its accepted-write window), from each replica's `/healthz` `ha`
    object. Two replicas naming the same term is itself a split brain: ValueError."""
    out: dict[int, tuple[str, Mapping[str, Any]]] = {}
    for name, view in views.items():
        for w in view.get("writes", []):
            term = int(w["term"])
            if term in out:
                raise ValueError(f"two replicas wrote in term {term}: {out[term][0]} and {name}")
            out[term] = (name, w)
    return out


@dataclass
class HaView:
    replica: str
    role: str  # "leader" | "backup"
    term: int
    election_id: str
    leader: str | None
    leader_api: str | None
    takeovers: int
    writes: list[WriteWindow] = field(default_factory=list)  # the last terms this replica led


@runtime_checkable
class HaAware(Protocol):
    """A core that knows its replica's HA state (`/healthz` shows it)."""

    def ha_status(self) -> HaView: ...


def leader_label(view: HaView | None) -> str:
    """`replica (api)` of the leader, for error messages."""
    if view is None or view.leader is None:
        return "unknown (no leader elected right now)"
    return f"{view.leader} ({view.leader_api})" if view.leader_api else view.leader
