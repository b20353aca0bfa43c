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

On a change the K rows, plain dicts made once, are refilled in place and pydantic's serializer
encodes them: no model per bucket (validating 4096 models cost more than encoding them) and no
new containers, so with 50,000 hosts in memory an encode no longer sets off the full garbage
collections (~300 ms each) that made the route's tail. `_blank` and `_fill` are the one place
that says what a bucket shows; `ReadModel.bucket_view` validates a `row` into a `BucketView`.
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
        # What the rows and bodies show: (assignment, pins) copies, the counters' generation.
        self._built_from: tuple[dict[int, str], dict[int, str], int] | None = None
        # The K rows, made once and refilled in place on a change: a change allocates no
        # new containers, so encoding one sets off (almost) no garbage collection.
        self._table = [self._blank(b) for b in range(len(vmacs))]
        self._bodies: dict[str | None, bytes] = {}  # by gateway filter (None: all K); at most N + 1

    def row(self, b: int) -> dict[str, Any]:
        """Bucket `b` now, as `BucketView`'s fields in their order (a new dict)."""
        row = self._blank(b)
        self._fill((row,))
        return row

    def _blank(self, b: int) -> dict[str, Any]:
        return {"bucket": b, "vmac": self._vmacs[b], "gateway": None, "pinned": None,
                "packets": 0, "bytes": 0, "pps": 0.0, "bps": 0.0}  # fmt: skip

    def _fill(self, rows: Iterable[dict[str, Any]]) -> None:
        held, pins = self._placed.assignment, self._placed.pins
        totals, rates = self._stats.totals, self._stats.rates
        for row in rows:
            b = row["bucket"]
            row["packets"], row["bytes"] = totals.get(b, (0, 0))
            rate = rates.get(b)
            row["pps"], row["bps"] = (rate.pps, rate.bps) if rate else (0.0, 0.0)
            row["gateway"], row["pinned"] = held.get(b), pins.get(b)

    def body(self, gateway: str | None = None) -> bytes:
        """The JSON list of the buckets in index order; with `gateway`, only those it holds
        (the caller checks that it is a known gateway: the cache keeps one body per name)."""
        if self._changed():
            self._bodies.clear()
            self._fill(self._table)
        body = self._bodies.get(gateway)
        if body is None:
            rows = self._table if gateway is None else [r for r in self._table if r["gateway"] == gateway]
            body = self._bodies[gateway] = _ROWS.dump_json(rows)
        return body

    def _changed(self) -> bool:
        """Whether the map, the pins or the counters differ from what the rows show (and if
        so, note what they are now)."""
        assignment, pins, generation = self._placed.assignment, self._placed.pins, self._stats.generation
        built = self._built_from
        if built is not None and built[2] == generation and built[0] == assignment and built[1] == pins:
            return False
        self._built_from = (dict(assignment), dict(pins), generation)
        return True
