"""`make deploy-test`: docs/deploy-linux.md followed step by step on fresh Debian 12 machines.

The .debs of `make package` are installed with apt into systemd-nspawn machines booted
from a debootstrapped image (packaging/sgwdeploy), configured with the guide's files
(packaging/example-site/), started by their units; then the site is checked as an operator
would: tunnels, a LAN host pinging the remote site through the super gateway, a gateway
box losing power and failing over, a drained gateway upgraded with apt and undrained
without losing a packet, and a clean stop. REST and P4Runtime run over TLS, as the packaged
configs say, with certificates issued by `supergw-gateway pki` in one of the machines. Each
test is one section of the guide; a failed step skips the later ones (conftest.py). Root, systemd-nspawn, debootstrap and the
Debian mirror are needed; `SGW_DEPLOY_KEEP=1` leaves the machines running afterwards.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import time
from collections.abc import Iterator

import pytest

from sgwdeploy import image, lab, packages
from sgwdeploy.host import say, stage, wait_for
from sgwdeploy.lab import GATEWAYS, PEERS, Site
from sgwdeploy.machine import Machine

REPO = packages.REPO
CACHE = REPO / "build/deploy-test"
# The controller's failover budget is 3 x 100 ms of heartbeats; the gap a host sees also
# holds the ping interval and a loaded 2-core machine's scheduling.
FAILOVER_GAP_S = 2.0
CONTROLLER_SIDE_DEBS = ("supergw-controller", "etcd-server", "etcd-client")
CONTROLLER_SIDE_PY = ("supergw-controller", "fastapi", "finsy", "aetcd", "uvicorn", "grpcio", "prometheus-client")


def _missing() -> str | None:
    if os.geteuid() != 0:
        return "needs root (namespaces, systemd-nspawn, overlay mounts)"
    for tool in ("systemd-nspawn", "debootstrap", "dpkg-scanpackages", "nsenter"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed: run .ci/install-deps"
    return None


pytestmark = pytest.mark.skipif(_missing() is not None, reason=str(_missing()))


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    t0 = time.monotonic()
    debs = packages.built_packages(lab.ALL_PACKAGES)
    CACHE.mkdir(parents=True, exist_ok=True)
    base = image.base_image(CACHE)
    extra = sorted({p for extras in lab.EXTRA.values() for p in extras})
    repo = image.local_repository(base, list(debs.values()), extra, CACHE)
    s = Site(base, CACHE / "machines", debs, repo)
    try:
        with stage("cabling and booting the machines"):
            s.cable()
            s.boot_all()
        yield s
    finally:
        if os.environ.get("SGW_DEPLOY_KEEP") == "1":
            say(f"SGW_DEPLOY_KEEP=1: machines left running in {CACHE / 'machines'}")
        else:
            s.teardown()
        say(f"deploy test: {time.monotonic() - t0:.0f} s in all")


def installed(site: Site, box: str) -> set[str]:
    out = site.machines[box].run(["dpkg-query", "-W", "-f", "${Package} ${Status}\n"]).stdout
    return {line.split()[0] for line in out.splitlines() if line.endswith("installed") and "not-installed" not in line}


def venv_distributions(site: Site, box: str, role: str) -> set[str]:
    code = "import importlib.metadata as m; print('\\n'.join(d.metadata['Name'].lower() for d in m.distributions()))"
    out = site.machines[box].run([f"/usr/lib/supergw/{role}/bin/python", "-c", code]).stdout
    return {line.strip().replace("_", "-") for line in out.splitlines() if line.strip()}


def caps(site: Site, box: str, unit: str) -> tuple[int, str]:
    """(effective capability mask, user) of a unit's main process."""
    m = site.machines[box]
    pid = m.run(["systemctl", "show", "-p", "MainPID", "--value", unit]).stdout.strip()
    status = m.run(["cat", f"/proc/{pid}/status"]).stdout
    eff = next(int(line.split()[1], 16) for line in status.splitlines() if line.startswith("CapEff:"))
    uid = next(line.split()[1] for line in status.splitlines() if line.startswith("Uid:"))
    user = m.run(["getent", "passwd", uid]).stdout.split(":")[0]
    return eff, user


def answers(site: Site, host: str, dest: str) -> str | None:
    return None if site.ping_count(host, dest, 1).received == 1 else "no reply"


def inactive(m: Machine, unit: str) -> str | None:
    state = m.run(["systemctl", "is-active", unit], check=False).stdout.strip()
    if state == "inactive":
        return None
    if state == "failed":  # say why: its journal's last lines
        tail = m.run(["journalctl", "-u", unit, "-n", "15", "--no-pager", "-o", "cat"], check=False).stdout.strip()
        return f"{unit} is failed; its journal ends:\n{tail}"
    return f"{unit} is {state}"


