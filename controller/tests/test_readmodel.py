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
    assert (st.role, st.connected, st.reconciled, st.uptime_s) == ("primary", True, True, 2.5)
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
    [h] = (await core.hosts()).hosts
    b = bucket_of(mac, 16)
    assert (h.mac, h.port, h.ip, h.bucket, h.gateway, h.learned) == (mac, 2, "10.0.0.7", b, core.placement.assignment[b], True)

    core.placement.pause()  # a reconnect: primary again, the switch's tables not yet reconciled
    st = await core.status()
    assert (st.role, st.reconciled) == ("primary", False), "primary alone does not mean the switch forwards yet"
    sess.role = Role.BACKUP
    st = await core.status()
    assert (st.role, st.connected, st.reconciled) == ("backup", True, False)
    sess.role = Role.DISCONNECTED
    assert (await core.status()).connected is False


async def test_hosts_come_in_pages_by_mac_with_filters(tmp_path: Path) -> None:
    from supergw_proto.api import HostQuery
    from supergw_controller.southbound.domain import HostSeen, Ip6Seen

    core, _ = await running_core(make_config(tmp_path), Clock())
    seen = [HostSeen(f"02:00:00:00:{i // 256:02x}:{i % 256:02x}", 1 + i % 2, f"10.1.{i // 256}.{i % 256}") for i in range(40)]
    await core.hosts_seen(list(reversed(seen)))
    await core.ip6s_seen([Ip6Seen(seen[7].mac, seen[7].port, "fd00::7")])
    macs = sorted(h.mac for h in seen)

    first = await core.hosts(HostQuery(limit=15))
    assert [h.mac for h in first.hosts] == macs[:15] and (first.total, first.matched) == (40, 40)
    assert first.next_after == macs[14]
    walked, after = [], None
    while True:
        page = await core.hosts(HostQuery(limit=15, after=after))
        walked += [h.mac for h in page.hosts]
        if page.next_after is None:
            break
        after = page.next_after
    assert walked == macs and len(page.hosts) == 10
    # after a MAC that is not a host: the page starts at the next one
    assert (await core.hosts(HostQuery(limit=1, after="02:00:00:00:00:04"))).hosts[0].mac == "02:00:00:00:00:05"

    # each filter, alone and together; matched counts every page's hosts
    on_port_2 = await core.hosts(HostQuery(port=2, limit=5))
    assert all(h.port == 2 for h in on_port_2.hosts) and on_port_2.matched == 20 and on_port_2.next_after
    assignment = core.placement.assignment
    for gw in ("g1", "g2", "g3"):
        page = await core.hosts(HostQuery(gateway=gw))
        want = [h.mac for h in seen if assignment[bucket_of(h.mac, 16)] == gw]
        assert sorted(want) == [h.mac for h in page.hosts] and page.matched == len(want)
        assert all(h.gateway == gw for h in page.hosts)
    b = bucket_of(seen[3].mac, 16)
    assert {h.mac for h in (await core.hosts(HostQuery(bucket=b))).hosts} == {h.mac for h in seen if bucket_of(h.mac, 16) == b}
    by_ip = await core.hosts(HostQuery(ip="10.1.0.9"))
    assert [h.mac for h in by_ip.hosts] == [seen[9].mac] and by_ip.matched == 1
    by_ip6 = await core.hosts(HostQuery(ip="fd00:0::7"))
    assert [h.ipv6 for h in by_ip6.hosts] == [["fd00::7"]]
    assert (await core.hosts(HostQuery(mac=seen[9].mac.upper(), ip="10.1.0.9"))).matched == 1
    assert (await core.hosts(HostQuery(mac=seen[8].mac, ip="10.1.0.9"))).hosts == []  # they disagree
    assert (await core.hosts(HostQuery(ip="10.9.9.9"))).matched == 0
    assert (await core.hosts(HostQuery(learned=False))).matched == 0
    both = await core.hosts(HostQuery(port=1, gateway="g1"))
    assert all(h.port == 1 and h.gateway == "g1" for h in both.hosts) and both.total == 40
