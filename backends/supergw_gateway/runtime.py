"""A gateway's lifecycle: namespace or UML guest, its own charon, the tunnel, the CPU quota."""

from __future__ import annotations

import json
import logging
import socket
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from supergw_gateway import netns, tunnel
from supergw_gateway.cgroup import CpuGroup
from supergw_gateway.charon import CharonProcess
from supergw_gateway.config import IPV6_SYSCTLS, Backend, GatewayConfig
from supergw_gateway.detect import Detection, choose_backend
from supergw_gateway.errors import GatewayError
from supergw_gateway.executor import Executor, LocalExecutor
from supergw_gateway.tuning import lifecycle as tuning
from supergw_gateway.tuning.plan import Item
from supergw_gateway.ra import gateway as ra_gateway
from supergw_gateway.uml import UmlGuest, descendants
from supergw_gateway.vici_client import ViciClient, session

log = logging.getLogger(__name__)

LIBIPSEC_MIN_RMEM = 4 * 1024 * 1024


@dataclass(frozen=True)
class BackendState:
    requested: str
    esp: str  # "xfrm" or "libipsec"
    runtime: str  # "netns" or "uml"
    detection: str

    @property
    def label(self) -> str:
        return "xfrm_uml" if self.runtime == "uml" else self.esp


class Gateway:
    def __init__(self, cfg: GatewayConfig, on_progress: Callable[[str], None] = lambda m: None) -> None:
        self.cfg = cfg
        self.progress = on_progress
        self._guest = UmlGuest(cfg, on_progress) if cfg.backend is Backend.UML else None
        self._charon = CharonProcess(cfg.netns, cfg.run_dir, libipsec=cfg.backend is Backend.LIBIPSEC)

    @property
    def state_path(self) -> Path:
        return self.cfg.run_dir / "state.json"

    def executor(self) -> Executor:
        """Where the gateway's kernel is: the UML guest or the namespace."""
        return self._guest.executor() if self._guest else LocalExecutor(self.cfg.netns)

    def connect(self) -> socket.socket:
        return self._guest.connect_vici() if self._guest else self._charon.connect()

    def vici(self) -> ViciClient:
        return ViciClient(self.connect)

    def backend_state(self) -> BackendState | None:
        try:
            return BackendState(**json.loads(self.state_path.read_text()))
        except (OSError, ValueError, TypeError):
            return None

    def tuning_target(self, libipsec: bool | None = None) -> tuning.Target:
        """Where this gateway's knobs live now (`libipsec` before the state file says it)."""
        if self._guest:
            return tuning.Target(here=self._guest.executor(), whole_kernel=True, libipsec=False,
                                 here_alive=self._guest.pid() is not None, outer=LocalExecutor(self.cfg.netns),
                                 outer_alive=netns.exists(self.cfg.netns))
        if libipsec is None:
            st = self.backend_state()
            libipsec = bool(st and st.esp == "libipsec")
        return tuning.Target(here=LocalExecutor(self.cfg.netns), whole_kernel=False, libipsec=libipsec,
                             here_alive=netns.exists(self.cfg.netns))

    def _report_tuning(self, action: str, items: list[Item]) -> None:
        if not items:
            return
        counts = Counter(i.status for i in items)
        groups = f" ({', '.join(self.cfg.tuning.knobs)})" if action == "up" and self.cfg.tuning.enabled else ""
        self.progress(f"{self.cfg.name}: tuning {action}{groups}: "
                      + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
        for it in items:
            if it.status in ("unsupported", "failed", "gone", "restored", "shared"):
                self.progress(f"{self.cfg.name}:   {it.line()}")

    def _tune_up(self, target: tuning.Target) -> list[Item]:
        items = tuning.GatewayTuning(self.cfg, target).up()
        self._report_tuning("up", items)
        return items

    def charon_pid(self) -> int | None:
        """The host pid that runs charon (for UML: the guest's main process)."""
        return self._guest.pid() if self._guest else self._charon.pid()

    def _check_namespace(self) -> None:
        if not netns.exists(self.cfg.netns):
            raise GatewayError(f"network namespace {self.cfg.netns} does not exist: create it and its interfaces first")
        ns = LocalExecutor(self.cfg.netns)
        for itf in self.cfg.interfaces:
            if ns.run(["ip", "link", "show", itf.device], check=False).returncode != 0:
                raise GatewayError(f"interface {itf.device} not found in namespace {self.cfg.netns}")

    def _configure_netns(self) -> None:
        ns = LocalExecutor(self.cfg.netns)
        if self.cfg.ipv6:
            # first: a namespace may start with IPv6 off, and then takes no IPv6 address
            for key in IPV6_SYSCTLS:
                ns.run(["sysctl", "-qw", key])
        for itf in self.cfg.interfaces:
            if itf.mtu:
                ns.run(["ip", "link", "set", itf.device, "mtu", str(itf.mtu)])
            ns.run(["ip", "addr", "replace", str(itf.address), "dev", itf.device])
            for a6 in itf.addresses6:
                ns.run(["ip", "-6", "addr", "replace", str(a6), "dev", itf.device, "nodad"])
            ns.run(["ip", "link", "set", itf.device, "up"])
        for r in self.cfg.routes:
            ns.run(["ip", "route", "replace", str(r.destination), "via", str(r.via)])
        ns.run(["sysctl", "-qw", "net.ipv4.ip_forward=1"])

    def _warn_udp_buffers(self) -> None:
        """libipsec receives all ESP on one UDP socket sized from the host-wide default."""
        try:
            rmem = int(Path("/proc/sys/net/core/rmem_default").read_text())
        except (OSError, ValueError):
            return
        if rmem < LIBIPSEC_MIN_RMEM:
            self.progress(f"{self.cfg.name}: warning: net.core.rmem_default={rmem} (host-wide): libipsec will drop "
                          "ESP under load; `tuning: {enabled: true, host_wide: true}` in the config raises it "
                          "before charon starts (or `tune apply --host-wide` before `up`)")

    def up(self) -> BackendState:
        """Idempotent: a running gateway gets its tuning and tunnel config re-applied.

        The tuning profile goes on before charon starts (libipsec sizes its ESP socket from
        net.core.rmem_default when it opens it); in a UML guest, once the guest runs."""
        self._check_namespace()
        self.cfg.run_dir.mkdir(parents=True, exist_ok=True)
        if self._guest:
            pid = self._guest.start()
            if self.cfg.remote_access is not None:  # IP_P lives in the guest's kernel, as the SAs do
                ra_gateway.hold_public_address(self.cfg, self._guest.executor())
            esp, det = choose_backend(Backend.AUTO, self._guest.executor())
            if esp is not Backend.XFRM:
                raise GatewayError(f"{self.cfg.name}: UML guest kernel cannot hold ESP states: {det.detail}")
            state = BackendState(self.cfg.backend.value, "xfrm", "uml", det.detail)
            self._tune_up(self.tuning_target())
        else:
            self._configure_netns()
            if self.cfg.remote_access is not None:
                ra_gateway.hold_public_address(self.cfg, LocalExecutor(self.cfg.netns))
            esp, det = choose_backend(self.cfg.backend, LocalExecutor(self.cfg.netns))
            if esp is Backend.XFRM and not det.kernel_esp:
                raise GatewayError(f"{self.cfg.name}: backend xfrm requested but {det.detail}; "
                                   "use backend libipsec, auto or uml")
            self._charon = CharonProcess(self.cfg.netns, self.cfg.run_dir, libipsec=esp is Backend.LIBIPSEC,
                                         tuning=self.cfg.charon, options=ra_gateway.charon_options(self.cfg))
            items = self._tune_up(self.tuning_target(libipsec=esp is Backend.LIBIPSEC))
            if self._charon.pid() is None:
                if esp is Backend.LIBIPSEC:
                    self._warn_udp_buffers()
                self.progress(f"{self.cfg.name}: starting charon ({esp.value}) in {self.cfg.netns}")
            elif esp is Backend.LIBIPSEC and any(i.knob.params.get("key") == "net.core.rmem_default"
                                                 and i.status in ("applied", "restored") for i in items):
                self.progress(f"{self.cfg.name}: charon already runs: its ESP socket keeps the buffer it opened "
                              "with until `down` and `up`")
            pid = self._charon.start()
            state = BackendState(self.cfg.backend.value, esp.value, "netns", det.detail)
        self.state_path.write_text(json.dumps(asdict(state)))
        if self.cfg.cpu_quota_percent is not None:
            group = CpuGroup(f"sgw-gw-{self.cfg.name}")
            group.set_quota(self.cfg.cpu_quota_percent)
            # a UML guest is the kernel's process and one host process per guest process started
            # during its boot (charon's among them); later ones are forked into the group
            for p in [pid, *(descendants(pid) if self._guest else [])]:
                group.add(p)
        self.apply_tunnel()
        return state

    def apply_tunnel(self) -> None:
        with session(self.connect) as v:
            if self.cfg.initiate:
                self.progress(f"{self.cfg.name}: bringing tunnel up to {self.cfg.remote.address}")
            if self.cfg.remote_access is not None:  # first: a site-to-site peer that is down must not keep clients out
                ra_gateway.load(self.cfg, v)
            if tunnel.apply(self.cfg, v, initiate=self.cfg.initiate):
                self.progress(f"{self.cfg.name}: tunnel established")

    def down(self) -> list[Item]:
        """Stop the gateway and restore what its `up` tuned (a guest's knobs before it stops).

        The gateway stops even when restoring fails; then the error is raised and the record
        keeps what is left, for the next `down`."""
        error: GatewayError | None = None

        def untune() -> list[Item]:
            nonlocal error
            try:
                return tuning.GatewayTuning(self.cfg, self.tuning_target()).down()
            except GatewayError as exc:
                error = exc
                return []

        if self._guest:
            items = untune()
            self._guest.stop()
        else:
            st = self.backend_state()
            self._charon = CharonProcess(self.cfg.netns, self.cfg.run_dir, libipsec=bool(st and st.esp == "libipsec"))
            self._charon.stop()
            items = untune()
        CpuGroup(f"sgw-gw-{self.cfg.name}").remove()
        self.state_path.unlink(missing_ok=True)
        self._report_tuning("down", items)
        if error is not None:
            raise GatewayError(f"{self.cfg.name}: stopped, but its tuning was not restored: {error}")
        return items

    def status(self) -> dict[str, Any]:
        st = self.backend_state()
        out: dict[str, Any] = {
            "gateway": self.cfg.name,
            "namespace": self.cfg.netns,
            "backend": st.label if st else None,
            "esp": st.esp if st else None,
            "detection": st.detection if st else None,
            "charon_pid": self.charon_pid(),
            "tuning": tuning.health(self.cfg),
            "sas": [],
        }
        if out["charon_pid"] is None:
            out["running"] = False
            return out
        out["running"] = True
        with session(self.connect) as v:
            out["sas"] = [asdict(sa) for sa in v.list_sas()]
        return out
