"""Host-wide knobs shared by every gateway on the machine, held and released by reference.

A sysctl such as `net.core.rmem_default` exists once per kernel: every namespace on the
machine sees the host's value. When several gateways each ask for it, the first one to
change it records the original value, every gateway that relies on it is a holder, and only
the last holder to leave restores it, so one gateway's `down` never pulls a setting from
under another that is still up. The record lives at one path per machine, under a file
lock, and is saved before each write (a crash leaves it accurate).
"""

from __future__ import annotations

import fcntl
import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path

from supergw_gateway.errors import GatewayError
from supergw_gateway.executor import Executor
from supergw_gateway.tuning.knobs import HANDLERS, Knob, equal
from supergw_gateway.tuning.plan import Item

HOST_RECORD = Path("/run/sgw-gw/host-tuning.json")


class HostKnobs:
    """The machine's host-wide knobs; holders are gateway names (unique per machine)."""

    def __init__(self, host: Executor, path: Path = HOST_RECORD) -> None:
        self.host, self.path = host, path

    @contextmanager
    def _locked(self) -> Iterator[dict[str, dict[str, object]]]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_suffix(".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            entries = self._load()
            yield entries
            self._save(entries)

    def _load(self) -> dict[str, dict[str, object]]:
        try:
            entries = json.loads(self.path.read_text())["entries"]
            for e in entries.values():
                Knob.from_entry(e)
                if "previous" not in e or not isinstance(e.get("holders"), list):
                    raise ValueError(f"entry without previous value or holders: {e!r}")
            return dict(entries)
        except FileNotFoundError:
            return {}
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise GatewayError(f"host tuning record {self.path} is corrupt ({exc}): restore the values it lists "
                               "by hand, then delete it") from None

    def _save(self, entries: dict[str, dict[str, object]]) -> None:
        if not entries:
            self.path.unlink(missing_ok=True)
            return
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"entries": entries}, indent=2))
        tmp.rename(self.path)

    def held_by(self, holder: str) -> list[str]:
        with self._locked() as entries:
            return [key for key, e in entries.items() if holder in _holders(e)]

    def acquire(self, holder: str, knobs: Iterable[Knob]) -> list[Item]:
        out = []
        with self._locked() as entries:
            for k in knobs:
                h = HANDLERS[k.kind]
                r = h.read(self.host, k.params)
                e = entries.get(k.key)
                if r.value is None:
                    out.append(Item(k, "unsupported", None, r.reason))
                    continue
                if e is not None and e["target"] != k.target:
                    out.append(Item(k, "failed", r.value, f"held at {e['target']!r} by {', '.join(_holders(e))}"))
                    continue
                if e is None and k.satisfied(r.value):
                    out.append(Item(k, "ok", r.value))  # not ours: nothing to restore later
                    continue
                if e is None:
                    e = entries[k.key] = {**asdict(k), "previous": r.value, "holders": []}
                if holder not in _holders(e):
                    e["holders"] = [*_holders(e), holder]
                self._save(entries)
                if k.satisfied(r.value):
                    out.append(Item(k, "ok", r.value))
                    continue
                err = h.write(self.host, k.params, k.target)
                out.append(Item(k, "failed", r.value, err) if err else Item(k, "applied", r.value))
        return out

    def release(self, holder: str, keep: Iterable[str] = ()) -> list[Item]:
        """Let go of every knob `holder` holds except `keep` (keys); the last holder restores."""
        out = []
        kept = set(keep)
        with self._locked() as entries:
            for key, e in list(entries.items()):
                holders = _holders(e)
                if holder not in holders or key in kept:
                    continue
                k = Knob.from_entry(e)
                rest = [h for h in holders if h != holder]
                if rest:
                    e["holders"] = rest
                    out.append(Item(k, "shared", None, f"left as is: still held by {', '.join(rest)}"))
                    continue
                prev = str(e["previous"])
                h = HANDLERS[k.kind]
                unchanged = equal(k.kind, h.read(self.host, k.params).value, prev)
                err = None if unchanged else h.write(self.host, k.params, prev)
                now = h.read(self.host, k.params).value
                if err or not equal(k.kind, now, prev):
                    e["holders"] = [holder]  # keep it: the next release retries
                    out.append(Item(k, "failed", now, err or f"reads {now!r}, expected {prev!r}"))
                else:
                    del entries[key]
                    out.append(Item(k, "restored", prev))
        return out


def _holders(e: dict[str, object]) -> list[str]:
    h = e.get("holders")
    return [str(x) for x in h] if isinstance(h, list) else []
