"""The PTF library without a switch (rootless): what the supergw builders put on the wire,
the write bookkeeping that cleanup replays, and the per-update error assertion."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import grpc
import pytest
from finsy.proto import p4r, rpc_code
from supergw_p4rt import DELETE, INSERT, MODIFY, P4RuntimeSession, P4RuntimeWriteError, load_schema
from supergw_proto import p4constants as c
from supergw_proto.addresses import ipv4_to_int, mac_to_bytes
from supergw_ptf import packets as pk
from supergw_ptf import params
from supergw_ptf.params import Target
from supergw_ptf.portmap import load
from supergw_ptf.supergw import REPLICA_PORT_FIELD, Dispatch, SupergwTest, gateway_mac

P4INFO = Path(__file__).resolve().parents[2] / "p4src" / "v1model" / "supergw.p4info.txtpb"


class RecordingClient:
    """Stands in for the session: encodes with the real schema, records each Write and
    fails it with `fail_with` (a per-update error) when set."""

    def __init__(self, target: Target) -> None:
        self.schema = load_schema(P4INFO)
        self.schema.set_p4runtime_version(REPLICA_PORT_FIELD[target])
        self.writes: list[list[p4r.Update]] = []
        self.fail_with: int | None = None

    updates = P4RuntimeSession.updates

    def write(self, updates: Sequence[p4r.Update], timeout: float | None = None) -> float:
        self.writes.append(list(updates))
        if self.fail_with is not None:
            raise P4RuntimeWriteError(grpc.RpcError(), [p4r.Error(canonical_code=self.fail_with)] * len(updates), len(updates))
        return 0.0


def offline(target: Target = "ebpf") -> tuple[SupergwTest, RecordingClient]:
    """A SupergwTest as setUp leaves it, with the recording client instead of a switch."""
    test = SupergwTest()
    client = RecordingClient(target)
    test.client, test.schema = client, client.schema  # type: ignore[assignment]
    test.params = params.TestParams(grpcaddr="127.0.0.1:9559", p4info=P4INFO, device_id=1, cpu_port=255, target=target)
    test.ports, test.dispatch, test._undo = load(), Dispatch(), []
    return test, client


def table_entries(updates: Sequence[p4r.Update]) -> list[p4r.TableEntry]:
    return [u.entity.table_entry for u in updates]


@pytest.mark.parametrize("target", ["ebpf", "bmv2"])
def test_flood_group_replica_port_field_per_target(target: Target) -> None:
    test, client = offline(target)
    test.set_flood_group()
    (update,) = client.writes[0]
    group = update.entity.packet_replication_engine_entry.multicast_group_entry
    assert group.multicast_group_id == c.HOST_FLOOD_GROUP
    field = {"ebpf": "port", "bmv2": "egress_port"}[target]
    assert [r.WhichOneof("port_kind") for r in group.replicas] == [field] * len(test.ports.hosts)
    ports = [int.from_bytes(r.port, "big") if field == "port" else r.egress_port for r in group.replicas]
    assert ports == test.ports.hosts


def test_bucket_entry_on_the_wire() -> None:
    test, _ = offline()
    entry = test.encode(test.bucket_entry(3, 5)).table_entry
    assert entry.table_id == test.schema.tables[c.TABLE_BUCKETS].id
    assert entry.match[0].exact.value == b"\x03"
    assert [p.value for p in entry.action.action.params] == [b"\x05", mac_to_bytes(gateway_mac(5)).lstrip(b"\x00")]
    key = test.encode(test.bucket_entry(3)).table_entry
    assert not key.HasField("action") and key.match == entry.match


def test_mac_entry_role_follows_the_port_map() -> None:
    test, _ = offline()
    unmapped = max(p.port for p in test.ports.ports) + 1
    for port, role in ((test.ports.hosts[0], c.PortRole.HOST), (test.ports.gateways[0], c.PortRole.GATEWAY),
                       (test.ports.unknown[0], c.PortRole.UNKNOWN), (unmapped, c.PortRole.UNKNOWN)):
        params = test.encode(test.mac_entry("00:00:03:00:00:01", port)).table_entry.action.action.params
        assert int.from_bytes(params[1].value, "big") == role, port


def test_dispatch_settings_are_modified_and_restored_at_cleanup() -> None:
    test, client = offline()
    test.configure_dispatch(Dispatch(k=4096))
    (update,) = client.writes[0]
    assert update.type == MODIFY and update.entity.table_entry.is_default_action
    assert [p.value for p in update.entity.table_entry.action.action.params] == [
        ipv4_to_int("10.0.0.1").to_bytes(4, "big"), mac_to_bytes("02:5e:00:00:00:00").lstrip(b"\x00"), b"\x0f\xff",
        b"\x00",  # bucket_hash CRC32
    ]
    test.undo_writes()
    (restore,) = client.writes[1]
    assert restore.type == MODIFY
    assert restore.entity.table_entry.action.action.action_id == test.schema.actions[c.ACTION_MARK_UNCONFIGURED].id


def test_cleanup_replays_backwards() -> None:
    test, client = offline()
    test.insert(test.bucket_entry(1, 5))
    test.modify(test.bucket_entry(1, 6), restore=test.bucket_entry(1, 5))
    test.undo_writes()
    assert [(u.type, e.action.action.params[0].value) for u, e in zip(client.writes[-1], table_entries(client.writes[-1]))] == [
        (MODIFY, b"\x05"), (DELETE, b"\x05")
    ]


def test_cleanup_forgets_what_the_test_deleted() -> None:
    test, client = offline()
    a, b = test.port_role_entry(1, 1), test.port_role_entry(2, 2)
    test.insert(a, b)
    test.delete(a)
    test.undo_writes()
    assert [u.type for u in client.writes[-1]] == [DELETE]
    assert client.writes[-1][0].entity == test.encode(test.port_role_entry(2, 2))
    assert test._undo == []


def test_cleanup_tolerates_not_found_and_reports_anything_else() -> None:
    test, client = offline()
    test.track_inserted(test.port_role_entry(1, 1))
    client.fail_with = rpc_code.NOT_FOUND
    test.undo_writes()
    test.track_inserted(test.port_role_entry(1, 1))
    client.fail_with = rpc_code.INTERNAL
    with pytest.raises(AssertionError, match="cleanup failed"):
        test.undo_writes()


def test_assert_p4runtime_error_checks_code_count_and_message() -> None:
    test, client = offline()
    client.fail_with = rpc_code.INVALID_ARGUMENT
    with test.assertP4RuntimeError(rpc_code.INVALID_ARGUMENT):
        test.write(INSERT, test.port_role_entry(1, 1))
    with pytest.raises(AssertionError, match="expected ALREADY_EXISTS, got INVALID_ARGUMENT"):
        with test.assertP4RuntimeError(rpc_code.ALREADY_EXISTS):
            test.write(INSERT, test.port_role_entry(1, 1))
    client.fail_with = None
    with pytest.raises(AssertionError, match="the write succeeded"):
        with test.assertP4RuntimeError(rpc_code.INVALID_ARGUMENT):
            test.write(INSERT, test.port_role_entry(1, 1))
    with pytest.raises(AssertionError, match="one p4.Error per update; got 1 for 2"):
        with test.assertP4RuntimeError(rpc_code.INVALID_ARGUMENT):
            raise P4RuntimeWriteError(grpc.RpcError(), [p4r.Error(canonical_code=rpc_code.INVALID_ARGUMENT)], 2)


def test_frames_the_switch_must_emit() -> None:
    test, _ = offline()
    host = "00:00:03:00:00:18"
    frame = pk.ipv4_udp(eth_src=gateway_mac(5), eth_dst=host)
    assert test.to_host(frame, host) == pk.with_macs(frame, eth_src=test.dispatch.vmac_of(host))
    reply = test.gateway_ip_reply(host, "10.0.0.10")
    assert reply[:12] == mac_to_bytes(host) + mac_to_bytes(test.dispatch.vmac_of(host)) and len(reply) == 42
    assert len(pk.raw_arp(eth_src=host, truncate=18)) == 18