CAP = {"CAP_NET_ADMIN": 12, "CAP_NET_RAW": 13, "CAP_NET_BIND_SERVICE": 10, "CAP_SYS_ADMIN": 21, "CAP_SYS_NICE": 23,
       "CAP_PERFMON": 38, "CAP_BPF": 39}


def mask(*names: str) -> int:
    return sum(1 << CAP[n] for n in names)


def test_install_with_apt(site: Site) -> None:
    """Guide: "Install the packages" — apt pulls each package's dependencies and nothing of another role's."""
    for box in site.machines:
        debs = " ".join(f"./{site.debs[p].name}" for p in lab.packages_of(box))
        with stage(f"{box}: apt-get install {debs} {' '.join(lab.EXTRA.get(box, []))}".rstrip()):
            site.install(box)
    for gw in (*GATEWAYS, *PEERS.values()):
        have = installed(site, gw)
        assert {"supergw-gateway", "charon-systemd", "libcharon-extra-plugins", "iproute2"} <= have
        assert not have & set(CONTROLLER_SIDE_DEBS), f"{gw} pulled {sorted(have & set(CONTROLLER_SIDE_DEBS))}"
        py = venv_distributions(site, gw, "gateway")
        assert {"supergw-gateway", "supergw-proto", "vici"} <= py
        assert not py & set(CONTROLLER_SIDE_PY), f"the gateway venv on {gw} holds {sorted(py & set(CONTROLLER_SIDE_PY))}"
    sw = installed(site, "sw")
    assert "supergw-switch" in sw
    assert not sw & {"python3.11", "clang", "llvm", "charon-systemd"}, sorted(sw & {"python3.11", "clang", "charon-systemd"})
    ctl = installed(site, "ctl")
    assert {"supergw-controller", "supergw-proto"} <= ctl and "charon-systemd" not in ctl
    assert {"supergw-controller", "finsy", "fastapi"} <= venv_distributions(site, "ctl", "controller")
    # The packaged commands run from their private venvs.
    for box, cmd in (("ctl", "supergw-controller"), ("ctl", "supergwctl"), ("gw1", "supergw-gateway")):
        assert "usage" in site.machines[box].run([cmd, "--help"]).stdout.lower()


def test_units_refuse_to_start_without_certificates(site: Site) -> None:
    """Guide: "Certificates" — TLS is on in the packaged configs: with no certificate yet a unit
    does not start, and its journal names the missing file and the pki command that makes it."""
    site.write_switch_config()
    site.write_controller_config()
    for box, unit, first in (("sw", "supergw-switch.service", "--grpc-server-cert: file not found: "
                              f"{lab.TLS_DIR}/p4rt-sw.crt: make it with `supergw-gateway pki --out DIR --server p4rt-sw="),
                             ("ctl", "supergw-controller.service", "api.tls.cert: file not found: "
                              f"{lab.TLS_DIR}/rest-ctl.crt: make it with `supergw-gateway pki --out DIR --server rest-ctl=")):
        m = site.machines[box]
        with stage(f"{box}: systemctl start {unit} before its certificates are there"):
            m.run(["systemctl", "start", unit], check=False, timeout=60)
            wait_for(f"{unit} names its missing certificate",
                     lambda: None if first in site.journal(box, unit, 400) else "not in the journal yet", 30)
            m.run(["systemctl", "stop", unit])
            m.run(["systemctl", "reset-failed", unit], check=False)
        say(f"{box}: {next(line for line in site.journal(box, unit, 400).splitlines() if first in line).strip()}")
        assert inactive(m, unit) is None


def test_certificates_issued_and_installed(site: Site) -> None:
    """Guide: "Certificates" — `supergw-gateway pki` on the CA box; each box gets its own files, keys 0600."""
    with stage(f"{lab.CA_BOX}: {' '.join(lab.PKI_COMMAND)}"):
        files = site.issue_certificates()
    for box, (names, _owner) in lab.TLS_FILES.items():
        assert set(names) <= set(files), f"pki made {sorted(files)}, not {box}'s {names}"
        with stage(f"{box}: {', '.join(names)} into {lab.TLS_DIR}"):
            site.install_certificates(box)
    ls = site.machines["ctl"].run(["stat", "-c", "%a %U %n", f"{lab.TLS_DIR}/rest-ctl.key",
                                   f"{lab.TLS_DIR}/p4rt-controller.key"]).stdout.splitlines()
    assert all(line.startswith("600 supergw ") for line in ls), ls
    assert site.machines["sw"].run(["stat", "-c", "%a %U", f"{lab.TLS_DIR}/p4rt-sw.key"]).stdout.strip() == "600 root"
    # Issued by the package's own command: the switch's certificate names its address.
    san = site.machines[lab.CA_BOX].run(["pki", "--print", "--in", f"{lab.PKI_DIR}/p4rt-sw.crt"]).stdout
    assert lab.MGMT["sw"].split("/")[0] in san, san


