// supergw: one IPsec super gateway made of N Linux gateways behind this switch.
// v1model top level: the controls run in the order of docs/pipeline-contract.md; each
// sets meta.decided once the packet's fate is known, and the drop reason is applied
// and counted once, at the end of ingress.

#include <core.p4>
#include <v1model.p4>

#include "../common/headers.p4"
#include "include/define_v1model.p4"
#include "include/parser.p4"
#include "include/control/lookup_md_init.p4"
#include "include/control/port_classifier.p4"
#include "include/control/packet_io.p4"
#include "include/control/dispatch_config.p4"
#include "include/control/ra_config.p4"
#include "include/control/nd_config.p4"
#include "include/control/arp_guard.p4"
#include "../common/nd_guard.p4"
#include "include/control/learning.p4"
#include "include/control/arp_responder.p4"
#include "include/control/nd_responder.p4"
#include "include/control/outside_dispatch.p4"
#include "include/control/pool_dispatch.p4"
#include "include/control/bucket_dispatch.p4"
#include "include/control/gateway_liveness.p4"
#include "include/control/l2_forwarding.p4"
#include "include/control/flood_pruning.p4"

control SupergwIngress(inout headers_t hdr,
                       inout local_metadata_t meta,
                       inout standard_metadata_t standard_metadata) {
    // Indexed by drop_reason_t.
    @id(0x12000001)
    counter(DROP_COUNTER_SIZE, CounterType.packets_and_bytes) drop_counter;

    LookupMdInit() lookup_md_init;
    PortClassifier() port_classifier;
    PacketIoIngress() packet_io;
    DispatchConfig() dispatch_config;
    RaConfig() ra_config;
    NdConfig() nd_config;
    ArpGuard() arp_guard;
    NdGuard() nd_guard;
    Learning() learning;
    ArpResponder() arp_responder;
    NdResponder() nd_responder;
    OutsideDispatch() outside_dispatch;
    PoolDispatch() pool_dispatch;
    BucketDispatch() bucket_dispatch;
    GatewayLiveness() gateway_liveness;
    L2Forwarding() l2_forwarding;

    apply {
        lookup_md_init.apply(hdr, meta, standard_metadata);
        port_classifier.apply(meta);
        if (!meta.decided) {
            packet_io.apply(hdr, meta, standard_metadata);
        }
        if (!meta.decided) {
            dispatch_config.apply(meta);
        }
        if (!meta.decided) {
            ra_config.apply(meta);
        }
        if (!meta.decided) {
            nd_config.apply(meta);
        }
        if (!meta.decided) {
            arp_guard.apply(meta);
        }
        if (!meta.decided) {
            nd_guard.apply(meta);
        }
        if (!meta.decided) {
            learning.apply(meta);
        }
        if (!meta.decided) {
            arp_responder.apply(hdr, meta, standard_metadata);
        }
        if (!meta.decided) {
            nd_responder.apply(hdr, meta, standard_metadata);
        }
        if (!meta.decided) {
            outside_dispatch.apply(hdr, meta, standard_metadata);
        }
        if (!meta.decided) {
            pool_dispatch.apply(hdr, meta, standard_metadata);
        }
        if (!meta.decided) {
            bucket_dispatch.apply(hdr, meta, standard_metadata);
        }
        // Also after a decision: it may redirect what BucketDispatch sent to a gateway.
        gateway_liveness.apply(hdr, meta, standard_metadata);
        if (!meta.decided) {
            l2_forwarding.apply(hdr, meta, standard_metadata);
        }

        if (meta.drop_reason != DROP_REASON_NONE) {
            drop_counter.count((bit<32>)meta.drop_reason);
            mark_to_drop(standard_metadata);
        }
    }
}

control SupergwEgress(inout headers_t hdr,
                      inout local_metadata_t meta,
                      inout standard_metadata_t standard_metadata) {
    FloodPruning() flood_pruning;
    PacketIoEgress() packet_io;

    apply {
        flood_pruning.apply(meta, standard_metadata);
        packet_io.apply(hdr, meta, standard_metadata);
    }
}

V1Switch(SupergwParser(),
         SupergwVerifyChecksum(),
         SupergwIngress(),
         SupergwEgress(),
         SupergwComputeChecksum(),
         SupergwDeparser()) main;
