// Drops ARP that is malformed, that claims the gateway IP from a host port (it would
// poison the other hosts' ARP cache entry for the gateway), or that claims the public
// address IP_P from a gateway's outside port (every gateway holds IP_P; only the switch
// may answer for it, or the router would send every client to that one gateway).
// Runs before learning.

#ifndef SUPERGW_ARP_GUARD_P4
#define SUPERGW_ARP_GUARD_P4

control ArpGuard(inout local_metadata_t meta) {
    apply {
        if (meta.lookup.is_arp) {
            if (!meta.lookup.arp_valid) {
                meta.drop_reason = DROP_REASON_MALFORMED_ARP;
                meta.decided = true;
            } else if (meta.port_role == PORT_ROLE_HOST && meta.lookup.arp_spa == meta.gateway_ip) {
                meta.drop_reason = DROP_REASON_ARP_SPOOF_GATEWAY_IP;
                meta.decided = true;
            } else if (meta.port_role == PORT_ROLE_GATEWAY_OUTSIDE && meta.lookup.arp_spa == meta.public_ip) {
                meta.drop_reason = DROP_REASON_ARP_SPOOF_PUBLIC_IP;
                meta.decided = true;
            }
        }
    }
}

#endif  // SUPERGW_ARP_GUARD_P4
