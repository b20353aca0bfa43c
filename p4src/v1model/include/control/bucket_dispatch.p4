// Host -> gateway: a frame to a vmac goes to the gateway that owns the vmac's bucket,
// with its destination rewritten to that gateway's real MAC. Moving a bucket is one
// MODIFY of one entry; hosts keep their ARP cache. The direct counter measures the load
// of each bucket for the controller's rebalancer.
// Outside switch: a client's packet to IP_P that OutsideDispatch neither sent by SPI nor
// pinned goes to the bucket of its outer source address's hash, the same way.
// GatewayLiveness, right after, may send the frame to the gateway's backup instead.

#ifndef SUPERGW_BUCKET_DISPATCH_P4
#define SUPERGW_BUCKET_DISPATCH_P4

control BucketDispatch(inout headers_t hdr,
                       inout local_metadata_t meta,
                       inout standard_metadata_t standard_metadata) {
    @id(0x13000001)
    direct_counter(CounterType.packets_and_bytes) bucket_counter;

    @id(0x01000006)
    action set_gateway(port_num_t port, mac_addr_t gateway_mac) {
        bucket_counter.count();
        standard_metadata.egress_spec = (v1model_port_t)port;
        hdr.ethernet.dst_addr = gateway_mac;
        meta.to_bucket_gateway = true;
        meta.bucket_gateway_port = port;
    }

    @id(0x01000007)
    action drop_unassigned() {
        bucket_counter.count();
        meta.drop_reason = DROP_REASON_BUCKET_UNASSIGNED;
    }

    @id(0x02000004)
    table buckets {
        key = {
            meta.dst_bucket : exact @name("bucket");
        }
        actions = {
            set_gateway;
            @defaultonly drop_unassigned;
        }
        default_action = drop_unassigned();
        counters = bucket_counter;
        size = MAX_BUCKETS;
    }

    apply {
        if ((meta.port_role == PORT_ROLE_HOST && meta.dst_is_vmac) || meta.by_client_hash) {
            buckets.apply();
            // A bucket pointing back at the sender's own port is a hairpin, as in L2.
            if (meta.drop_reason == DROP_REASON_NONE
                    && standard_metadata.egress_spec == standard_metadata.ingress_port) {
                meta.drop_reason = DROP_REASON_HAIRPIN;
            }
            meta.decided = true;
        }
    }
}

#endif  // SUPERGW_BUCKET_DISPATCH_P4
