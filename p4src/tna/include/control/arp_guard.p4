// Drops ARP that is malformed, or that claims the gateway IP from a host port (it would
// poison the other hosts' ARP cache entry for the gateway). Runs before learning.
// Same as v1model.

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
            }
        }
    }
}

#endif  // SUPERGW_ARP_GUARD_P4
