// supergw: one IPsec super gateway made of N Linux gateways behind this switch.
// TNA (Tofino 1, and Tofino 2 with -D__TARGET_TOFINO__=2) twin of p4src/v1model/supergw.p4:
// the same controls in the same order with the same control, table, action and counter
// names, so one controller drives both by name. The controls run in the order of
// docs/pipeline-contract.md; each sets meta.decided once the packet's fate is known, and
// the drop reason is applied and counted once, at the end of ingress.
// Where TNA differs (intrinsic metadata, packet_in built in ingress, digest in the
// deparser, PRE pruning, no egress work): docs/pipeline-contract.md, "TNA".

#include <core.p4>
#if __TARGET_TOFINO__ == 2
#include <t2na.p4>
#else
#include <tna.p4>
#endif

#include "../common/headers.p4"
#include "include/define_tna.p4"
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
                       in ingress_intrinsic_metadata_t ig_intr_md,
                       in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                       inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                       inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    // Indexed by drop_reason_t.
    Counter<bit<32>, drop_reason_t>(DROP_COUNTER_SIZE, CounterType_t.PACKETS_AND_BYTES) drop_counter;

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
    FloodPruning() flood_pruning;
    PacketIoPunt() packet_io_punt;

    apply {
        // Nothing happens in egress: pruning is the PRE's, packet_in is added here.
        ig_tm_md.bypass_egress = 1;

        lookup_md_init.apply(hdr, meta, ig_intr_md, ig_prsr_md);
        port_classifier.apply(meta);
        if (!meta.decided) {
            packet_io.apply(hdr, meta, ig_tm_md);
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
            learning.apply(meta, ig_dprsr_md);
        }
        if (!meta.decided) {
            arp_responder.apply(hdr, meta, ig_intr_md, ig_tm_md);
        }
        if (!meta.decided) {
            nd_responder.apply(hdr, meta, ig_intr_md, ig_tm_md);
        }
        if (!meta.decided) {
            outside_dispatch.apply(hdr, meta, ig_intr_md, ig_tm_md);
        }
        if (!meta.decided) {
            pool_dispatch.apply(hdr, meta, ig_intr_md, ig_tm_md);
        }
        if (!meta.decided) {
            bucket_dispatch.apply(hdr, meta, ig_intr_md, ig_tm_md);
        }
        // Also after a decision: it may redirect what BucketDispatch sent to a gateway.
        gateway_liveness.apply(hdr, meta, ig_intr_md, ig_dprsr_md, ig_tm_md);
        if (!meta.decided) {
            l2_forwarding.apply(hdr, meta, ig_tm_md);
        }
        flood_pruning.apply(meta, ig_intr_md, ig_tm_md);
        packet_io_punt.apply(hdr, meta);

        if (meta.drop_reason != DROP_REASON_NONE) {
            drop_counter.count(meta.drop_reason);
            ig_dprsr_md.drop_ctl = TNA_DROP;
        }
    }
}

// Bypassed (bypass_egress); the full parameter list is what T2NA requires.
control SupergwEgress(inout supergw_egress_headers_t hdr,
                      inout supergw_egress_metadata_t meta,
                      in egress_intrinsic_metadata_t eg_intr_md,
                      in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
                      inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
                      inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {
    apply { }
}

Pipeline(SupergwIngressParser(),
         SupergwIngress(),
         SupergwIngressDeparser(),
         SupergwEgressParser(),
         SupergwEgress(),
         SupergwEgressDeparser()) pipe;

Switch(pipe) main;
