"""The emulation as a library: one engine for any number of sites, each with one controller
or replicated controllers on etcd, on the eBPF switch or BMv2.

    emu = Emulation.from_file(TWO_SITE_TOPOLOGY, replicas=3, replicas_site="sgw-a")
    emu.up()                                   # every stage, printed as it goes; True when all are ok
    emu.site("sgw-a").api().status()           # a typed REST client per site (and replica)
    emu.down()

    running = Emulation.attach()               # the emulation `make run` (or anyone) booted, or None

`up` records everything it starts in `.run/state.json` (with the plan itself), so `attach`,
`down` and `status` work from any process, and `make stop` cleans up after any program.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from topologies import components, iproute, network, processes
from topologies.bringup import Bringup
from topologies.model import DEFAULT_TOPOLOGY, EmulationSpec, SwitchKind
from topologies.paths import RunLayout
from topologies.schema import load
from topologies.site import Site
from topologies.state import RunState, StateFile
from topologies.switch import LASTING_PIN_ROOT, outside_pin_name

Say = Callable[[str], None]


def say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


class EmulationError(RuntimeError):
    """The emulation cannot be booted or used as asked; the message says what to do."""


class AlreadyRunning(EmulationError):
    """An emulation runs already (`running` is it): `make stop` first."""

    def __init__(self, running: Emulation) -> None:
        self.running = running
        st = running.state
        super().__init__(f"a supergw emulation is already running (phase {st.phase}, {running.describe()}, "
                         f"started {time.ctime(st.started_at)}): `make stop` first")


class Emulation:
    def __init__(self, spec: EmulationSpec, source: str | Path = "", layout: RunLayout = RunLayout(),
                 state: RunState | None = None, say: Say = say) -> None:
        self.spec, self.layout, self.say = spec, layout, say
        state = state or RunState(source=str(source), spec=spec.model_dump(mode="json"), started_at=time.time())
        self.run = StateFile(layout.state, state)
        self.sites = [Site(topo, layout.site(topo.prefix, spec.several), self.run) for topo in spec.sites]

    @classmethod
    def from_file(cls, path: Path = DEFAULT_TOPOLOGY, *, switch: SwitchKind | None = None, replicas: int | None = None,
                  replicas_site: str | None = None, changes: Mapping[str, Any] | None = None, tls: bool = False,
                  layout: RunLayout = RunLayout(), say: Say = say) -> Emulation:
        """The plan in topology file `path` with the overrides `schema.load` takes (not booted)."""
        spec = load(path, switch=switch, replicas=replicas, replicas_site=replicas_site, changes=changes, tls=tls)
        return cls(spec, path, layout, say=say)

    @classmethod
    def attach(cls, layout: RunLayout = RunLayout(), say: Say = say) -> Emulation | None:
        """The emulation in `layout`'s state file (running, degraded or crashed), or None when
        there is none. ValueError when the state file is unreadable."""
        state = RunState.load(layout.state)
        if state is None:
            return None
        try:
            spec = EmulationSpec.model_validate(state.spec)
        except ValueError as exc:
            raise ValueError(f"{layout.state}: the plan it holds does not validate ({exc}); "
                             "remove it after checking nothing runs") from None
        return cls(spec, state.source, layout, state, say)

    # --- what it is -------------------------------------------------------------------

    @property
    def state(self) -> RunState:
        return self.run.state

    def site(self, prefix: str | None = None) -> Site:
        """Site `prefix`; None: the only site (an error when there are several)."""
        if prefix is None:
            if self.spec.several:
                raise EmulationError(f"{len(self.sites)} sites ({self.describe()}): name one")
            return self.sites[0]
        for s in self.sites:
            if s.prefix == prefix:
                return s
        raise EmulationError(f"no site {prefix!r}; sites: {', '.join(s.prefix for s in self.sites)}")

    def partner(self, site: Site) -> Site | None:
        topo = self.spec.partner(site.topo)
        return None if topo is None else self.site(topo.prefix)

    def is_running(self) -> bool:
        """Whether any process it started still runs."""
        return bool(self.state.running())

    def describe(self) -> str:
        """`1 site, switch ebpf, 3 controller replicas` and the like."""
        kinds = sorted({s.topo.switch.kind for s in self.sites})
        replicas = [f"{s.topo.controller.replicas} controller replicas at {s.prefix}" if self.spec.several
                    else f"{s.topo.controller.replicas} controller replicas" for s in self.sites if s.topo.replicated]
        tls = ["REST and P4Runtime over TLS"] if any(s.topo.controller.tls for s in self.sites) else []
        return ", ".join([f"{len(self.sites)} site{'s' if self.spec.several else ''}",
                          f"switch {'/'.join(kinds)}", *replicas, *tls])

    def close(self) -> None:
        for s in self.sites:
            s.close()

    # --- up and down ------------------------------------------------------------------

    def up(self, bringup: Callable[[EmulationSpec, list[Site], StateFile, Say], Bringup] = Bringup) -> bool:
        """Boots every site; True when every stage is ok, False when some failed (what did
        start keeps running, for inspection: the stages say what). Raises AlreadyRunning when
        an emulation runs, EmulationError when it cannot be built (after removing what was)."""
        if os.geteuid() != 0:
            raise EmulationError("the emulation needs root (namespaces, veths, eBPF)")
        for site in self.sites:
            if (why := components.switch_missing(site.topo)) is not None:
                raise EmulationError(f"cannot run the emulation on {site.topo.switch.kind}: {why}")
        try:
            earlier = Emulation.attach(self.layout, self.say)
        except ValueError as exc:
            self.say(f"{exc}: treating it as a crashed run")
            self.layout.state.unlink()
            earlier = None
        if earlier is not None and earlier.is_running():
            raise AlreadyRunning(earlier)
        if earlier is not None or network.existing_namespaces(self.spec):
            self.say("leftovers of an earlier run found: cleaning up first")
            if earlier is not None:
                earlier.down(quiet=True)
            self.down(quiet=True)
        for site in self.sites:
            site.paths.clear()  # no operator intent or charon state left from the last run
        self.layout.rotate_logs()
        run = bringup(self.spec, self.sites, self.run, self.say)
        try:
            return run.run_all()
        except (iproute.NetworkError, OSError, subprocess.SubprocessError) as exc:
            self.say(f"FAIL building the topology: {exc}")
            self.down(quiet=True)
            raise EmulationError(f"building the topology failed: {exc}") from exc
        except KeyboardInterrupt:
            self.say("interrupted: stopping what was started")
            self.down(quiet=True)
            raise

    def down(self, quiet: bool = False) -> list[str]:
        """Stops every process by pid, every gateway's charon, removes every namespace, pin
        directory and the state file; idempotent. Returns what it removed."""
        for rec in reversed(self.state.processes):
            outcome = processes.stop(rec)
            if not quiet or outcome != "not running":
                self.say(f"{rec.site + '/' if self.spec.several else ''}{rec.name} (pid {rec.pid}): {outcome}")
        for site in self.sites:  # then whatever the gateway CLI still knows of (charon it started, cgroups)
            for config in sorted(site.paths.config.glob("gateway-*.yaml")):
                if (failed := components.gateway_down(config)) is not None and not quiet:
                    self.say(f"{config.stem}: `supergw-gateway down` failed: {failed}")
        removed = network.teardown(self.spec)
        for site in self.sites:
            # The switches' data planes outlive them (a restart adopts them): removing the
            # pins takes them down.
            for pins in (LASTING_PIN_ROOT / site.prefix, LASTING_PIN_ROOT / outside_pin_name(site.topo)):
                if pins.exists():
                    shutil.rmtree(pins, ignore_errors=True)
                    removed.append(str(pins))
        if removed and not quiet:
            self.say(f"removed {len(removed)} namespaces/links")
        self.layout.state.unlink(missing_ok=True)
        self.state.processes = []
        self.close()
        if not quiet:
            self.say("supergw emulation stopped")
        return removed


@contextmanager
def running_or_booted(want: Emulation, usable: Callable[[Emulation], str | None], say: Say = say) -> Iterator[Emulation]:
    """The running emulation when `usable(it)` finds nothing wrong with it (returns None),
    else `want` booted here and stopped again when the block ends. Refuses (EmulationError)
    when an emulation runs that is not usable: stopping someone else's is not ours to do."""
    running = Emulation.attach(want.layout, say)
    if running is not None and running.is_running():
        why = usable(running)
        if why is None:
            yield running
            return
        raise EmulationError(f"the running emulation ({running.describe()}) does not fit: {why}; "
                             "`make stop` it, or boot a fitting one")
    say(f"== emulation not up: booting {want.state.source or 'it'} ({want.describe()})")
    ok = want.up()  # AlreadyRunning (someone booted one meanwhile) leaves theirs alone; a failed build is removed
    try:
        if not ok:
            failed = ", ".join(want.state.failed_stages())
            raise EmulationError(f"the emulation did not come up: {failed} failed (see above)")
        yield want
    finally:
        want.down(quiet=True)
