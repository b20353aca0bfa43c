// Answers Neighbor Discovery in the switch, as ArpResponder answers ARP
// (docs/pipeline-contract.md, "IPv6 Neighbor Discovery on the LAN"):
// - a host's NS for a gateway address gets an NA with the host's own vmac (multicast,
//   unicast NUD to the vmac, DAD from ::), so it never reaches a gateway;
// - a host's Router Solicitation goes to the controller, which sends the RAs;
// - a gateway's NS for a host gets an NA with the host's MAC from host_ip6s, or goes to the
//   controller; a gateway's NA goes to the controller. Gateway ND never reaches a host.
// NdGuard already dropped spoofed ND and gateway RS/RA/Redirect.

#ifndef SUPERGW_ND_RESPONDER_P4
#define SUPERGW_ND_RESPONDER_P4

#include "../../../common/nd_reply.p4"

control NdResponder(inout headers_t hdr,
                    inout local_metadata_t meta,
                    inout standard_metadata_t standard_metadata) {
    // The NA leaves by the port the NS came in on.
    @id(0x01000018)
    action advertise_host_mac(mac_addr_t host_mac) {
        ns_to_na(hdr, host_mac, 0);
        meta.nd_reply = true;
        standard_metadata.egress_spec = standard_metadata.ingress_port;
        meta.decided = true;
    }

    @id(0x01000019)
    action punt_nd_miss() {
        meta.punt_reason = PUNT_REASON_GATEWAY_ND_MISS;
    }

    @id(0x0200000d)
    table host_ip6s {
        key = {
            meta.lookup.nd_target : exact @name("target_ip6");
        }
        actions = {
            advertise_host_mac;
            @defaultonly punt_nd_miss;
        }
        default_action = punt_nd_miss();
        size = HOST_IP6S_TABLE_SIZE;
    }

    apply {
        if (meta.lookup.nd_type != 0) {
            if (meta.port_role == PORT_ROLE_HOST) {
                if (meta.lookup.nd_type == ICMPV6_TYPE_RS) {
                    meta.punt_reason = PUNT_REASON_ROUTER_SOLICITATION;
                } else if (meta.lookup.nd_type == ICMPV6_TYPE_NS && meta.nd_target_is_gateway) {
                    if (meta.lookup.ns_answerable) {
                        ns_to_na(hdr, meta.host_vmac, ND_FLAG_ROUTER);
                        meta.nd_reply = true;
                        standard_metadata.egress_spec = standard_metadata.ingress_port;
                    } else {
                        meta.drop_reason = DROP_REASON_ND_UNSUPPORTED;
                    }
                    meta.decided = true;
                }
            } else if (meta.port_role == PORT_ROLE_GATEWAY) {
                if (meta.lookup.nd_type == ICMPV6_TYPE_NA) {
                    meta.punt_reason = PUNT_REASON_GATEWAY_NA;
                } else if (meta.lookup.nd_type == ICMPV6_TYPE_NS) {
                    if (meta.nd_target_is_gateway) {
                        // The gateways share the addresses: a gateway's DAD must not fire.
                        meta.drop_reason = DROP_REASON_GATEWAY_ND_GATEWAY_IP;
                        meta.decided = true;
                    } else if (!meta.lookup.ns_answerable) {
                        meta.drop_reason = DROP_REASON_ND_UNSUPPORTED;
                        meta.decided = true;
                    } else {
                        host_ip6s.apply();
                    }
                }
            }

            if (meta.punt_reason != PUNT_REASON_NONE) {
                standard_metadata.egress_spec = V1MODEL_CPU_PORT;
                meta.decided = true;
            }
        }
    }
}

#endif  // SUPERGW_ND_RESPONDER_P4
