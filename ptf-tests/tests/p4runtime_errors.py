"""P4Runtime writes that do not fit the P4Info are rejected per update with the
canonical code the reference server (p4lang/PI, behind BMv2) returns: RPC status UNKNOWN
with one p4.v1.Error per update. A write from a non-primary client is refused as a whole."""

from __future__ import annotations

import dataclasses

import grpc
from finsy import P4TableAction, P4TableEntry
from finsy.proto import p4r, p4r_grpc, rpc_code
from ptf.testutils import group
from supergw_p4rt import DELETE, INSERT, MODIFY, Entity, P4RuntimeWriteError
from supergw_proto import p4constants as c
from supergw_ptf.base_test import autocleanup
from supergw_ptf.supergw import DROP_UNASSIGNED, FLOOD, LEARN, PORT_ROLES, PUNT_ARP_MISS, SET_GATEWAY, SupergwTest

UNKNOWN_TABLE_ID = 0x02FFFFF0
UNKNOWN_ACTION_ID = 0x01FFFFF0


class WriteErrorBase(SupergwTest):
    def role_entry(self, port: int = 1, role: int = 1) -> P4TableEntry:
        return self.port_role_entry(port, role)

    def assert_insert_rejected(self, entity: Entity, code: int = rpc_code.INVALID_ARGUMENT) -> None:
        with self.assertP4RuntimeError(code):
            self.insert(entity)


@group("p4runtime_errors")
class UnknownTableIdRejected(WriteErrorBase):
    @autocleanup
    def runTest(self) -> None:
        ent = self.encode(self.role_entry())
        ent.table_entry.table_id = UNKNOWN_TABLE_ID
        self.assert_insert_rejected(ent)


@group("p4runtime_errors")
class UnknownActionIdRejected(WriteErrorBase):
    @autocleanup
    def runTest(self) -> None:
        ent = self.encode(self.role_entry())
        ent.table_entry.action.action.action_id = UNKNOWN_ACTION_ID
        self.assert_insert_rejected(ent)


@group("p4runtime_errors")
class ActionOfAnotherTableRejected(WriteErrorBase):
    @autocleanup
    def runTest(self) -> None:
        ent = self.encode(self.port_role_entry(1, 1))
        ent.table_entry.action.action.CopyFrom(self.encode(self.mac_entry("00:00:03:00:00:01", 2)).table_entry.action.action)
        self.assert_insert_rejected(ent)


@group("p4runtime_errors")
class ParamTooWideRejected(WriteErrorBase):
    """role is bit<8>: 0x1ff does not fit."""

    @autocleanup
    def runTest(self) -> None:
        ent = self.encode(self.port_role_entry(1, 1))
        ent.table_entry.action.action.params[0].value = b"\x01\xff"
        self.assert_insert_rejected(ent)


@group("p4runtime_errors")
class MacParamTooWideRejected(WriteErrorBase):
    """gateway_mac is bit<48>: seven bytes with a non-zero top byte do not fit."""

    @autocleanup
    def runTest(self) -> None:
        ent = self.encode(self.bucket_entry(1, 5))
        mac_id = self.schema.actions[SET_GATEWAY].params[c.PARAM_SET_GATEWAY_GATEWAY_MAC].id
        (mac,) = [p for p in ent.table_entry.action.action.params if p.param_id == mac_id]
        mac.value = b"\x01" + bytes(6)
        self.assert_insert_rejected(ent)


@group("p4runtime_errors")
class MatchValueTooWideRejected(WriteErrorBase):
    """port is bit<16>: 0x1_0001 does not fit."""

    @autocleanup
    def runTest(self) -> None:
        ent = self.encode(self.port_role_entry(1, 1))
        ent.table_entry.match[0].exact.value = b"\x01\x00\x01"
        self.assert_insert_rejected(ent)


@group("p4runtime_errors")
class MissingMatchFieldRejected(WriteErrorBase):
    """learned_sources has two exact fields; an entry with only src_mac is invalid."""

    @autocleanup
    def runTest(self) -> None:
        self.assert_insert_rejected(self.learned_entry("00:00:03:00:00:01", None))


@group("p4runtime_errors")
class MissingParamRejected(WriteErrorBase):
    @autocleanup
    def runTest(self) -> None:
        ent = self.encode(self.bucket_entry(1, 5))
        del ent.table_entry.action.action.params[-1]
        self.assertEqual(len(ent.table_entry.action.action.params), 1)
        self.assert_insert_rejected(ent)


@group("p4runtime_errors")
class DuplicateInsertAlreadyExists(WriteErrorBase):
    @autocleanup
    def runTest(self) -> None:
        self.insert(self.role_entry(1, 1))
        with self.assertP4RuntimeError(rpc_code.ALREADY_EXISTS):
            self.write(INSERT, self.role_entry(1, 2))
        roles = [e for e in self.read_table_wire(PORT_ROLES) if e.match[0].exact.value == b"\x01"]
        self.assertEqual(len(roles), 1)
        self.assertEqual(roles[0].action.action.params[0].value, b"\x01", "the failed INSERT must not change the entry")


