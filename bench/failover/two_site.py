"""Failover on the two-site emulation (both directions): real agents, real tunnels, shipped defaults.

`measure(trials)` is the interface bench/scaling calls; `python -m bench.failover --two-site`
writes bench/results/failover-two-site.{json,md,png}.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from topologies.twosite import TWO_SITE_TOPOLOGY

KINDS = ("freeze", "kill", "link")


class BenchError(RuntimeError):
    """The emulation could not be booted, probed or restored; the message says what to do."""


def measure(trials: int = 5, kinds: Sequence[str] = KINDS, topology: Path = TWO_SITE_TOPOLOGY) -> dict[str, float]:
    """Median longest gap (ms) over `trials` trials per kind of failure of a site A gateway.

    Uses the running two-site emulation when one is up (state `kind: two-site`, phase up);
    otherwise boots `topology` and stops it afterwards. Needs root; call it under
    `flock /tmp/supergw-netns.lock`. Keys, for each kind in `kinds`:
    `failover_<kind>_ms` (the worse direction's median), `failover_<kind>_a_to_b_ms` and
    `failover_<kind>_b_to_a_ms` (median gap of a flow entering the victim's pair at site A,
    resp. site B), `failover_<kind>_max_ms` (worst trial, either direction).
    Raises `BenchError` (bench.failover.two_site) when the emulation cannot be booted or probed.
    """
    raise NotImplementedError("two-site failover measurement: being written (H2)")
