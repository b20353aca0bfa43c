// LAN switch, host -> gateway: a frame to a vmac whose IPv4 destination lies in a remote
// client's address pool goes to the gateway that hands out that pool (and so holds the
// client's SA), whatever the host's bucket. Longest prefix wins; a miss (and every
// non-IPv4 frame) continues to bucket dispatch, so with the table empty site-to-site
// dispatch is exactly as before.

#ifndef SUPERGW_POOL_DISPATCH_P4
#define SUPERGW_POOL_DISPATCH_P4

control PoolDispatch(inout headers_t hdr,
                     inout local_metadata_t meta,
                     inout standard_metadata_t standard_metadata) {
    @id(0x13000002)
    direct_counter(CounterType.packets_and_bytes) pool_counter;

    // The shape of buckets' set_gateway: the gateway's port and real MAC.
    @id(0x0100000e)
    action set_pool_gateway(port_num_t port, mac_addr_t gateway_mac) {
        pool_counter.count();
        standard_metadata.egress_spec = (v1model_port_t)port;
        hdr.ethernet.dst_addr = gateway_mac;
    }

    @id(0x0100000f)
    action dispatch_by_vmac() {
        pool_counter.count();
    }

    @id(0x02000008)
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
                if (standard_metadata.egress_spec == standard_metadata.ingress_port) {
                    meta.drop_reason = DROP_REASON_HAIRPIN;
                }
                meta.decided = true;
            }
        }
    }
}

#endif  // SUPERGW_POOL_DISPATCH_P4
