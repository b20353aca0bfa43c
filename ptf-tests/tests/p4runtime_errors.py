"""P4Runtime writes that do not fit the P4Info are rejected per update with the
canonical code the reference server (p4lang/PI, behind BMv2) returns: RPC status UNKNOWN
with one p4.v1.Error per update. A write from a non-primary client is refused as a whole."""

from __future__ import annotations

import grpc
from finsy.proto import p4r, p4r_grpc, rpc_code
from ptf.testutils import group
from supergw_ptf.base_test import autocleanup
from supergw_ptf.p4runtime import P4RuntimeWriteError, entity
from supergw_ptf.supergw import DROP_UNASSIGNED, FLOOD, LEARN, PORT_ROLES, PUNT_ARP_MISS, SupergwTest

UNKNOWN_TABLE_ID = 0x02FFFFF0
UNKNOWN_ACTION_ID = 0x01FFFFF0


class WriteErrorBase(SupergwTest):
    def role_entry(self, port: int = 1, role: int = 1) -> p4r.TableEntry:
        return self.port_role_entry(port, role)


@group("p4runtime_errors")
class UnknownTableIdRejected(WriteErrorBase):
    @autocleanup
    def runTest(self) -> None:
        te = self.role_entry()
        te.table_id = UNKNOWN_TABLE_ID
        with self.assertP4RuntimeError(rpc_code.INVALID_ARGUMENT):
            self.insert(te)


@group("p4runtime_errors")
class UnknownActionIdRejected(WriteErrorBase):
    @autocleanup
    def runTest(self) -> None:
        te = self.role_entry()
        te.action.action.action_id = UNKNOWN_ACTION_ID
        with self.assertP4RuntimeError(rpc_code.INVALID_ARGUMENT):
            self.insert(te)


@group("p4runtime_errors")
class ActionOfAnotherTableRejected(WriteErrorBase):
    @autocleanup
    def runTest(self) -> None:
        te = self.port_role_entry(1, 1)
        te.action.action.CopyFrom(self.mac_entry("00:00:03:00:00:01", 2).action.action)
        with self.assertP4RuntimeError(rpc_code.INVALID_ARGUMENT):
            self.insert(te)


@group("p4runtime_errors")
class ParamTooWideRejected(WriteErrorBase):
    """role is bit<8>: 0x1ff does not fit."""

    @autocleanup
    def runTest(self) -> None:
        te = self.port_role_entry(1, b"\x01\xff")
        with self.assertP4RuntimeError(rpc_code.INVALID_ARGUMENT):
            self.insert(te)


@group("p4runtime_errors")
class MacParamTooWideRejected(WriteErrorBase):
    """gateway_mac is bit<48>: seven bytes with a non-zero top byte do not fit."""

    @autocleanup
    def runTest(self) -> None:
        te = self.bucket_entry(1, 5, b"\x01" + bytes(6))
        with self.assertP4RuntimeError(rpc_code.INVALID_ARGUMENT):
            self.insert(te)


@group("p4runtime_errors")
class MatchValueTooWideRejected(WriteErrorBase):
    """port is bit<16>: 0x1_0001 does not fit."""

    @autocleanup
    def runTest(self) -> None:
        te = self.port_role_entry(b"\x01\x00\x01", 1)
        with self.assertP4RuntimeError(rpc_code.INVALID_ARGUMENT):
            self.insert(te)


@group("p4runtime_errors")
class MissingMatchFieldRejected(WriteErrorBase):
    """learned_sources has two exact fields; an entry with only src_mac is invalid."""

    @autocleanup
    def runTest(self) -> None:
        te = self.learned_entry("00:00:03:00:00:01", None)
        with self.assertP4RuntimeError(rpc_code.INVALID_ARGUMENT):
            self.insert(te)


@group("p4runtime_errors")
class MissingParamRejected(WriteErrorBase):
    @autocleanup
    def runTest(self) -> None:
        te = self.bucket_entry(1, 5)
        del te.action.action.params[-1]
        self.assertEqual(len(te.action.action.params), 1)
        with self.assertP4RuntimeError(rpc_code.INVALID_ARGUMENT):
            self.insert(te)


@group("p4runtime_errors")
class DuplicateInsertAlreadyExists(WriteErrorBase):
    @autocleanup
    def runTest(self) -> None:
        self.insert(self.role_entry(1, 1))
        with self.assertP4RuntimeError(rpc_code.ALREADY_EXISTS):
            self.write(p4r.Update.INSERT, self.role_entry(1, 2))
        roles = [e for e in self.read_table(PORT_ROLES) if e.match[0].exact.value == b"\x01"]
        self.assertEqual(len(roles), 1)
        self.assertEqual(roles[0].action.action.params[0].value, b"\x01", "the failed INSERT must not change the entry")


@group("p4runtime_errors")
class DeleteAbsentNotFound(WriteErrorBase):
    @autocleanup
    def runTest(self) -> None:
        with self.assertP4RuntimeError(rpc_code.NOT_FOUND):
            self.write(p4r.Update.DELETE, self.mac_entry("00:00:03:00:00:99"))


@group("p4runtime_errors")
class ModifyAbsentNotFound(WriteErrorBase):
    @autocleanup
    def runTest(self) -> None:
        with self.assertP4RuntimeError(rpc_code.NOT_FOUND):
            self.write(p4r.Update.MODIFY, self.mac_entry("00:00:03:00:00:99", 1))


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
            entry.action.action.CopyFrom(self.action(default_only, {}))
            with self.assertP4RuntimeError(rpc_code.PERMISSION_DENIED):
                self.insert(entry)


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
            self.write(p4r.Update.INSERT, good1, dup, good2)
        except P4RuntimeWriteError as exc:
            codes = [e.canonical_code for e in exc.errors]
            self.assertEqual(codes, [rpc_code.OK, rpc_code.ALREADY_EXISTS, rpc_code.OK], str(exc))
        else:
            self.fail("a batch with a duplicate INSERT succeeded")
        ports = sorted(entry_port(e) for e in self.read_table(PORT_ROLES))
        self.assertEqual(ports, [1, 2, 3])


def entry_port(entry: p4r.TableEntry) -> int:
    return int.from_bytes(entry.match[0].exact.value, "big")


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
            backup.write([p4r.Update(type=p4r.Update.INSERT, entity=entity(self.role_entry(1, 1)))])
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
        req.updates.add(type=p4r.Update.INSERT, entity=entity(self.role_entry(1, 1)))
        with self.assertRaises(grpc.RpcError) as ctx:
            stub.Write(req, timeout=10)
        self.assertEqual(ctx.exception.code(), grpc.StatusCode.PERMISSION_DENIED)
        self.assertEqual(self.read_table(PORT_ROLES), [])