@group("p4runtime_errors")
class DeleteAbsentNotFound(WriteErrorBase):
    @autocleanup
    def runTest(self) -> None:
        with self.assertP4RuntimeError(rpc_code.NOT_FOUND):
            self.write(DELETE, self.mac_entry("00:00:03:00:00:99"))


@group("p4runtime_errors")
class ModifyAbsentNotFound(WriteErrorBase):
    @autocleanup
    def runTest(self) -> None:
        with self.assertP4RuntimeError(rpc_code.NOT_FOUND):
            self.write(MODIFY, self.mac_entry("00:00:03:00:00:99", 1))


@group("p4runtime_errors")
class DefaultOnlyActionInEntryRejected(WriteErrorBase):
    """drop_unassigned is @defaultonly on buckets (also flood on mac_table, learn on
    learned_sources, punt_arp_miss on host_ips). The P4Runtime specification names no
    code for this; p4lang/PI, which simple_switch_grpc serves, answers PERMISSION_DENIED."""

    @autocleanup
    def runTest(self) -> None:
        for entry, default_only in (
            (self.bucket_entry(1, 5), DROP_UNASSIGNED),
            (self.mac_entry("00:00:03:00:00:98", 1), FLOOD),
            (self.learned_entry("00:00:03:00:00:98", 1), LEARN),
            (self.host_ip_entry("10.0.0.60", "00:00:03:00:00:98"), PUNT_ARP_MISS),
        ):
            in_entry = dataclasses.replace(entry, action=P4TableAction(default_only))
            self.assert_insert_rejected(in_entry, rpc_code.PERMISSION_DENIED)


@group("p4runtime_errors")
class BatchReportsEveryUpdate(WriteErrorBase):
    """CONTINUE_ON_ERROR: the good updates of a batch are applied, and the error details
    hold one p4.Error per update, in order, OK ones included."""

    @autocleanup
    def runTest(self) -> None:
        self.insert(self.role_entry(2, 1))
        good1, dup, good2 = self.role_entry(1, 1), self.role_entry(2, 2), self.role_entry(3, 1)
        self.track_inserted(good1, good2)
        try:
            self.write(INSERT, good1, dup, good2)
        except P4RuntimeWriteError as exc:
            codes = [e.canonical_code for e in exc.errors]
            self.assertEqual(codes, [rpc_code.OK, rpc_code.ALREADY_EXISTS, rpc_code.OK], str(exc))
        else:
            self.fail("a batch with a duplicate INSERT succeeded")
        ports = sorted(e[c.MATCH_PORT_ROLES_PORT] for e in self.read_table(PORT_ROLES))
        self.assertEqual(ports, [1, 2, 3])


@group("p4runtime_errors")
class NonPrimaryWriteDenied(WriteErrorBase):
    """A second client with a lower election id is a backup: arbitration answers
    ALREADY_EXISTS and its Write fails with PERMISSION_DENIED; nothing is written."""

    @autocleanup
    def runTest(self) -> None:
        backup = self.connect(self.election_low - 5)
        self.addCleanup(backup.close)
        arb = backup.arbitrate()
        self.assertEqual(arb.status.code, rpc_code.ALREADY_EXISTS, "a backup's arbitration status")
        self.assertEqual(arb.election_id.low, self.election_low, "arbitration must name the primary's election id")
        with self.assertRaises(grpc.RpcError) as ctx:
            backup.write(backup.updates(INSERT, [self.role_entry(1, 1)]))
        self.assertEqual(ctx.exception.code(), grpc.StatusCode.PERMISSION_DENIED)
        self.assertEqual(self.read_table(PORT_ROLES), [])


@group("p4runtime_errors")
class WriteWithoutArbitrationDenied(WriteErrorBase):
    """A client that never opened a stream, using an election id nobody holds."""

    @autocleanup
    def runTest(self) -> None:
        channel = grpc.insecure_channel(self.params.grpcaddr)
        self.addCleanup(channel.close)
        stub = p4r_grpc.P4RuntimeStub(channel)
        req = p4r.WriteRequest(device_id=self.params.device_id, election_id=p4r.Uint128(high=0, low=self.election_low + 100))
        req.updates.add(type=INSERT, entity=self.encode(self.role_entry(1, 1)))
        with self.assertRaises(grpc.RpcError) as ctx:
            stub.Write(req, timeout=10)
        self.assertEqual(ctx.exception.code(), grpc.StatusCode.PERMISSION_DENIED)
        self.assertEqual(self.read_table(PORT_ROLES), [])
