// LAN switch, host -> gateway: a frame to a vmac whose IPv4 destination lies in a remote
// client's address pool goes to the gateway that hands out that pool (and so holds the
// client's SA), whatever the host's bucket. Longest prefix wins; a miss (and every
// non-IPv4 frame) continues to bucket dispatch, so with the table empty site-to-site
// dispatch is exactly as before.
// TNA: DirectCounter<bit<32>> (PACKETS_AND_BYTES); both actions count, as on v1model.

#ifndef SUPERGW_POOL_DISPATCH_P4
#define SUPERGW_POOL_DISPATCH_P4

control PoolDispatch(inout headers_t hdr,
                     inout local_metadata_t meta,
                     in ingress_intrinsic_metadata_t ig_intr_md,
                     inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    DirectCounter<bit<32>>(CounterType_t.PACKETS_AND_BYTES) pool_counter;

    // The shape of buckets' set_gateway: the gateway's port and real MAC.
    action set_pool_gateway(port_num_t port, mac_addr_t gateway_mac) {
        pool_counter.count();
        ig_tm_md.ucast_egress_port = (PortId_t)port;
        hdr.ethernet.dst_addr = gateway_mac;
    }

    action dispatch_by_vmac() {
        pool_counter.count();
    }

    table client_pools {
        key = {
            meta.lookup.ipv4_dst : lpm @name("dst_ip");
        }
        actions = {
            set_pool_gateway;
            @defaultonly dispatch_by_vmac;
        }
        default_action = dispatch_by_vmac();
        counters = pool_counter;
        size = CLIENT_POOLS_TABLE_SIZE;
    }

    apply {
        if (meta.port_role == PORT_ROLE_HOST && meta.dst_is_vmac && meta.lookup.ipv4_valid) {
            if (client_pools.apply().hit) {
                // A pool pointing back at the sender's own port is a hairpin, as in L2.
                if (ig_tm_md.ucast_egress_port == ig_intr_md.ingress_port) {
                    meta.drop_reason = DROP_REASON_HAIRPIN;
                }
                meta.decided = true;
            }
        }
    }
}

#endif  // SUPERGW_POOL_DISPATCH_P4
