"""mac_table entries carry the output port's role (docs/pipeline-contract.md, gateway
unicast): the controller only ever writes HOST, and repairs any other role it adopts."""

from __future__ import annotations

from finsy import P4TableAction, P4TableEntry, P4TableMatch

from supergw_proto import p4constants as pc
from supergw_controller.learning import HostTable
from supergw_controller.southbound import entities as ent
from supergw_controller.southbound.domain import Op

from corekit import host_updates, ops

MAC = "02:00:00:00:00:01"
MAC2 = "02:00:00:00:00:02"


def mac_entry_with_role(mac: str, port: int, role: int) -> P4TableEntry:
    return P4TableEntry(
        pc.TABLE_MAC_TABLE,
        match=P4TableMatch(dst_mac=ent.mac_int(mac)),
        action=P4TableAction(pc.ACTION_SET_OUTPUT_PORT, port=port, role=role),
    )


def test_mac_entry_role_is_host() -> None:
    action = ent.mac_entry(MAC, 3).action
    assert isinstance(action, P4TableAction)
    assert dict(action.args) == {pc.PARAM_SET_OUTPUT_PORT_PORT: 3, pc.PARAM_SET_OUTPUT_PORT_ROLE: int(pc.PortRole.HOST)}


def test_adopt_keeps_host_role_entries() -> None:
    t = HostTable({1, 2}, "10.0.0.1", ip_wait_s=30.0)
    held = ent.held_hosts([ent.learned(MAC, 1, 1)], [ent.mac_entry(MAC, 1)], [])  # as the southbound reads it
    assert held.l2 == {MAC: 1}
    assert t.adopt(held, 0.0) == []


def test_adopt_rewrites_a_learned_hosts_entry_with_another_role() -> None:
    t = HostTable({1, 2}, "10.0.0.1", ip_wait_s=30.0)
    held = ent.held_hosts([ent.learned(MAC, 1, 1)], [mac_entry_with_role(MAC, 1, int(pc.PortRole.GATEWAY))], [])
    assert held.l2 == {MAC: None}  # another role: points nowhere
    fixes = t.adopt(held, 0.0)
    assert ops(fixes) == [(Op.MODIFY, pc.TABLE_MAC_TABLE)]
    assert host_updates(fixes)[0].entity.entity() == ent.mac_entry(MAC, 1)


def test_adopt_deletes_an_unlearned_entry_with_another_role() -> None:
    t = HostTable({1, 2}, "10.0.0.1", ip_wait_s=30.0)
    fixes = t.adopt(ent.held_hosts([], [mac_entry_with_role(MAC2, 2, 200)], []), 0.0)
    assert ops(fixes) == [(Op.DELETE, pc.TABLE_MAC_TABLE)]
    assert host_updates(fixes)[0].entity.entity() == ent.mac_key(MAC2)
    assert t.get(MAC2) is None