def test_units_start(site: Site) -> None:
    """Guide: "The switch box", "Controllers", "Gateways" — configs in /etc/supergw, units enabled and started."""
    with stage("sw: switch.env, systemctl enable --now supergw-switch"):
        site.configure_switch()
    with stage("ctl: tokens and controller.yaml, systemctl enable --now supergw-controller"):
        site.configure_controller()
    for box in (*PEERS.values(), *GATEWAYS):
        with stage(f"{box}: {box}.yaml, systemctl enable --now its units"):
            site.configure_gateway(box)
    units = {"sw": ["supergw-switch.service"], "ctl": ["supergw-controller.service"]}
    for gw in GATEWAYS:
        units[gw] = [f"supergw-gateway@{gw}.service", f"supergw-gateway-agent@{gw}.service"]
    for peer in PEERS.values():
        units[peer] = [f"supergw-gateway@{peer}.service"]
    for box, names in units.items():
        for unit in names:
            wait_for(f"{unit} on {box} active", functools.partial(site.unit_active, box, unit), 30)
            assert site.machines[box].run(["systemctl", "is-enabled", unit]).stdout.strip() == "enabled"
    # Hardening in effect: each main process holds only its unit's capabilities.
    eff, user = caps(site, "sw", "supergw-switch.service")
    assert eff == mask("CAP_BPF", "CAP_PERFMON", "CAP_NET_ADMIN", "CAP_NET_RAW") and user == "root"
    eff, user = caps(site, "ctl", "supergw-controller.service")
    assert eff == 0 and user == "supergw"
    eff, user = caps(site, "gw1", "supergw-gateway-agent@gw1.service")  # + the liveness sender's raw frames, SCHED_FIFO
    assert eff & ~mask("CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_SYS_NICE") == 0, hex(eff)
    eff, user = caps(site, "gw1", "supergw-gateway@gw1.service")  # charon, after its own drop
    assert eff & ~mask("CAP_NET_ADMIN", "CAP_NET_BIND_SERVICE", "CAP_NET_RAW", "CAP_SYS_ADMIN") == 0, hex(eff)
    # Secrets: mode 0600, owned by the user that reads them.
    ls = site.machines["ctl"].run(["stat", "-c", "%a %U %n", "/etc/supergw/controller/operator.token",
                                   "/etc/supergw/controller/agent-gw1.token"]).stdout.split("\n")
    assert all(line.startswith("600 supergw ") for line in ls if line), ls
    assert site.machines["gw1"].run(["stat", "-c", "%a %U", "/etc/supergw/gateway/gw1.yaml"]).stdout.strip() == "600 root"
    # Logs in the journal.
    assert "serving P4Runtime" in site.journal("sw", "supergw-switch.service")
    assert 'transport="mutual TLS"' in site.journal("sw", "supergw-switch.service")
    wait_for("the controller's journal says it is primary",
             lambda: None if "primary and reconciled" in site.journal("ctl", "supergw-controller.service", 200)
             else "not yet", 30)


def test_tunnels_up(site: Site) -> None:
    """Guide: "Checklist" — every gateway's IKE SA established with an installed CHILD SA; the controller sees them alive."""
    for gw in (*GATEWAYS, *PEERS.values()):
        st = json.loads(site.machines[gw].run(["supergw-gateway", "status", "-c", f"/etc/supergw/gateway/{gw}.yaml"]).stdout)
        assert st["running"], st
        assert any(ike["state"] == "ESTABLISHED" and any(c["state"] == "INSTALLED" for c in ike["children"])
                   for ike in st["sas"]), (gw, st["sas"])
        say(f"{gw}: backend {st['backend']} ({st['detection']})")
        tuning = st["tuning"]
        assert "error" not in tuning and "applied" in tuning, f"{gw}: `up` did not apply the tuning profile: {tuning}"
        say(f"{gw}: tuning profile: {len(tuning['applied'])} knobs changed, {tuning['already_at_target']} "
            f"already at target, {len(tuning['refused'])} refused (e.g. {tuning['refused'][:1]}); first change: "
            f"{tuning['applied'][:1]}")
    site.wait_alive(list(GATEWAYS))
    gws = site.gateways()
    assert all(gws[g]["tunnel_up"] for g in GATEWAYS), gws
    assert sum(gws[g]["buckets"] for g in GATEWAYS) == lab.controller_config()["buckets"]


