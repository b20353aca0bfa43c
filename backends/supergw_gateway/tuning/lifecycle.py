"""The tuning profile in a gateway's lifecycle.

`up` applies what the config's `tuning` section asks, after finding where each knob can
live: the gateway's namespace (or its UML guest, a whole kernel), the namespace around a
UML guest (its NICs' veths), or the host (host-wide sysctls, only with `host_wide`, held by
reference among the machine's gateways). What a place cannot take is refused with the
reason, never skipped. Every change goes to the record (`<run_dir>/tuning.json`) before it
is made; `down` restores exactly the record, also after a crashed `up`. /health and the
reports read the same record.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from supergw_proto.reports import TuningState

from supergw_gateway.config import GatewayConfig
from supergw_gateway.errors import GatewayError
from supergw_gateway.executor import Executor, LocalExecutor
from supergw_gateway.tuning import plan as tplan
from supergw_gateway.tuning.groups import Group
from supergw_gateway.tuning.hostwide import HostKnobs
from supergw_gateway.tuning.knobs import Knob
from supergw_gateway.tuning.profile import ProfileInput, Role, build

log = logging.getLogger(__name__)

RECORD_NAME = "tuning.json"
_IDENTITY = "cat /proc/sys/kernel/random/boot_id && stat -L -c %i /proc/self/ns/net"


@dataclass(frozen=True)
class Target:
    """Where one gateway's knobs live, and whether those places still exist."""

    here: Executor  # the gateway's kernel: its namespace, or its UML guest
    whole_kernel: bool  # a UML guest: the host-wide sysctls are the guest's own
    libipsec: bool
    here_alive: bool = True  # False: the namespace or guest is gone, and its settings with it
    outer: Executor | None = None  # UML: the namespace whose veths carry the guest's NICs
    outer_alive: bool = True
    host: Executor = field(default_factory=LocalExecutor)

    def executor_for(self, where: str) -> Executor:
        if where == "host":
            return self.host
        if where == "outer":
            if self.outer is None:
                raise GatewayError("a knob for the namespace around a UML guest, but the gateway has no guest")
            return self.outer
        return self.here

    def identity(self) -> dict[str, str | None]:
        """The kernel behind each place now (boot id + netns inode); None where it is gone.

        A namespace deleted and made again under the same name, or a rebooted guest, gets a
        new identity, so a record from before is known to describe settings that are gone.
        """
        out: dict[str, str | None] = {"here": _identity(self.here) if self.here_alive else None}
        if self.outer is not None:
            out["outer"] = _identity(self.outer) if self.outer_alive else None
        return out


def _identity(ex: Executor) -> str:
    r = ex.run(["sh", "-c", _IDENTITY], check=False, timeout=10)
    if r.returncode != 0:
        raise GatewayError(f"cannot tell which kernel {ex.where} is ({r.stderr.strip() or r.stdout.strip()})")
    return ":".join(r.stdout.split())


def profile_input(cfg: GatewayConfig, role: Role, target: Target, groups: tuple[Group, ...],
                  path_mtu: dict[str, int], host_wide: bool, devices: list[str] | None = None) -> ProfileInput:
    cpus = target.here.run(["nproc"], check=False).stdout.strip()
    wan = next(i for i in cfg.interfaces if i.role == "wan")
    return ProfileInput(
        role=role, where=target.here.where, whole_kernel=target.whole_kernel,
        devices=devices if devices is not None else [i.device for i in cfg.interfaces],
        cpus=int(cpus) if cpus.isdigit() else 1, libipsec=target.libipsec,
        wan_device=wan.device, wan_mtu=wan.mtu or 1500, path_mtu=path_mtu, host_wide=host_wide,
        groups=groups, outer=target.outer.where if target.outer is not None and role == "gateway" else None,
    )


