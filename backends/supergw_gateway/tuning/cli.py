"""`supergw-gateway tune ...`: build the profile for a gateway or an endpoint and act on it."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from supergw_gateway.config import Backend, GatewayConfig
from supergw_gateway.errors import GatewayError
from supergw_gateway.executor import Executor, LocalExecutor
from supergw_gateway.tuning import plan as tplan
from supergw_gateway.tuning.profile import ProfileInput, Role, build


def _parse_mtus(specs: list[str]) -> dict[str, int]:
    out = {}
    for s in specs:
        dev, sep, val = s.partition("=")
        if not sep or not val.isdigit() or not (576 <= int(val) <= 65535):
            raise GatewayError(f"--mtu wants DEV=N with 576 <= N <= 65535, got {s!r}")
        out[dev] = int(val)
    return out


def target_for(cfg: GatewayConfig, role: Role, netns: str | None) -> tuple[Executor, bool, bool]:
    """(executor, whole_kernel, libipsec) for the thing being tuned."""
    from supergw_gateway.runtime import Gateway

    if role == "endpoint" and netns:
        return LocalExecutor(netns), False, False
    gw = Gateway(cfg)
    st = gw.backend_state()
    if cfg.backend is Backend.UML:
        if gw.charon_pid() is None:
            raise GatewayError(f"UML gateway {cfg.name} is not running: `supergw-gateway up` first")
        return gw.executor(), True, False
    return gw.executor(), False, bool(st and st.esp == "libipsec")


def profile_input(cfg: GatewayConfig, role: Role, ex: Executor, whole_kernel: bool, libipsec: bool,
                  path_mtu: dict[str, int], host_wide: bool) -> ProfileInput:
    cpus = ex.run(["nproc"], check=False).stdout.strip()
    wan = next(i for i in cfg.interfaces if i.role == "wan")
    return ProfileInput(
        role=role, where=ex.where, whole_kernel=whole_kernel,
        devices=[i.device for i in cfg.interfaces] if role == "gateway" else [],
        cpus=int(cpus) if cpus.isdigit() else 1, libipsec=libipsec,
        wan_device=wan.device, wan_mtu=wan.mtu or 1500, path_mtu=path_mtu, host_wide=host_wide,
    )


def run_tune(cfg: GatewayConfig, a: argparse.Namespace) -> int:
    role: Role = a.role
    ex, whole, libipsec = target_for(cfg, role, a.netns)
    host = LocalExecutor()

    def ex_for(where: str) -> Executor:
        return host if where == "host" else ex

    inp = profile_input(cfg, role, ex, whole, libipsec, _parse_mtus(a.mtu or []), a.host_wide)
    knobs = build(inp).knobs
    suffix = f"-{a.netns}" if role == "endpoint" and a.netns else ""
    state: Path = a.state or cfg.run_dir / f"tune-{role}{suffix}.json"
    if a.action == "plan" or (a.action == "apply" and a.dry_run):
        items = tplan.plan(knobs, ex_for)
        bad: tuple[str, ...] = ()
    elif a.action == "apply":
        items = tplan.apply(knobs, ex_for, state, cfg.name, role)
        bad = ("failed",)
    elif a.action == "verify":
        items = tplan.verify(knobs, ex_for)
        bad = ("drift",)
    else:
        items = tplan.revert(ex_for, state)
        bad = ("failed",)
    for it in items:
        print(it.line())
    counts = Counter(it.status for it in items)
    print(f"tune {a.action}{' --dry-run' if a.dry_run else ''} ({role}, {ex.where}): "
          + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) + (f"; state {state}" if a.action != "plan" else ""))
    return 1 if any(it.status in bad for it in items) else 0
