"""`supergw-gateway tune ...`: build the profile for a gateway or an endpoint and act on it.

By default it takes the config's `tuning` section (knob groups, path MTUs, host-wide), so
`tune plan` shows exactly what `up` would change; the flags widen or narrow that. Its own
record (`tune-<role>.json`) is apart from the lifecycle's (`tuning.json`): a manual
`tune revert` never undoes what `up` applied, nor `down` what `tune apply` did.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from supergw_gateway.config import Backend, GatewayConfig
from supergw_gateway.errors import GatewayError
from supergw_gateway.executor import LocalExecutor
from supergw_gateway.tuning import plan as tplan
from supergw_gateway.tuning.groups import ENDPOINT_GROUPS, GATEWAY_GROUPS, Group, parse_groups
from supergw_gateway.tuning.lifecycle import Target, profile_input
from supergw_gateway.tuning.profile import Role, build


def _parse_mtus(specs: list[str]) -> dict[str, int]:
    out = {}
    for s in specs:
        dev, sep, val = s.partition("=")
        if not sep or not val.isdigit() or not (576 <= int(val) <= 65535):
            raise GatewayError(f"--mtu wants DEV=N with 576 <= N <= 65535, got {s!r}")
        out[dev] = int(val)
    return out


def target_for(cfg: GatewayConfig, role: Role, netns: str | None) -> Target:
    """Where the knobs of the thing being tuned live."""
    from supergw_gateway.runtime import Gateway

    if role == "endpoint":
        if not netns:
            raise GatewayError("--role endpoint needs --netns NS: the TCP endpoint's namespace")
        return Target(here=LocalExecutor(netns), whole_kernel=False, libipsec=False)
    gw = Gateway(cfg)
    if cfg.backend is Backend.UML and gw.charon_pid() is None:
        raise GatewayError(f"UML gateway {cfg.name} is not running: `supergw-gateway up` first")
    return gw.tuning_target()


def groups_for(cfg: GatewayConfig, role: Role, text: str | None) -> tuple[Group, ...]:
    """The knob groups `tune` acts on: `--knobs`, else the config's for a gateway, all for an endpoint."""
    try:
        asked = parse_groups(text) if text else None
    except ValueError as exc:
        raise GatewayError(f"--knobs: {exc}") from None
    allowed: tuple[Group, ...] = GATEWAY_GROUPS if role == "gateway" else ENDPOINT_GROUPS
    if asked is None:
        return tuple(cfg.tuning.knobs) if role == "gateway" else allowed
    if text == "all":
        return allowed
    if other := [g for g in asked if g not in allowed]:
        raise GatewayError(f"--knobs: {', '.join(other)} is not a knob group of a {role} "
                           f"(a {role} takes {', '.join(allowed)})")
    return asked


def run_tune(cfg: GatewayConfig, a: argparse.Namespace) -> int:
    role: Role = a.role
    target = target_for(cfg, role, a.netns)
    path_mtu = {**(dict(cfg.tuning.path_mtu) if role == "gateway" else {}), **_parse_mtus(a.mtu or [])}
    host_wide = a.host_wide or (role == "gateway" and cfg.tuning.host_wide)
    devices: list[str] | None = None if role == "gateway" else []
    inp = profile_input(cfg, role, target, groups_for(cfg, role, a.knobs), path_mtu, host_wide, devices)
    knobs = build(inp).knobs
    suffix = f"-{a.netns}" if role == "endpoint" and a.netns else ""
    state: Path = a.state or cfg.run_dir / f"tune-{role}{suffix}.json"
    ex_for = target.executor_for
    if a.action == "plan" or (a.action == "apply" and a.dry_run):
        items = tplan.plan(knobs, ex_for)
        bad: tuple[str, ...] = ()
    elif a.action == "apply":
        items = tplan.apply(knobs, ex_for, state, cfg.name, role, target.identity())
        bad = ("failed",)
    elif a.action == "verify":
        items = tplan.verify(knobs, ex_for)
        bad = ("drift",)
    else:
        items = tplan.revert(ex_for, state, target.identity())
        bad = ("failed",)
    for it in items:
        print(it.line())
    counts = Counter(it.status for it in items)
    print(f"tune {a.action}{' --dry-run' if a.dry_run else ''} ({role}, {target.here.where}): "
          + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) + (f"; state {state}" if a.action != "plan" else ""))
    return 1 if any(it.status in bad for it in items) else 0
