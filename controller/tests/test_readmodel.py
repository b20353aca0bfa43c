"""The read model: each REST view shows the fact of the part that owns it."""

from __future__ import annotations

from pathlib import Path

from supergw_controller.southbound import entities as ent
from supergw_controller.southbound.session import Role
from supergw_proto import p4constants as pc
from supergw_proto.bucket import bucket_of, vmac
from supergw_proto.reports import Heartbeat

from corekit import Clock, make_config, running_core


class Digest(list[dict[str, int]]):
    def ack(self) -> str:
        return "ack"


async def test_views_read_every_part(tmp_path: Path) -> None:
    clock = Clock()
    core, sess = await running_core(make_config(tmp_path), clock)
    mac = "02:00:00:00:00:07"
    await core.switch.on_digest(Digest([{pc.DIGEST_LEARN_DIGEST_SRC_MAC: ent.mac_int(mac), pc.DIGEST_LEARN_DIGEST_PORT: 2,
                                          pc.DIGEST_LEARN_DIGEST_SRC_IP: ent.ip_int("10.0.0.7")}]))  # fmt: skip
    await core.accept_heartbeat(Heartbeat(gateway="g1", timestamp=1.0))
    core.liveness.receiver.accept(b"junk", "192.0.2.1:9")
    await core.pin(4, "g3")  # g2 held it
    core.stats.update(1.0, {4: (10, 1000)})
    core.stats.update(2.0, {4: (30, 5000)})
    clock.t += 2.5

    st = await core.status()
    assert (st.role, st.connected, st.uptime_s) == ("primary", True, 2.5)
    assert (st.hosts, st.digests_total, st.heartbeats_total, st.reports_total) == (1, 1, 1, 0)
    assert st.heartbeats_rejected == {"malformed": 1}
    assert st.moves_total["pin"] == 1 and st.buckets_unassigned == 0 and st.gateways_alive == 3
    assert st.election_id == "0:1" and st.p4rt_errors_total == 0

    b4 = await core.bucket(4)
    assert (b4.gateway, b4.pinned, b4.packets, b4.bytes, b4.pps, b4.bps) == ("g3", "g3", 30, 5000, 20.0, 4000.0)
    assert b4.vmac == vmac("02:5e:00:00:00:00", 4)
    g3 = await core.gateway("g3")
    assert g3.buckets == sum(1 for g in core.placement.assignment.values() if g == "g3") == 6
    assert (await core.gateway("g1")).heartbeat_age_s == 2.5
    [h] = await core.hosts()
    b = bucket_of(mac, 16)
    assert (h.mac, h.port, h.ip, h.bucket, h.gateway, h.learned) == (mac, 2, "10.0.0.7", b, core.placement.assignment[b], True)

    sess.role = Role.BACKUP
    st = await core.status()
    assert (st.role, st.connected) == ("backup", True)
    sess.role = Role.DISCONNECTED
    assert (await core.status()).connected is False
