"""The bucket map as `GET /buckets` answers it: the K `BucketView`s encoded as JSON once,
and that body reused until something a `BucketView` shows changes.

A `BucketView` shows its index and vmac (fixed by the config), the gateway holding it (the
southbound's mirror of the bucket table: `set_buckets`, `refresh_buckets`, `reconcile`), its pin
(placement's `pins`: `pin`, `unpin`, `load_intent`) and its counters (`BucketStats.update`).
A body is reused only while all three are what it was built from: the counters by
`BucketStats.generation` (their one writer counts its changes), the map and the pins by
content, two dict comparisons done in C (~0.03 ms at K = 4096). Comparing content instead of
bumping a version in each of the six places that write the map or the pins means no writer,
today's or a later one, can forget to invalidate: a move, pin or failover shows in the very
next answer.

A miss builds plain dicts and has pydantic's serializer encode them (no model per bucket:
validating 4096 models cost more than encoding them); `row` is the one place that says what a
bucket shows, `ReadModel.bucket_view` validates it into a `BucketView`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from pydantic import TypeAdapter

from supergw_controller.bucket_stats import BucketStats

# pydantic's serializer on the row dicts: byte for byte what `TypeAdapter(list[BucketView])`
# makes of the same values (controller/tests/test_bucket_list.py compares the two).
_ROWS = TypeAdapter(list[dict[str, Any]])


class Placed(Protocol):
    """What `BucketList` reads of placement; both are looked up on every call (a reconcile
    or a takeover replaces the objects, not only their contents)."""

    @property
    def assignment(self) -> Mapping[int, str]: ...

    @property
    def pins(self) -> Mapping[int, str]: ...


class BucketList:
    def __init__(self, vmacs: Sequence[str], placed: Placed, stats: BucketStats) -> None:
        self._vmacs = vmacs  # one per bucket: K is len(vmacs)
        self._placed = placed
        self._stats = stats
        # What the cached bodies were built from: (assignment, pins) copies, counters' generation.
        self._built_from: tuple[dict[int, str], dict[int, str], int] | None = None
        self._bodies: dict[str | None, bytes] = {}  # by gateway filter (None: all K); at most N + 1

    def row(self, b: int) -> dict[str, Any]:
        """Bucket `b` as `BucketView`'s fields, in their order."""
        return self._rows((b,))[0]

    def _rows(self, picked: Iterable[int]) -> list[dict[str, Any]]:
        held, pins, vmacs = self._placed.assignment, self._placed.pins, self._vmacs
        totals, rates = self._stats.totals, self._stats.rates
        rows = []
        for b in picked:
            pkts, byts = totals.get(b, (0, 0))
            rate = rates.get(b)
            rows.append({
                "bucket": b,
                "vmac": vmacs[b],
                "gateway": held.get(b),
                "pinned": pins.get(b),
                "packets": pkts,
                "bytes": byts,
                "pps": rate.pps if rate else 0.0,
                "bps": rate.bps if rate else 0.0,
            })  # fmt: skip
        return rows

    def body(self, gateway: str | None = None) -> bytes:
        """The JSON list of the buckets in index order; with `gateway`, only those it holds
        (the caller checks that it is a known gateway: the cache keeps one body per name)."""
        self._forget_if_changed()
        body = self._bodies.get(gateway)
        if body is None:
            held = self._placed.assignment
            every = range(len(self._vmacs))
            picked = every if gateway is None else (b for b in every if held.get(b) == gateway)
            body = self._bodies[gateway] = _ROWS.dump_json(self._rows(picked))
        return body

    def _forget_if_changed(self) -> None:
        assignment, pins, generation = self._placed.assignment, self._placed.pins, self._stats.generation
        built = self._built_from
        if built is not None and built[2] == generation and built[0] == assignment and built[1] == pins:
            return
        self._bodies.clear()
        self._built_from = (dict(assignment), dict(pins), generation)
