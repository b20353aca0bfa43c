"""Bounded in-memory time series of the cluster, for the dashboard's plots.

The core samples what it already knows every `interval_s` (bucket counters, bucket
assignment, the agents' last reports) into a fixed-size ring, and notes gateway state
changes and bucket moves as they happen (markers of the next sample); the REST
API serves it read-only (`GET /api/v1/history`). Nothing here touches the switch: a
sample costs one pass over the bucket rates and the gateways.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from supergw_controller.rebalancer import BucketRate
from supergw_proto.api import GatewaySample, HistoryMarker, HistorySample, HistoryView, MarkerKind
from supergw_proto.reports import GatewayReport

DEFAULT_INTERVAL_S = 1.0
# One hour at one sample per second: ~3 gateways x 3600 samples of a few floats each.
DEFAULT_CAPACITY = 3600
# Gateway markers kept between two samples (a stalled sampler must not grow without bound).
_MAX_PENDING = 1000

@dataclass(frozen=True)
class GatewayNow:
    """What the core knows about one gateway when a sample is taken."""

    name: str
    state: str
    report: GatewayReport | None
    report_age_s: float | None


@dataclass
class _TunnelRate:
    timestamp: float
    bytes_in: int
    bytes_out: int
    in_bps: float | None = None
    out_bps: float | None = None


class History:
    """The ring and the state needed to turn cumulative counters into per-sample values."""

    def __init__(
        self,
        *,
        capacity: int = DEFAULT_CAPACITY,
        interval_s: float = DEFAULT_INTERVAL_S,
        report_stale_s: float = 2.0,
    ) -> None:
        if capacity < 1:
            raise ValueError(f"history capacity must be >= 1, got {capacity}")
        if not (interval_s > 0 and math.isfinite(interval_s)):
            raise ValueError(f"history interval must be a finite number > 0, got {interval_s}")
        self.capacity = capacity
        self.interval_s = interval_s
        self._stale_s = report_stale_s
        self._samples: deque[HistorySample] = deque(maxlen=capacity)
        self._tunnels: dict[str, _TunnelRate] = {}
        self._pending: deque[HistoryMarker] = deque(maxlen=_MAX_PENDING)
        self._pending_moves: dict[str, tuple[float, int]] = {}  # reason -> (first ts, count)

    def __len__(self) -> int:
        return len(self._samples)

    def note_gateway(self, ts: float, gateway: str, died: bool, why: str) -> None:
        """A gateway died or came back (a marker in the next sample)."""
        kind: MarkerKind = "gateway_dead" if died else "gateway_recovering"
        reason = "dead" if died else "recovering"
        self._pending.append(HistoryMarker(ts=ts, kind=kind, gateway=gateway, reason=reason, count=1, detail=why))

    def note_moves(self, ts: float, by_reason: Mapping[str, int]) -> None:
        """Bucket moves written at `ts`, counted by MoveReason value (one marker per reason per sample)."""
        for reason, n in by_reason.items():
            first, count = self._pending_moves.get(reason, (ts, 0))
            self._pending_moves[reason] = (min(first, ts), count + n)

    def sample(
        self,
        ts: float,
        gateways: Sequence[GatewayNow],
        assignment: Mapping[int, str],
        rates: Mapping[int, BucketRate],
        imbalance: float,
    ) -> HistorySample:
        """Record one sample of the current state plus the markers noted since the last one."""
        buckets: dict[str, int] = {}
        pps: dict[str, float] = {}
        bps: dict[str, float] = {}
        for b, name in assignment.items():
            buckets[name] = buckets.get(name, 0) + 1
            r = rates.get(b)
            if r is not None:
                pps[name] = pps.get(name, 0.0) + r.pps
                bps[name] = bps.get(name, 0.0) + r.bps
        per_gw: dict[str, GatewaySample] = {}
        for g in gateways:
            fresh = g.report is not None and g.report_age_s is not None and g.report_age_s <= self._stale_s
            tunnel = self._tunnel_rate(g.name, g.report) if fresh else None
            per_gw[g.name] = GatewaySample(
                state=g.state,
                buckets=buckets.get(g.name, 0),
                dispatch_pps=pps.get(g.name, 0.0),
                dispatch_bps=bps.get(g.name, 0.0),
                tunnel_in_bps=tunnel.in_bps if tunnel else None,
                tunnel_out_bps=tunnel.out_bps if tunnel else None,
                cpu_percent=g.report.cpu_percent if fresh and g.report is not None else None,
            )
        s = HistorySample(
            ts=ts,
            gateways=per_gw,
            imbalance=imbalance if math.isfinite(imbalance) else 0.0,
            markers=self._take_markers(),
        )
        self._samples.append(s)
        return s

    def since(self, since: float | None, limit: int) -> HistoryView:
        """The newest `limit` samples taken after `since` (all kept ones when None), oldest first."""
        picked: list[HistorySample] = []
        truncated = False
        for s in reversed(self._samples):
            if since is not None and s.ts <= since:
                break
            if len(picked) == limit:
                truncated = True
                break
            picked.append(s)
        picked.reverse()
        return HistoryView(interval_s=self.interval_s, capacity=self.capacity, truncated=truncated, samples=picked)

    def _tunnel_rate(self, name: str, report: GatewayReport | None) -> _TunnelRate | None:
        if report is None:
            return None
        prev = self._tunnels.get(name)
        if prev is not None and report.timestamp == prev.timestamp:
            return prev  # no new report since the last sample: keep its rate
        cur = _TunnelRate(report.timestamp, report.tunnel_bytes_in, report.tunnel_bytes_out)
        if prev is not None:
            dt = report.timestamp - prev.timestamp
            # A restarted agent or charon resets its counters: no rate for that step.
            if dt > 0 and cur.bytes_in >= prev.bytes_in and cur.bytes_out >= prev.bytes_out:
                cur.in_bps = (cur.bytes_in - prev.bytes_in) / dt
                cur.out_bps = (cur.bytes_out - prev.bytes_out) / dt
        self._tunnels[name] = cur
        return cur

    def _take_markers(self) -> list[HistoryMarker]:
        markers = list(self._pending)
        markers += [
            HistoryMarker(ts=first, kind="moves", gateway=None, reason=reason, count=n)
            for reason, (first, n) in sorted(self._pending_moves.items())
        ]
        self._pending.clear()
        self._pending_moves = {}
        markers.sort(key=lambda m: m.ts)
        return markers
