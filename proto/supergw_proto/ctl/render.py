"""The API's answers as plain-text tables for a terminal (`--json` prints the API's JSON)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from supergw_proto.api import BucketView, ClientView, EventView, GatewayView, HostPage, HostView, RebalanceView, StatusView

NONE = "-"


def cell(value: object) -> str:
    if value is None:
        return NONE
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"
    return str(value)


def table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """Columns left-aligned, two spaces apart; `-` for an absent value."""
    text = [list(headers)] + [[cell(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in text) for i in range(len(headers))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in text)


def pairs(rows: Sequence[tuple[str, object]]) -> str:
    """Two columns, name and value: one object."""
    return table(("", ""), rows).split("\n", 1)[1]


def rate(value: float, unit: str) -> str:
    """1234567 -> '1.23M' + unit: rates at a glance."""
    for factor, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g}{prefix}{unit}"
    return f"{value:.3g}{unit}"


def age(seconds: float | None) -> str:
    return NONE if seconds is None else f"{seconds:.1f}s"


def when(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S")


def counts(by: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(by.items())) or "0"


def status(s: StatusView) -> str:
    return pairs([
        ("role", f"{s.role}{' (reconciling the switch)' if s.role == 'primary' and not s.reconciled else ''} "
                 f"({'connected to' if s.connected else 'NOT connected to'} switch {s.switch_address}, "
                 f"device {s.device_id}, election id {s.election_id})"),
        ("gateways", f"{s.gateways_alive} of {s.gateways_total} alive"),
        ("buckets", f"{s.buckets} ({s.buckets_unassigned} unassigned)"),
        ("hosts", s.hosts),
        ("imbalance", f"{s.imbalance:.2f} (max/mean of weighted loads; 1.00 = balanced)"),
        ("gateway ip", f"{s.gateway_ip} (vmac base {s.vmac_base})"),
        ("pipeline cookie", s.pipeline_cookie),
        ("uptime", age(s.uptime_s)),
        ("failovers", s.failovers_total),
        ("moves", counts(s.moves_total)),
        ("reports", s.reports_total),
        ("heartbeats", s.heartbeats_total),
        ("heartbeats rejected", counts(s.heartbeats_rejected)),
        ("digests", s.digests_total),
        ("packet-ins", s.packet_ins_total),
        ("arp misses (unknown ip)", s.arp_misses_unknown_total),
        ("p4runtime errors", s.p4rt_errors_total),
        ("reconnects", s.reconnects_total),
    ]) + replication(s)


def replication(s: StatusView) -> str:
    """The remote-access takeover section of `status` (empty without remote access)."""
    r = s.replication
    if r is None:
        return ""
    head = (f"\n\nreplication: takeover {'on' if r.takeover else 'off'}, orders generation {r.generation}, "
            f"{r.takeovers_total} takeovers since start")
    rows = table(
        ("GATEWAY", "BACKUP", "PROTECTS", "OWN SAS", "REPLICATED", "HELD", "LAG MS", "LAG MAX MS", "FENCED",
         "TAKEN OVER BY", "TAKING OVER", "FOREIGN SAS", "ERROR"),
        ((g.gateway, g.backup, g.protects, g.own_sas, g.replicated_sas, g.held_sas, g.lag_ms_last, g.lag_ms_max,
          g.fenced, g.taken_over_by, ",".join(g.taking_over) or None,
          ", ".join(f"{k} {v}" for k, v in sorted(g.foreign_sas.items())) or None, g.error)
         for g in r.gateways),
    )
    return f"{head}\n{rows}"


GATEWAY_HEADERS = ("NAME", "STATE", "ALIVE", "TUNNEL", "PARTNER", "PORT", "WEIGHT", "BUCKETS", "LOAD", "HEARTBEAT",
                   "REPORT", "BACKUP", "REPLICATED", "LAG MS", "FENCED", "WHY")


def gateway_row(g: GatewayView) -> tuple[object, ...]:
    return (g.name, g.state, g.alive, g.tunnel_up, g.partner_up, g.port, g.weight, g.buckets, g.load,
            age(g.heartbeat_age_s), age(g.report_age_s), g.backup, g.replicated_sas, g.replication_lag_ms, g.fenced,
            g.unhealthy or g.withheld)


def gateways(gws: Sequence[GatewayView]) -> str:
    return table(GATEWAY_HEADERS, map(gateway_row, gws))


def gateway(g: GatewayView) -> str:
    rows: list[tuple[str, object]] = [
        ("name", g.name), ("state", g.state), ("drained", g.drained), ("alive", g.alive), ("unhealthy", g.unhealthy),
        ("port", f"{g.port} (up: {cell(g.port_up)})"), ("mac", g.mac), ("tunnel up", g.tunnel_up),
        ("partner up", g.partner_up), ("weight", g.weight), ("buckets", g.buckets), ("load", g.load),
        ("heartbeat age", age(g.heartbeat_age_s)), ("report age", age(g.report_age_s)),
    ]
    if g.fenced is not None:
        rows += [("backup", g.backup), ("replicated SAs", g.replicated_sas),
                 ("replication lag", NONE if g.replication_lag_ms is None else f"{g.replication_lag_ms:.1f} ms"),
                 ("fenced", g.fenced), ("taken over by", g.taken_over_by), ("withheld", g.withheld)]
    r = g.last_report
    if r is not None:
        rows += [
            ("backend", r.backend),
            ("cpu", f"{r.cpu_percent:.1f}% of {r.cpu_cores:g} cores (charon {r.charon_cpu_percent:.1f}%, "
                    f"softirq {r.softirq_percent:.1f}%)"),
            ("tunnel bytes", f"in {r.tunnel_bytes_in}, out {r.tunnel_bytes_out}"),
            ("SAs", len(r.sas) if r.sa_error is None else f"unknown: {r.sa_error}"),
        ]
    return pairs(rows)


def buckets(bs: Sequence[BucketView]) -> str:
    return table(("BUCKET", "VMAC", "GATEWAY", "PINNED", "PPS", "RATE", "PACKETS", "BYTES"),
                 ((b.bucket, b.vmac, b.gateway, b.pinned, rate(b.pps, ""), rate(b.bps, "B/s"), b.packets, b.bytes)
                  for b in bs))


def hosts(hs: Sequence[HostView]) -> str:
    return table(("MAC", "IP", "IPV6", "PORT", "BUCKET", "VMAC", "GATEWAY", "IDLE", "LEARNED"),
                 ((h.mac, h.ip, ",".join(h.ipv6) or None, h.port, h.bucket, h.vmac, h.gateway, age(h.idle_s), h.learned)
                  for h in hs))


def host_page(page: HostPage, next_command: str | None) -> str:
    """The page's hosts, how many matched of how many in all, and the next page's command."""
    shown = len(page.hosts)
    said = f"{shown} of {page.matched} matching hosts shown ({page.total} learned in all)"
    if next_command is not None:
        said += f"; next page: {next_command}"
    return f"{hosts(page.hosts)}\n\n{said}"


def clients(cs: Sequence[ClientView]) -> str:
    per_gateway: dict[str, int] = {}
    for c in cs:
        per_gateway[c.gateway] = per_gateway.get(c.gateway, 0) + 1
    summary = ", ".join(f"{g}: {n}" for g, n in sorted(per_gateway.items())) or "no clients"
    rows = table(("GATEWAY", "IDENTITY", "ADDRESS", "PORT", "VIPS", "SINCE (UTC)", "PRESENT", "PINNED", "BYTES IN", "BYTES OUT"),
                 ((c.gateway, c.identity, c.remote_host, c.remote_port, " ".join(c.vips), when(c.established_at), c.present,
                   c.pinned, c.bytes_in, c.bytes_out) for c in sorted(cs, key=lambda c: (c.gateway, c.identity))))
    return f"{rows}\n\nclients per gateway: {summary}"


def events(es: Sequence[EventView]) -> str:
    return table(("ID", "TIME (UTC)", "KIND", "REASON", "BUCKET", "FROM", "TO", "WHO", "DETAIL"),
                 ((e.id, when(e.ts), e.kind, e.reason, e.bucket, e.src, e.dst, e.who, e.detail) for e in es))


def rebalance(r: RebalanceView) -> str:
    if r.dry_run:
        head = f"dry run: {len(r.moves)} moves planned, nothing written"
    else:
        head = f"{len(r.moves)} moves applied" if r.applied else "nothing to move"
    loads = table(("GATEWAY", "LOAD BEFORE", "LOAD AFTER"),
                  ((g, r.load_before.get(g), r.load_after.get(g)) for g in sorted(r.load_before.keys() | r.load_after.keys())))
    parts = [head, f"imbalance (max/mean): {r.ratio_before:.2f} -> {r.ratio_after:.2f}", "", loads]
    if r.moves:
        parts += ["", table(("BUCKET", "FROM", "TO", "REASON"), ((m.bucket, m.src, m.dst, m.reason) for m in r.moves))]
    parts += [f"warning: {w}" for w in r.warnings]
    return "\n".join(parts)
