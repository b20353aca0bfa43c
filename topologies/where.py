"""What `up` prints at the end ("where to look") and what `status` prints, for any emulation."""

from __future__ import annotations

import json
import time

from topologies import api_tls, bmv2, ha, network, processes, simhosts
from topologies.emulation import Emulation
from topologies.etcd_auth import USER as ETCD_USER
from topologies.etcd_auth import EtcdPki
from topologies.paths import BMV2_JSON, REPO
from topologies.site import Site


def switch_lines(site: Site) -> list[str]:
    logs = site.paths.logs
    if site.topo.switch.kind == "bmv2":
        return [
            f"               BMv2 simple_switch_grpc, program {BMV2_JSON.relative_to(REPO)} pushed by the controller",
            f"               per-packet log: tail -f {bmv2.log_file(logs)}   (process output: {logs}/switch.log)",
            "               a gateway's link: ip netns exec <gw> ip link set lan0 down; setting the switch's own",
            "               port down stalls every BMv2 port until restart (controller/README.md)",
        ]
    return [f"               eBPF supergw-switch, log {logs}/switch.log"]


def replica_lines(site: Site) -> list[str]:
    topo, logs = site.topo, site.paths.logs
    names = topo.controller.replica_names()
    roles = ha.roles(topo, site.verify)
    pki = EtcdPki(site.paths.pki)
    return [
        "  replicas     " + ", ".join(f"{n} {topo.api_url(n)} ({roles[n]})" for n in names),
        f"               namespaces {', '.join(topo.ns(n) for n in names)}; logs {logs}/controller-cK.log",
        f"  etcd         members {', '.join(f'{n} {ha.etcd_client_url(topo, n)}' for n in names)}; logs {logs}/etcd-cK.log",
        f"  who leads    curl -s{curl_ca(site)} {topo.api_url(names[0])}/healthz     (ha.role, ha.leader; any replica answers)",
        f"               ETCDCTL_API=3 etcdctl --endpoints {ha.etcd_endpoints(topo)} --cacert {pki.ca} \\",
        f"                 --cert {pki.client(ETCD_USER)[0]} --key {pki.client(ETCD_USER)[1]} get {ha.etcd_prefix(topo)}/leader",
        "  takeover     kill -9 the leader's controller (`python -m topologies.run status` lists pids),",
        "               then ask /healthz again: a backup leads (README.md, 'Watching a takeover')",
    ]


def curl_ca(site: Site) -> str:
    """curl's option to trust the site's CA (https), with a leading space; empty over http."""
    return f" --cacert {api_tls.site_pki(site.paths).ca}" if site.topo.controller.tls else ""


def tls_lines(site: Site) -> list[str]:
    if not site.topo.controller.tls:
        return []
    pki = api_tls.site_pki(site.paths)
    return [f"  TLS          https and P4Runtime over mutual TLS; CA {pki.ca}, certificates in {pki.dir}/"]


def site_lines(site: Site, several: bool) -> list[str]:
    topo, paths = site.topo, site.paths
    url = topo.api_url()
    token = paths.token_file
    lines = [f"  site {topo.prefix}:"] if several else []
    lines += [
        f"  REST API     {url}/api/v1   (OpenAPI docs: {url}/docs)",
        f"  API token    {token}",
        f"               curl{curl_ca(site)} -H \"Authorization: Bearer $(cat {token})\" {url}/api/v1/gateways",
        *tls_lines(site),
        f"  metrics      {url}/metrics",
        f"  dashboard    {url}/dashboard/",
        f"  logs         {paths.logs}/",
        f"  configs      {paths.config}/",
        f"  switch       P4Runtime {topo.p4runtime_addr} inside {topo.switch_ns} (device id {topo.switch.device_id})",
        *switch_lines(site),
    ]
    if topo.replicated:
        lines += replica_lines(site)
    if (sim := topo.simulated_hosts) is not None:
        sock = paths.hostsim_socket
        shown = sock.relative_to(REPO) if sock.is_relative_to(REPO) else sock
        lines.append(f"  sim. hosts   {sim.count} (supergw-hostsim, switch port {sim.port}); counters: "
                     f".venv/bin/python -m topologies.hostsim_client {shown} --hosts")
    if topo.remote_access is not None:
        lines += remote_access_lines(site)
    return lines


def remote_access_lines(site: Site) -> list[str]:
    topo, paths = site.topo, site.paths
    ra = topo.remote_access
    assert ra is not None
    names = ra.client_names()
    first = f"{topo.ns(names[0])}" if names else f"{topo.ns('rw1')}"
    return [
        f"  public IP_P  {ra.public_ip} (MAC {ra.public_mac}): the outside switch answers ARP, every gateway holds it",
        f"  outside sw.  P4Runtime {topo.outside_p4runtime_addr} in {topo.outside_ns} (device id {ra.outside.device_id}), "
        f"log {paths.logs}/outside-switch.log",
        f"  clients      {ra.clients} strongSwan clients {', '.join(names[:3])}{' ...' if len(names) > 3 else ''} "
        f"({ra.client_subnet}, behind {topo.ns('cnet')}); charon state and logs {paths.clients}/<name>/",
        f"               ip netns exec {first} ping {topo.hosts[0].ip}     (through its tunnel to a LAN host)",
        f"               swanctl --list-sas --uri unix://{paths.clients}/{names[0] if names else 'rw1'}/charon.vici",
        f"  pools        gateway i hands out the i-th /24 of {ra.pools} ("
        + ", ".join(f"{g.name} {ra.pool(k)}" for k, g in enumerate(topo.gateways)) + ")",
    ]


def where_lines(emu: Emulation) -> list[str]:
    lines = ["Where to look:"]
    for site in emu.sites:
        lines += site_lines(site, emu.spec.several)
    first = emu.sites[0].topo
    partner = emu.spec.partner(first)
    target = str(partner.hosts[0].ip) if partner is not None else str(first.remote.hosts[0].ip)
    lines.append(f"  host shell   ip netns exec {first.ns(first.hosts[0].name)} bash     (try: ping {target})")
    if emu.spec.several:
        lines.append(f"  namespaces   {', '.join(f'{s.prefix}-* ({len(s.topo.namespaces())})' for s in emu.sites)}"
                     + (f", {emu.spec.shared_wan}" if emu.spec.shared_wan else ""))
    else:
        lines.append(f"  namespaces   {', '.join(first.namespaces())}")
    if partner is not None:
        cap = first.gateway_cpu_percent
        lines.append(f"  pairs        {', '.join(f'{g.name}<->{g.peer.name}' for g in first.gateways)} over "
                     f"{emu.spec.shared_wan} {first.wan.subnet}; gateway CPU cap {cap or 'none'} % of a core")
    lines.append("  stop         make stop")
    return lines


def status_lines(emu: Emulation) -> list[str]:
    st = emu.state
    lines = [f"phase {st.phase}, started {time.ctime(st.started_at)} ({emu.describe()}; {st.source or 'no file'})"]
    for rec in st.processes:
        name = f"{rec.site}/{rec.name}" if emu.spec.several else rec.name
        lines.append(f"  {name:<22} pid {rec.pid:<8} {'running' if processes.alive(rec) else 'STOPPED'}   log {rec.log}")
    for stage, value in st.stages.items():
        lines.append(f"  {stage:<22} {value}")
    for site in emu.sites:
        if site.topo.replicated:
            lines += replica_lines(site)
        if site.topo.simulated_hosts is not None:
            lines.append(f"  {simhosts.status_line(site.topo, site.paths)}")
    lines.append(json.dumps({"namespaces": network.existing_namespaces(emu.spec)}))
    return lines
