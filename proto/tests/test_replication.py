"""The replication wire formats: orders round-trip through the header, a bad state is refused."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from supergw_proto.replication import ReplicationOrders, ReplicationPeer, ReplicationState
from supergw_proto.reports import AgentOrders, GatewayReport


def test_orders_round_trip_through_the_header_and_ignore_unknown_keys() -> None:
    orders = AgentOrders(replication=ReplicationOrders(
        generation=7, backup=ReplicationPeer(name="g2", endpoint="10.255.60.12:4520"), protects="g4",
        take_over=("g4",)))
    assert AgentOrders.from_header(orders.header()) == orders
    assert not orders.empty and AgentOrders().empty
    newer = '{"replication": {"generation": 1, "protects": "g1", "quorum": 3}, "reboot": true}'
    assert AgentOrders.from_header(newer).replication == ReplicationOrders(generation=1, protects="g1")


@pytest.mark.parametrize("bad", [
    '{"replication": {"generation": -1}}',
    '{"replication": {"generation": 1, "backup": {"name": "", "endpoint": "a:1"}}}',
    '{"replication": {"generation": 1, "backup": {"name": "g2"}}}',
    '{"replication": {"generation": 1, "protects": "' + "g" * 65 + '"}}',
])
def test_malformed_orders_are_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        AgentOrders.from_header(bad)


def test_report_carries_the_replication_state_strictly() -> None:
    base = {"gateway": "g1", "timestamp": 1.0, "backend": "libipsec", "cpu_percent": 0.0, "softirq_percent": 0.0,
            "charon_cpu_percent": 0.0, "tunnel_bytes_in": 0, "tunnel_bytes_out": 0, "tunnel_packets_in": 0,
            "tunnel_packets_out": 0}
    rep = GatewayReport.model_validate({**base, "replication": {
        "endpoint": "10.255.60.11:4520", "generation": 3, "backup": "g2", "backup_connected": True, "own_sas": 5,
        "replicated_sas": 5, "lag_ms_last": 1.5, "taken_over": {"g4": 2}, "foreign_sas": {"g4": 1}}})
    assert rep.replication == ReplicationState(endpoint="10.255.60.11:4520", generation=3, backup="g2",
                                               backup_connected=True, own_sas=5, replicated_sas=5, lag_ms_last=1.5,
                                               taken_over={"g4": 2}, foreign_sas={"g4": 1})
    for bad in ({"own_sas": "5"}, {"own_sas": -1}, {"secret": "00"}, {"generation": -2}):
        with pytest.raises(ValidationError):
            GatewayReport.model_validate({**base, "replication": bad})


def test_replication_counts_are_json_integers_as_everywhere_in_a_report() -> None:
    """`3.0` is a JSON integer (JSON Schema says so, and a schema-driven client sends it);
    `true` and `"3"` are not, in the state's fields and in its per-gateway counts."""
    state = ReplicationState.model_validate_json(
        '{"own_sas": 3.0, "generation": 7.0, "fence_cleared": 7.0, "foreign_sas": {"g4": 2.0}}')
    assert (state.own_sas, state.generation, state.fence_cleared, state.foreign_sas) == (3, 7, 7, {"g4": 2})
    for bad in ('{"own_sas": true}', '{"held_sas": "3"}', '{"foreign_sas": {"g4": true}}', '{"own_sas": 3.5}'):
        with pytest.raises(ValidationError):
            ReplicationState.model_validate_json(bad)