class GatewayTuning:
    """One gateway's tuning as its config asks: applied by `up`, reverted by `down`."""

    def __init__(self, cfg: GatewayConfig, target: Target, hosts: HostKnobs | None = None) -> None:
        self.cfg, self.target = cfg, target
        self.hosts = hosts if hosts is not None else HostKnobs(target.host)

    @property
    def holder(self) -> str:
        """Its name among the holders of host-wide knobs: its run directory, unique per machine."""
        return str(self.cfg.run_dir)

    def knobs(self) -> list[Knob]:
        t = self.cfg.tuning
        return build(profile_input(self.cfg, "gateway", self.target, tuple(t.knobs), dict(t.path_mtu),
                                   t.host_wide)).knobs

    def up(self) -> list[tplan.Item]:
        """Apply the config's profile; with tuning off, restore whatever an earlier `up` left."""
        if not self.cfg.tuning.enabled:
            return self.down()
        return tune(self.knobs(), self.target, record_path(self.cfg), self.cfg.name, "gateway", self.holder,
                    self.hosts, self.cfg.tuning.knobs)

    def down(self) -> list[tplan.Item]:
        """Restore every change the record holds, and let go of host-wide knobs."""
        return untune(self.target, record_path(self.cfg), self.cfg.name, self.holder, self.hosts)


def tune(knobs: list[Knob], target: Target, path: Path, name: str, role: Role, holder: str, hosts: HostKnobs,
         groups: Iterable[str] = ()) -> list[tplan.Item]:
    """Make `target` match `knobs`: its own knobs through the record at `path`, host-wide ones
    held in `hosts` under `holder`; what is refused lands in the record too."""
    host = [k for k in knobs if k.where == "host"]
    local = [k for k in knobs if k.where != "host"]
    items = tplan.reconcile(local, target.executor_for, path, name, role, target.identity(), groups)
    host_items = hosts.release(holder, keep={k.key for k in host}) + hosts.acquire(holder, host)
    tplan.note_host(path, name, role, [i for i in host_items if i.status in ("unsupported", "failed")],
                    hosts.held_by(holder))
    return items + host_items


def untune(target: Target, path: Path, name: str, holder: str, hosts: HostKnobs,
           role: Role = "gateway") -> list[tplan.Item]:
    """Restore every change the record at `path` holds, and let go of `holder`'s host-wide knobs."""
    items = tplan.revert(target.executor_for, path, target.identity()) if path.exists() else []
    items += hosts.release(holder)
    if path.exists():  # what could not be restored stays on record for the next `down`
        tplan.note_host(path, name, role, [], hosts.held_by(holder))
    return items


def record_path(cfg: GatewayConfig) -> Path:
    return cfg.run_dir / RECORD_NAME


def health(cfg: GatewayConfig) -> dict[str, object]:
    """What /health says: applied (with the value each knob had before), refused and why."""
    out: dict[str, object] = {"enabled": cfg.tuning.enabled, "record": str(record_path(cfg))}
    try:
        rec = tplan.TuneRecord.load(record_path(cfg))
    except GatewayError as exc:
        return out | {"error": str(exc)}
    if rec is None:
        out["state"] = ("not applied yet (`supergw-gateway up` applies it)" if cfg.tuning.enabled
                        else "off (no `tuning: {enabled: true}` in the config)")
        return out
    if not cfg.tuning.enabled:
        out["state"] = "off in the config, but a record of changes remains: `down` (or `up`) restores them"
    out |= {
        "groups": rec.groups, "updated": rec.updated, "already_at_target": rec.ok,
        "applied": [{"knob": k.label, "scope": k.scope, "group": k.group, "value": k.target, "previous": prev}
                    for k, prev in rec.applied()],
        "host_wide_held": rec.host_held,
        "refused": [{"knob": Knob.from_entry(e).label, "scope": str(e["scope"]), "group": str(e.get("group", "")),
                     "status": str(e["status"]), "reason": str(e["reason"])} for e in rec.refused],
    }
    return out


def summary(cfg: GatewayConfig) -> TuningState | None:
    """The report's short form of the record; None when the record cannot be read."""
    try:
        rec = tplan.TuneRecord.load(record_path(cfg))
    except GatewayError as exc:
        log.warning("%s", exc)
        return None
    if rec is None:
        return TuningState(enabled=cfg.tuning.enabled, groups=[], applied=0, refused=0, failed=0)
    statuses = [str(e["status"]) for e in rec.refused]
    return TuningState(enabled=cfg.tuning.enabled, groups=rec.groups, applied=len(rec.applied()) + len(rec.host_held),
                       refused=statuses.count("unsupported"), failed=statuses.count("failed"))

