"""Write only the difference between what the switch holds and what the controller wants."""

from __future__ import annotations

from collections.abc import Iterable

from finsy import P4TableEntry
from finsy.p4schema import P4Schema

from supergw_controller.southbound.entities import Op, Update, action_sig, entry_key


def diff_entries(
    schema: P4Schema,
    desired: Iterable[P4TableEntry],
    actual: Iterable[P4TableEntry],
    *,
    delete_extra: bool = True,
) -> list[Update]:
    """INSERT what is missing, MODIFY what differs, DELETE (optionally) what is extra.

    Entries that already match produce no update, so re-running after a restart writes
    nothing and disturbs no traffic.
    """
    have = {entry_key(schema, e): e for e in actual}
    want = {entry_key(schema, e): e for e in desired}
    out: list[Update] = []
    for key, e in want.items():
        cur = have.get(key)
        if cur is None:
            out.append(Update(Op.INSERT, e))
        elif action_sig(schema, cur) != action_sig(schema, e) or _idle(cur) != _idle(e):
            out.append(Update(Op.MODIFY, e))
    if delete_extra:
        out.extend(Update(Op.DELETE, e) for key, e in have.items() if key not in want)
    return out


def _idle(e: P4TableEntry) -> int:
    return e.idle_timeout_ns or 0
