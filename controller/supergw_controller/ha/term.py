"""The P4Runtime election id of an etcd leadership term.

The term is the leader key's create_revision: etcd revisions only grow, so every new
leader has a higher term than every earlier one, and its election id is higher too. The
ids live above 2**127, over every static `switch.election_id` a single controller uses
(the default is 0:1), so a replica that is etcd leader also wins the switch's
arbitration against a stray static-id controller, and a stale leader never wins it back.
"""

from __future__ import annotations

HA_ID_BASE = 1 << 127
_MAX_TERM = (1 << 63) - 1  # etcd revisions are int64


def election_id(term: int) -> int:
    """Election id of leadership term `term` (> 0): monotonic in the term."""
    if not 0 < term <= _MAX_TERM:
        raise ValueError(f"term {term} is not an etcd revision (1..2**63-1)")
    return HA_ID_BASE | term


def term_of(eid: int) -> int | None:
    """The term whose election id is `eid`, or None for an id no term has."""
    if eid & HA_ID_BASE and 0 < eid - HA_ID_BASE <= _MAX_TERM:
        return eid - HA_ID_BASE
    return None


def format_id(eid: int) -> str:
    """`high:low`, the way the config and /status spell election ids."""
    return f"{eid >> 64}:{eid & ((1 << 64) - 1)}"