def test_lan_host_pings_remote_site(site: Site) -> None:
    """Guide: "Checklist" — a LAN host reaches the remote site through the super gateway."""
    for host, (raddr, _via) in zip(lab.LAN_HOSTS, lab.REMOTE_HOSTS.values()):
        dest = raddr.split("/")[0]
        wait_for(f"{host} pings {dest}", functools.partial(answers, site, host, dest), 30)
        r = site.ping_count(host, dest, 10)
        assert r.lost == 0, r.output
    # The echo requests entered the remote site through the tunnels: the peers' CHILD SAs count them.
    received = 0
    for peer in PEERS.values():
        st = json.loads(site.machines[peer].run(["supergw-gateway", "status", "-c",
                                                 f"/etc/supergw/gateway/{peer}.yaml"]).stdout)
        received += sum(c["packets_in"] for ike in st["sas"] for c in ike["children"])
    assert received >= 20, f"the peers' tunnels carried {received} packets in, fewer than the 20 pings"
    assert site.owner("h1") in GATEWAYS


def test_gateway_box_killed_fails_over(site: Site) -> None:
    """Guide: "Checklist", failover — a gateway box losing power; the LAN host's ping goes on through another."""
    victim = site.owner("h1")
    rhost, raddr = site.remote_avoiding(victim)
    ping = site.ping("h1", raddr)
    time.sleep(1.0)
    t_kill = time.monotonic()
    site.machines[victim].power_cut()
    wait_for(f"the controller fails {victim} over", lambda: None if site.owner("h1") != victim else "still the owner", 10)
    say(f"h1's bucket moved off {victim} {time.monotonic() - t_kill:.2f} s after the power cut")
    time.sleep(2.0)
    r = ping.stop()
    assert r.received > 0 and r.longest_gap_s <= FAILOVER_GAP_S, \
        f"ping h1 -> {rhost}: {r.sent} sent, {r.received} received, longest gap {r.longest_gap_s:.2f} s"
    tail = r.output.strip().splitlines()[-25:-4]
    assert all("icmp_seq" in line for line in tail), "the ping did not recover after the failover:\n" + "\n".join(tail)
    say(f"failover: {r.lost} of {r.sent} pings lost, longest gap {r.longest_gap_s:.2f} s")
    with stage(f"{victim}: power back on; its enabled units start at boot"):
        site.machines[victim].boot()
        site.wait_alive([victim], timeout=120)


def test_drain_upgrade_undrain_without_loss(site: Site) -> None:
    """Guide: "Upgrading a gateway" — drain, apt upgrade, undrain: not one ping lost."""
    gw = site.owner("h1")
    rhost, raddr = site.remote_avoiding(gw)
    old = site.debs["supergw-gateway"]
    new_version = f"{packages.field(old, 'Version')}+deploytest1"
    new = packages.with_version(old, new_version, CACHE)
    m = site.machines[gw]
    before = m.run(["systemctl", "show", "-p", "InvocationID", "--value", f"supergw-gateway@{gw}.service"]).stdout
    ping = site.ping("h1", raddr)
    time.sleep(1.0)
    drained = site.supergwctl("drain", gw)
    say(f"supergwctl drain {gw}: {drained.splitlines()[0]}")
    wait_for(f"{gw} drained", lambda: None if site.gateways()[gw]["buckets"] == 0 else "still has buckets", 10)
    assert site.owner("h1") != gw
    with stage(f"{gw}: apt-get install ./{new.name}"):
        site.apt_install(gw, [new], [])
    assert m.run(["dpkg-query", "-W", "-f", "${Version}", "supergw-gateway"]).stdout == new_version
    after = m.run(["systemctl", "show", "-p", "InvocationID", "--value", f"supergw-gateway@{gw}.service"]).stdout
    assert after != before, "the upgrade did not restart the running gateway (postinst try-restart)"
    wait_for(f"supergw-gateway-agent@{gw} active", lambda: site.unit_active(gw, f"supergw-gateway-agent@{gw}.service"), 60)
    site.wait_alive([gw], timeout=60)
    assert site.api("undrain", gw)["drained"] is False
    wait_for(f"{gw} refilled", lambda: None if site.gateways()[gw]["buckets"] > 0 else "no buckets yet", 30)
    time.sleep(2.0)
    r = ping.stop()
    say(f"drain/upgrade/undrain of {gw}: {r.sent} pings, {r.lost} lost")
    assert r.sent > 100 and r.lost == 0, f"ping h1 -> {rhost}: {r.sent} sent, {r.received} received"


