"""`make run TLS=1` for real: `up --tls` boots the one-site emulation with the REST API on
https and P4Runtime over mutual TLS, certificates issued by `supergw-gateway pki`.

Checks: the controller is primary on the switch and pushed its pipeline over TLS (the
switch refuses a plaintext P4Runtime client); every agent reports over https (its config
says https and the CA, the controller counts it alive with reports arriving); the REST API
answers over https to a client trusting the site's CA, and refuses plain http and a client
that does not trust that CA; `up`'s output shows https and curl's `--cacert`. Then the same
with three controller replicas on etcd (`make run HA=1 TLS=1`): a leader killed, a backup
takes the switch over TLS. Needs root, the built switch and strongSwan (and etcd for the
second); the outside switch of `TOPO=remote-access` over TLS too. About a minute each.
"""

from __future__ import annotations

import re
import shutil
import time

import pytest
import yaml

from supergw_proto.rest import ApiError, ControllerClient
from topologies import api_tls, components, ha
from topologies.emulation import Emulation
from topologies.schema import REMOTE_ACCESS_TOPOLOGY
from topologies.tests.emulation import EMULATION_MARKS, assert_gone, booted, run_topologies, skip_if_running

pytestmark = EMULATION_MARKS

EMU = Emulation.from_file(tls=True)
TOPO = EMU.spec.single


def test_up_tls_rest_and_p4runtime() -> None:
    skip_if_running(EMU)
    try:
        up = run_topologies("up", "--tls")
        assert up.returncode == 0, up.stdout + up.stderr
        out = up.stdout
        url = f"https://{TOPO.mgmt.controller_ip}:{TOPO.controller.api_port}"
        assert f"REST API     {url}/api/v1" in out, out
        emu = Emulation.attach()
        assert emu is not None
        site = emu.sites[0]
        pki = api_tls.site_pki(site.paths)
        assert f"curl --cacert {pki.ca} -H" in out, out
        assert "mutual TLS" in out, out

        # P4Runtime: the controller (over mTLS: its config says so) is primary and set the pipeline.
        ctl = yaml.safe_load(site.paths.controller_config().read_text())
        assert ctl["switch"]["tls"]["cert"].endswith("p4rt-controller.crt")
        status = site.api().status()
        assert status.connected and status.role == "primary" and status.pipeline_cookie is not None, status
        assert status.p4rt_errors_total == 0, status
        probe = [TOPO.p4runtime_addr, str(TOPO.switch.device_id)]
        ok, detail = components.probe_in_netns(TOPO.switch_ns, *api_tls.probe_options(TOPO, site.paths), "pipeline", *probe)
        assert ok, detail
        ok, detail = components.probe_in_netns(TOPO.switch_ns, "pipeline", *probe)
        assert not ok and "UNAVAILABLE" in detail, detail  # plaintext P4Runtime is refused
        switch_log = (site.paths.logs / "switch.log").read_text(errors="replace")
        assert "P4Runtime TLS handshake refused" in switch_log, switch_log[-1500:]

        # The agents report over https, trusting the site's CA.
        for g in TOPO.gateways:
            agent = yaml.safe_load(site.paths.gateway_config(g.name).read_text())["controller"]
            assert agent["url"].startswith("https://") and agent["ca_file"] == str(pki.ca)
        gws = site.gateways()
        assert all(v.state == "alive" for v in gws.values()), gws
        before = site.api().status().reports_total
        time.sleep(2.5)  # > 2 report intervals
        assert site.api().status().reports_total > before

        # REST: https with the CA answers; plain http and an untrusting client get nothing.
        assert {v.name for v in site.api().gateways()} == {g.name for g in TOPO.gateways}
        with ControllerClient(url.replace("https://", "http://"), site.token, timeout=3) as plain:
            with pytest.raises(ApiError) as ei:
                plain.status()
            assert ei.value.status is None, ei.value  # no HTTP answer at all
        with ControllerClient(url, site.token, timeout=3) as untrusting:  # the system's CAs only
            with pytest.raises(ApiError, match=re.compile("certificate verify failed", re.I)):
                untrusting.status()
    finally:
        down = run_topologies("down")
        assert down.returncode == 0, down.stdout + down.stderr
    assert_gone(EMU)


@pytest.mark.skipif(shutil.which("etcd") is None, reason="etcd not installed (etcd-server)")
def test_up_tls_with_replicas_leader_and_takeover_over_tls() -> None:
    """`make run HA=1 TLS=1`: three replicas on etcd (TLS, client certificates, auth), each
    serving https and dialing the switch over mutual TLS; the leader is primary on the switch,
    and when it is killed a backup takes the switch over, still over TLS, with every gateway
    alive in its view (the agents report to every replica over https)."""
    emu = Emulation.from_file(tls=True, replicas=ha.HA_REPLICAS)
    topo = emu.spec.single
    skip_if_running(emu)
    try:
        up = run_topologies("up", "--tls", "--replicas", str(ha.HA_REPLICAS))
        assert up.returncode == 0, up.stdout + up.stderr
        for stage in ("switch", "controller", "agents", "end-to-end ping"):
            assert f"ok  {stage}:" in up.stdout, up.stdout
        running = Emulation.attach()
        assert running is not None and running.spec == emu.spec
        site = running.site()
        names = topo.controller.replica_names()
        for n in names:
            ctl = yaml.safe_load(site.paths.controller_config(n).read_text())
            assert ctl["api"]["tls"] and ctl["switch"]["tls"]["cert"].endswith("p4rt-controller.crt"), n
            assert ctl["store"]["etcd"]["tls"]["cert"] and all(e.startswith("https://") for e in ctl["store"]["etcd"]["endpoints"])
        leader = site.agreed_leader(names, 10, primary=True)
        site.kill_controller(leader)
        successor = site.agreed_leader([n for n in names if n != leader], 15, primary=True)
        status = site.api(successor).status()
        assert status.connected and status.role == "primary" and status.p4rt_errors_total == 0, status
        gws = site.wait_gateways(lambda g: all(v.state == "alive" for v in g.values()), "every gateway alive", 10,
                                 replica=successor)
        assert set(gws) == {g.name for g in topo.gateways}
    finally:
        down = run_topologies("down")
        assert down.returncode == 0, down.stdout + down.stderr
    assert_gone(emu)


def test_remote_access_outside_switch_over_mutual_tls() -> None:
    """`make run TOPO=remote-access TLS=1`: the controller configures the outside switch over
    mutual TLS too (a client reaches the LAN only through what it programmed there), and the
    outside switch refuses a plaintext P4Runtime client."""
    emu = Emulation.from_file(REMOTE_ACCESS_TOPOLOGY, changes={"gateways": 2, "clients": 1}, tls=True)
    with booted(emu):
        site = emu.site()
        topo = site.topo
        stages = emu.state.stages
        assert str(stages.get("clients reach LAN")).startswith("ok"), stages
        ctl = yaml.safe_load(site.paths.controller_config().read_text())
        assert ctl["remote_access"]["switch"]["tls"] == api_tls.switch_tls_config(api_tls.site_pki(site.paths))
        assert site.api().status().p4rt_errors_total == 0
        ra = topo.remote_access
        assert ra is not None
        probe = [topo.outside_p4runtime_addr, str(ra.outside.device_id)]
        ok, detail = components.probe_in_netns(topo.outside_ns, *api_tls.probe_options(topo, site.paths), "pipeline", *probe)
        assert ok, detail
        ok, detail = components.probe_in_netns(topo.outside_ns, "pipeline", *probe)
        assert not ok and "UNAVAILABLE" in detail, detail
