// L2 forwarding for host <-> host and gateway -> host traffic. Floods use the PRE group
// HOST_FLOOD_GROUP, which holds host ports only, so a flood never reaches a gateway;
// FloodPruning removes the copy for the ingress port in egress.

#ifndef SUPERGW_L2_FORWARDING_P4
#define SUPERGW_L2_FORWARDING_P4

control L2Forwarding(inout headers_t hdr,
                     inout local_metadata_t meta,
                     inout standard_metadata_t standard_metadata) {
    // `role` is port_roles' role of `port`, written with the entry by the controller:
    // a table is applied once per packet, so port_roles cannot be looked up again here.
    @id(0x01000008)
    action set_output_port(port_num_t port, port_role_t role) {
        meta.l2_hit = true;
        meta.l2_port = port;
        meta.l2_port_role = role;
    }

    @id(0x01000009)
    action flood() {
        meta.flood = true;
    }

    @id(0x02000005)
    table mac_table {
        key = {
            meta.lookup.eth_dst : exact @name("dst_mac");
        }
        actions = {
            set_output_port;
            @defaultonly flood;
        }
        default_action = flood();
        size = MAC_TABLE_SIZE;
    }

    apply {
        bool from_gateway = meta.port_role == PORT_ROLE_GATEWAY;
        if (from_gateway && meta.lookup.eth_dst_is_group) {
            // Gateway ARP was handled by ArpResponder; nothing else may be broadcast.
            meta.drop_reason = DROP_REASON_GATEWAY_BROADCAST;
        } else {
            if (from_gateway) {
                // A host only ever sees its own vmac as the gateway's MAC.
                hdr.ethernet.src_addr = meta.host_vmac;
            }
            if (meta.lookup.eth_dst_is_group) {
                meta.flood = true;
            } else {
                mac_table.apply();
            }

            if (meta.flood) {
                standard_metadata.mcast_grp = HOST_FLOOD_GROUP;
            } else if (from_gateway
                       && (meta.l2_port_role != PORT_ROLE_HOST || meta.l2_port == meta.ingress_port)) {
                // A gateway reaches hosts only; a miss was flooded to hosts above.
                meta.drop_reason = DROP_REASON_GATEWAY_TO_GATEWAY;
            } else if (meta.l2_port == meta.ingress_port) {
                meta.drop_reason = DROP_REASON_HAIRPIN;
            } else {
                standard_metadata.egress_spec = (v1model_port_t)meta.l2_port;
            }
        }
        meta.decided = true;
    }
}

#endif  // SUPERGW_L2_FORWARDING_P4
