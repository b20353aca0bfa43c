"""The benchmark LAN's P4Runtime state is the controller's: its builders, its initial bucket
assignment and its host learning (rootless: only the update list is built)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from bench.dataplane import frames
from bench.dataplane.lan_state import Gateway, Lan, main, updates
from supergw_controller.southbound.entities import Op
from supergw_proto import p4constants as pc

GATEWAYS = [Gateway("g1", 2, "02:be:00:00:00:02"), Gateway("g2", 3, "02:be:00:00:00:03")]


def _lan(hosts: int = 8, buckets: int = 16) -> Lan:
    return Lan(1, GATEWAYS, [(h.mac, h.ip) for h in frames.hosts(hosts)], "10.98.0.1", "02:5e:98:00:00:00", buckets)


def _table(u: object) -> str:
    return str(getattr(getattr(u, "entity"), "table_id", type(getattr(u, "entity")).__name__))


def test_every_bucket_goes_to_a_gateway_evenly() -> None:
    spread = Counter(g.name for g in _lan(buckets=256).assignment().values())
    assert spread == {"g1": 128, "g2": 128}


def test_updates_are_what_the_controller_writes() -> None:
    lan = _lan()
    ups = updates(lan)
    tables = Counter(_table(u) for u in ups)
    assert tables[pc.TABLE_SETTINGS] == 1
    assert tables[pc.TABLE_PORT_ROLES] == 1 + len(GATEWAYS)
    assert tables[pc.TABLE_BUCKETS] == lan.buckets
    for table in (pc.TABLE_LEARNED_SOURCES, pc.TABLE_MAC_TABLE, pc.TABLE_HOST_IPS):
        assert tables[table] == len(lan.hosts)
    assert tables["P4MulticastGroupEntry"] == tables["P4DigestEntry"] == 1
    assert [u.op for u in ups if _table(u) == pc.TABLE_SETTINGS] == [Op.MODIFY]
    assert all(u.op is Op.INSERT for u in ups if _table(u) != pc.TABLE_SETTINGS)
    learned = [u.entity for u in ups if _table(u) == pc.TABLE_LEARNED_SOURCES]
    assert all(e.idle_timeout_ns == 300 * 10**9 for e in learned)  # the controller's default ageing


def test_gateway_macs_are_not_vmacs() -> None:
    lan = _lan()
    for g in lan.gateways:
        assert not g.mac.startswith(lan.vmac_base[:11])  # every frame to a gateway is rewritten


@pytest.mark.parametrize("bad", ["{", '{"host_port": 1}', '{"host_port": 1, "gateways": [{"name": "g"}], "hosts": []}'])
def test_bad_lan_is_a_clear_error(bad: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lan = tmp_path / "lan.json"
    lan.write_text(bad)
    assert main(["--addr", "127.0.0.1:1", "--device-id", "1", "--p4info", "x", "--lan", str(lan)]) == 2
    assert capsys.readouterr().err.startswith("lan_state: ")


def test_lan_round_trips_through_json() -> None:
    lan = _lan()
    assert Lan.from_json(lan.to_json()) == lan


def test_move_timing_needs_two_gateways(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bench.dataplane import control

    lan = tmp_path / "lan.json"
    lan.write_text(Lan(1, GATEWAYS[:1], [], "10.98.0.1", "02:5e:98:00:00:00", 16).to_json())
    assert control.main(["--addr", "127.0.0.1:1", "--device-id", "1", "--p4info", "x", "--lan", str(lan)]) == 1
    assert "a move needs two gateways, the LAN has 1" in capsys.readouterr().err
    lan.write_text("[")
    assert control.main(["--addr", "127.0.0.1:1", "--device-id", "1", "--p4info", "x", "--lan", str(lan)]) == 1
    assert capsys.readouterr().err.startswith("control: ")


def _lan6(hosts: int = 8) -> Lan:
    lan = frames.hosts(hosts)
    return Lan(1, GATEWAYS, [(h.mac, h.ip) for h in lan], "10.98.0.1", "02:5e:98:00:00:00", 16,
               gateway_ip6=("fe80::1", frames.ip6_of("10.98.0.1")), host_ip6s=[(h.mac, h.ip6) for h in lan])


def test_a_dual_stack_lan_gets_the_controllers_nd_state_and_learned_ipv6_addresses() -> None:
    lan = _lan6()
    ups = updates(lan)
    tables = Counter(_table(u) for u in ups)
    assert [u.op for u in ups if _table(u) == pc.TABLE_ND_SETTINGS] == [Op.MODIFY]
    nd = next(u.entity for u in ups if _table(u) == pc.TABLE_ND_SETTINGS)
    assert nd.action.name == pc.ACTION_SET_ND_CONFIG
    assert tables["P4DigestEntry"] == 2  # the IPv4 and the IPv6 learn digests
    for table in (pc.TABLE_LEARNED_IP6S, pc.TABLE_HOST_IP6S):
        assert tables[table] == len(lan.host_ip6s)
    # learned once each: the IPv6 learning of a host already learned adds no IPv4-side entries
    for table in (pc.TABLE_LEARNED_SOURCES, pc.TABLE_MAC_TABLE, pc.TABLE_HOST_IPS):
        assert tables[table] == len(lan.hosts)
    assert Lan.from_json(lan.to_json()) == lan
    assert lan.gateway_ip6 == ("fe80::1", "fd00:98::1")