def test_a_gateway_whose_tunnel_cannot_come_up_still_reports(site: Site) -> None:
    """Guide: "Units" — a gateway restarted while its peer is down: `up` fails and retries,
    its agent runs beside it all along (the controller sees it alive, tunnel down, no
    buckets), and it serves again once the peer is back. (The same holds for a gateway fenced
    after a takeover, whose agent's report lifts the fence its tunnel waits behind.)"""
    gw, peer = GATEWAYS[0], PEERS[GATEWAYS[0]]
    m, unit = site.machines[gw], f"supergw-gateway@{gw}.service"

    def restarts() -> int:
        return int(m.run(["systemctl", "show", "-p", "NRestarts", "--value", unit]).stdout.strip() or 0)

    site.machines[peer].run(["systemctl", "stop", f"supergw-gateway@{peer}.service"])
    try:
        before = restarts()
        m.run(["systemctl", "restart", "--no-block", unit])

        def reporting_without_tunnel() -> str | None:
            if restarts() == before:
                return "`up` has not failed yet (it waits for the tunnel)"
            if (why := site.unit_active(gw, f"supergw-gateway-agent@{gw}.service")) is not None:
                return why
            g = site.gateways()[gw]
            if g["heartbeat_age_s"] is None or g["heartbeat_age_s"] > 1.0 or g["tunnel_up"] is not False or g["buckets"]:
                return f"heartbeat age {g['heartbeat_age_s']}, tunnel_up {g['tunnel_up']}, buckets {g['buckets']}"
            return None

        wait_for(f"{gw}'s agent reports while its peer {peer} is down", reporting_without_tunnel, 90)
        say(f"{gw} with its peer down: `up` failed {restarts() - before}x and retries, its agent beats and "
            f"reports: {site.gateways()[gw]['unhealthy']}")
    finally:
        site.machines[peer].run(["systemctl", "start", f"supergw-gateway@{peer}.service"])
    wait_for(f"supergw-gateway@{gw} active again", lambda: site.unit_active(gw, f"supergw-gateway@{gw}.service"), 90)
    wait_for(f"{gw} serves again", lambda: None if (g := site.gateways()[gw])["tunnel_up"] and g["buckets"] > 0
             else f"tunnel_up {g['tunnel_up']}, buckets {g['buckets']}", 60)


def test_stop_cleans_up(site: Site) -> None:
    """Guide: "Stopping and removing" — stopping a gateway stops its agent, charon and the namespace name."""
    gw = GATEWAYS[-1]
    m = site.machines[gw]
    charon = m.run(["cat", f"/run/sgw-gw/{gw}/charon.pid"]).stdout.strip()
    m.run(["systemctl", "stop", f"supergw-gateway@{gw}.service"])
    for unit in (f"supergw-gateway-agent@{gw}.service", f"supergw-gateway-netns@{gw}.service"):
        wait_for(f"{unit} stops with the gateway", functools.partial(inactive, m, unit), 15)
    assert m.run(["test", "-e", f"/proc/{charon}"], check=False).returncode != 0, "charon still runs"
    assert m.run(["test", "-e", f"/run/netns/sgw-gw-{gw}"], check=False).returncode != 0, "the namespace name stayed"
    tuning = json.loads(m.run(["supergw-gateway", "status", "-c", f"/etc/supergw/gateway/{gw}.yaml"]).stdout)["tuning"]
    assert "applied" not in tuning and "not applied" in tuning.get("state", ""), f"`down` left the tuning record: {tuning}"
    site.wait_alive([g for g in GATEWAYS if g != gw])
    wait_for(f"the controller sees {gw} dead", lambda: None if not site.gateways()[gw]["alive"] else "alive", 10)


def test_remove_and_purge(site: Site) -> None:
    """Guide: "Stopping and removing" — apt purge leaves no unit, venv or state behind."""
    ctl = site.machines["ctl"]
    ctl.run(["apt-get", "purge", "-y", "-qq", "supergw-controller"])
    for path in ("/usr/lib/supergw/controller", "/lib/systemd/system/supergw-controller.service",
                 "/var/lib/supergw/controller"):
        assert ctl.run(["test", "-e", path], check=False).returncode != 0, f"{path} left after purge"
    state = ctl.run(["systemctl", "is-active", "supergw-controller.service"], check=False).stdout.strip()
    assert state != "active", "supergw-controller.service still active after purge"

