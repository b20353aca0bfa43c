// Answers ARP in the switch: hosts asking for the gateway IP get their own vmac;
// gateways asking for a host get the host's MAC from host_ips, or go to the controller.
// Gateway ARP never reaches hosts: it would poison their entry for the gateway IP.
// On the outside switch a request from an uplink for the public address IP_P is answered
// with the public MAC; all other outside ARP is forwarded as L2 (L2Forwarding).
// ArpGuard already dropped malformed ARP, so oper is a request or a reply here.

#ifndef SUPERGW_ARP_RESPONDER_P4
#define SUPERGW_ARP_RESPONDER_P4

#include "../../../common/arp_reply.p4"

control ArpResponder(inout headers_t hdr,
                     inout local_metadata_t meta,
                     inout standard_metadata_t standard_metadata) {
    // The reply leaves by the port the request came in on.
    @id(0x01000004)
    action reply_with_host_mac(mac_addr_t host_mac) {
        arp_request_to_reply(hdr, host_mac, meta.lookup.arp_tpa);
        standard_metadata.egress_spec = standard_metadata.ingress_port;
        meta.decided = true;
    }

    @id(0x01000005)
    action punt_arp_miss() {
        meta.punt_reason = PUNT_REASON_GATEWAY_ARP_MISS;
    }

    @id(0x02000003)
    table host_ips {
        key = {
            meta.lookup.arp_tpa : exact @name("target_ip");
        }
        actions = {
            reply_with_host_mac;
            @defaultonly punt_arp_miss;
        }
        default_action = punt_arp_miss();
        size = HOST_IPS_TABLE_SIZE;
    }

    apply {
        if (meta.lookup.is_arp) {
            if (meta.port_role == PORT_ROLE_HOST) {
                if (meta.lookup.arp_oper == ARP_OPER_REQUEST && meta.lookup.arp_tpa == meta.gateway_ip) {
                    arp_request_to_reply(hdr, meta.host_vmac, meta.gateway_ip);
                    standard_metadata.egress_spec = standard_metadata.ingress_port;
                    meta.decided = true;
                }
            } else if (meta.port_role == PORT_ROLE_GATEWAY) {
                if (meta.lookup.arp_oper == ARP_OPER_REPLY) {
                    // Replies to the controller's probes of its gateways.
                    meta.punt_reason = PUNT_REASON_GATEWAY_ARP_REPLY;
                } else if (meta.lookup.arp_tpa == meta.gateway_ip) {
                    // Only the switch answers for the gateway IP, and only to hosts.
                    meta.punt_reason = PUNT_REASON_GATEWAY_ARP_MISS;
                } else {
                    host_ips.apply();
                }
            } else if (meta.port_role == PORT_ROLE_UPLINK) {
                if (meta.lookup.arp_oper == ARP_OPER_REQUEST && meta.lookup.arp_tpa == meta.public_ip) {
                    arp_request_to_reply(hdr, meta.public_mac, meta.public_ip);
                    standard_metadata.egress_spec = standard_metadata.ingress_port;
                    meta.decided = true;
                }
            }

            if (meta.punt_reason != PUNT_REASON_NONE) {
                standard_metadata.egress_spec = V1MODEL_CPU_PORT;
                meta.decided = true;
            }
        }
    }
}

#endif  // SUPERGW_ARP_RESPONDER_P4
