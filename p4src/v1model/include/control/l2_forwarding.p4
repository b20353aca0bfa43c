// L2 forwarding for host <-> host and gateway -> host traffic on the LAN switch, and for
// uplink <-> gateway traffic on the outside switch that is not dispatched (the gateways'
// own ARP and WAN addresses, and their packets to clients). Each side floods to the other
// side's PRE group only: a host to HOST_FLOOD_GROUP (host ports), a gateway's LAN port to
// it too, an uplink to GATEWAY_OUTSIDE_FLOOD_GROUP, a gateway's outside port to
// UPLINK_FLOOD_GROUP; FloodPruning removes the copy for the ingress port in egress.

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
        bool from_gateway_outside = meta.port_role == PORT_ROLE_GATEWAY_OUTSIDE;
        bool from_uplink = meta.port_role == PORT_ROLE_UPLINK;
        // Gateway LAN ARP was handled by ArpResponder; a gateway's outside ARP goes to the
        // uplinks; nothing else may be broadcast by a gateway.
        if ((from_gateway || (from_gateway_outside && !meta.lookup.is_arp)) && meta.lookup.eth_dst_is_group) {
            meta.drop_reason = DROP_REASON_GATEWAY_BROADCAST;
        } else {
            if (from_gateway) {
                // A host only ever sees its own vmac as the gateway's MAC.
                hdr.ethernet.src_addr = meta.host_vmac;
            } else if (from_gateway_outside && meta.lookup.ipv4_valid && meta.lookup.ipv4_src == meta.public_ip) {
                // The router only ever sees the public MAC for IP_P.
                hdr.ethernet.src_addr = meta.public_mac;
            }
            if (meta.lookup.eth_dst_is_group) {
                meta.flood = true;
            } else {
                mac_table.apply();
            }

            if (meta.flood) {
                meta.flood_group = HOST_FLOOD_GROUP;
                if (from_uplink) {
                    meta.flood_group = GATEWAY_OUTSIDE_FLOOD_GROUP;
                } else if (from_gateway_outside) {
                    meta.flood_group = UPLINK_FLOOD_GROUP;
                }
                standard_metadata.mcast_grp = meta.flood_group;
            } else if (from_gateway
                       && (meta.l2_port_role != PORT_ROLE_HOST || meta.l2_port == meta.ingress_port)) {
                // A gateway reaches hosts only; a miss was flooded to hosts above.
                meta.drop_reason = DROP_REASON_GATEWAY_TO_GATEWAY;
            } else if (from_gateway_outside
                       && (meta.l2_port_role != PORT_ROLE_UPLINK || meta.l2_port == meta.ingress_port)) {
                // A gateway's outside port reaches uplinks only.
                meta.drop_reason = DROP_REASON_GATEWAY_TO_GATEWAY;
            } else if (meta.l2_port == meta.ingress_port) {
                meta.drop_reason = DROP_REASON_HAIRPIN;
            } else if (from_uplink && meta.l2_port_role != PORT_ROLE_GATEWAY_OUTSIDE) {
                // An uplink reaches the gateways' outside ports only: the switch is no
                // transit between uplinks.
                meta.drop_reason = DROP_REASON_UPLINK_TO_UPLINK;
            } else {
                standard_metadata.egress_spec = (v1model_port_t)meta.l2_port;
            }
        }
        meta.decided = true;
    }
}

#endif  // SUPERGW_L2_FORWARDING_P4
