"""The forwarding pipeline config: the P4Info the switch serves is the committed one, a
foreign pipeline is refused and leaves the running one intact, and written entries read
back as written (canonical bytes)."""

from __future__ import annotations

import grpc
from finsy.proto import p4i, p4r
from ptf.testutils import group
from supergw_ptf import packets as pk
from supergw_ptf.base_test import autocleanup
from supergw_ptf.supergw import BUCKETS, PORT_ROLES, SupergwTest


@group("pipeline")
class ServedP4InfoEqualsCommitted(SupergwTest):
    """GetForwardingPipelineConfig serves exactly the committed P4Info, unchanged by the
    round trip. With ForeignPipeline* (nothing but this P4Info is accepted) this shows the
    switch runs the committed pipeline; the embedded copy in the eBPF target is checked
    against the committed file by its Go test TestEmbeddedP4InfoIsCurrent."""

    @autocleanup
    def runTest(self) -> None:
        served = self.client.get_pipeline(p4r.GetForwardingPipelineConfigRequest.P4INFO_AND_COOKIE)
        self.assertTrue(served.HasField("p4info"), "GetForwardingPipelineConfig returned no P4Info")
        if served.p4info != self.schema.p4info:
            want = {o.preamble.name: o.preamble.id for k in ("tables", "actions", "counters", "direct_counters", "digests") for o in getattr(self.schema.p4info, k)}
            got = {o.preamble.name: o.preamble.id for k in ("tables", "actions", "counters", "direct_counters", "digests") for o in getattr(served.p4info, k)}
            self.fail(f"served P4Info differs from p4src/v1model/supergw.p4info.txtpb; objects differing: {set(want.items()) ^ set(got.items())}")


@group("pipeline")
class ServedCookieEqualsPushed(SupergwTest):
    """The cookie set with the pipeline comes back (the controller uses it to skip a
    needless re-push)."""

    @autocleanup
    def runTest(self) -> None:
        self.client.set_pipeline(self.pipeline_config())
        served = self.client.get_pipeline(p4r.GetForwardingPipelineConfigRequest.COOKIE_ONLY)
        self.assertTrue(served.HasField("cookie"), "GetForwardingPipelineConfig(COOKIE_ONLY) returned no cookie")
        self.assertEqual(served.cookie.cookie, self.pipeline_config().cookie.cookie)


class ForeignPipelineBase(SupergwTest):
    def assert_rejected_and_intact(self, foreign: p4i.P4Info) -> None:
        if self.target == "bmv2":
            self.skipTest(
                "simple_switch_grpc runs whatever program it is pushed: PI accepts any valid P4Info with "
                "the BMv2 JSON and resolves its objects in the JSON by name, so it has no notion of a "
                "foreign or renumbered supergw P4Info to refuse (the eBPF target implements only supergw)"
            )
        with self.assertRaises(grpc.RpcError) as ctx:
            self.client.set_pipeline(self.pipeline_config(foreign))
        self.assertEqual(ctx.exception.code(), grpc.StatusCode.INVALID_ARGUMENT, ctx.exception.details())
        served = self.client.get_pipeline(p4r.GetForwardingPipelineConfigRequest.P4INFO_AND_COOKIE)
        self.assertEqual(served.p4info, self.schema.p4info, "a refused pipeline must leave the running one in place")
        # ...and the running pipeline still works.
        self.setup_switch()
        host, port = "00:00:03:00:00:18", self.ports.hosts[0]
        self.send(port, pk.arp(eth_src=host, spa="10.0.0.10", tpa=self.dispatch.gateway_ip))
        self.expect(self.gateway_ip_reply(host, "10.0.0.10"), port)
        self.expect_nothing()


@group("pipeline")
class ForeignP4InfoRejected(ForeignPipelineBase):
    """A P4Info of another program (one table, one action)."""

    @autocleanup
    def runTest(self) -> None:
        foreign = p4i.P4Info()
        foreign.pkg_info.arch = "v1model"
        action = foreign.actions.add()
        action.preamble.id = 0x01000F01
        action.preamble.name = "OtherIngress.forward"
        action.params.add(id=1, name="port", bitwidth=9)
        table = foreign.tables.add()
        table.preamble.id = 0x02000F01
        table.preamble.name = "OtherIngress.ipv4_lpm"
        table.match_fields.add(id=1, name="hdr.ipv4.dst", bitwidth=32, match_type=p4i.MatchField.LPM)
        table.action_refs.add(id=action.preamble.id)
        table.size = 1024
        self.assert_rejected_and_intact(foreign)


@group("pipeline")
class RenumberedP4InfoRejected(ForeignPipelineBase):
    """Our P4Info with the buckets table under another ID: not the program the target runs."""

    @autocleanup
    def runTest(self) -> None:
        foreign = p4i.P4Info()
        foreign.CopyFrom(self.schema.p4info)
        buckets_id = self.schema.tables[BUCKETS].id
        for table in foreign.tables:
            if table.preamble.id == buckets_id:
                table.preamble.id = 0x02000F02
        for dc in foreign.direct_counters:
            if dc.direct_table_id == buckets_id:
                dc.direct_table_id = 0x02000F02
        self.assert_rejected_and_intact(foreign)


@group("pipeline")
class EntriesReadBackAsWritten(SupergwTest):
    @autocleanup
    def runTest(self) -> None:
        self.set_port_roles()
        self.add_bucket(0x2A, self.ports.gateways[0])
        written = {pk_key(e): e for e in (self.encode(r).table_entry for r in self.port_role_entries())}
        read = {pk_key(e): e for e in self.read_table_wire(PORT_ROLES)}
        self.assertEqual(set(read), set(written))
        for key, entry in written.items():
            self.assertEqual(read[key].action, entry.action, f"port_roles entry {key!r}")
        buckets = self.read_table_wire(BUCKETS)
        self.assertEqual(len(buckets), 1)
        self.assertEqual(buckets[0].match[0].exact.value, b"\x2a", "match values read back in canonical form")
        self.assertEqual(buckets[0].action, self.encode(self.bucket_entry(0x2A, self.ports.gateways[0])).table_entry.action)


def pk_key(entry: p4r.TableEntry) -> bytes:
    return bytes(entry.match[0].exact.value)
