"""Where the emulation keeps things: the repository's build outputs it runs, and the `.run/`
layout of a running emulation (state, configs, logs), in one place.

    .run/state.json               what runs: the plan, every process (pid + start time), stage results
    .run/logs/                    process logs (one site); .run/logs/<prefix>/ per site when there are several
    .run/logs.previous/           the previous run's logs
    .run/config/, gateways/, ...  one site's files (SitePaths); .run/<prefix>/... per site when there are several
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
P4INFO = REPO / "p4src" / "v1model" / "supergw.p4info.txtpb"
# `make p4` writes p4c's BMv2 JSON and, beside it, the P4Info it generated with it.
BMV2_JSON = REPO / "build" / "p4" / "supergw.json"
BMV2_BUILT_P4INFO = REPO / "build" / "p4" / "supergw.p4info.txtpb"
SWITCH_BIN = REPO / "targets" / "ebpf" / "bin" / "supergw-switch"


@dataclass(frozen=True)
class SitePaths:
    """One site's files: its configs and secrets, its gateways' charon state, its controller
    database and etcd data, its hostsim socket, and its logs."""

    root: Path
    logs: Path

    @property
    def config(self) -> Path:
        return self.root / "config"

    @property
    def gateways(self) -> Path:
        """Each gateway's charon state (strongswan.conf, VICI socket): `gateways/<name>/`."""
        return self.root / "gateways"

    @property
    def clients(self) -> Path:
        """Each remote-access client's charon state and log: `clients/<name>/`."""
        return self.root / "clients"

    @property
    def state_db(self) -> Path:
        return self.root / "controller-state.sqlite3"

    @property
    def etcd(self) -> Path:
        """The etcd members' data, `etcd/<replica>/` (replicated controllers only)."""
        return self.root / "etcd"

    @property
    def pki(self) -> Path:
        """The site's certificates (`supergw-gateway pki`): etcd members and clients under HA."""
        return self.config / "pki"

    @property
    def hostsim_socket(self) -> Path:
        return self.root / "hostsim.sock"

    @property
    def token_file(self) -> Path:
        """The operator (admin) API token."""
        return self.config / "api-token"

    def gateway_config(self, name: str) -> Path:
        return self.config / f"gateway-{name}.yaml"

    def controller_config(self, replica: str | None = None) -> Path:
        return self.config / (f"controller-{replica}.yaml" if replica else "controller.yaml")

    def clear(self) -> None:
        """What an earlier run left of this site (its configs, charon state, controller
        database with the operator intent, etcd data): every `up` starts afresh."""
        for d in (self.config, self.gateways, self.clients, self.etcd):
            shutil.rmtree(d, ignore_errors=True)
        for f in (*self.root.glob("controller-state.sqlite3*"), self.hostsim_socket):
            f.unlink(missing_ok=True)


@dataclass(frozen=True)
class RunLayout:
    """The `.run/` directory of an emulation (the repository's, unless a test picks another)."""

    root: Path = REPO / ".run"

    @property
    def state(self) -> Path:
        return self.root / "state.json"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def previous_logs(self) -> Path:
        return self.root / "logs.previous"

    def site(self, prefix: str, several: bool) -> SitePaths:
        """Site `prefix`'s files: directly in `.run/` when it is the only site (`make run`'s
        `.run/config/api-token`), else in `.run/<prefix>/` with logs in `.run/logs/<prefix>/`."""
        if not several:
            return SitePaths(self.root, self.logs)
        return SitePaths(self.root / prefix, self.logs / prefix)

    def rotate_logs(self) -> None:
        """The logs of the last run become `logs.previous/` (the one before is dropped)."""
        if self.logs.exists():
            shutil.rmtree(self.previous_logs, ignore_errors=True)
            self.logs.rename(self.previous_logs)
