// Source learning on host and uplink ports: an unknown (source MAC, ingress port) pair is
// reported with a learn_digest_t; the controller installs learned_sources (with an idle
// timeout), mac_table and host_ips. On host ports an unknown (IPv6 source, source MAC)
// pair is reported with a learn_ip6_digest_t; the controller installs learned_ip6s (idle
// timeout) and host_ip6s. The frame itself is forwarded as usual.

#ifndef SUPERGW_LEARNING_P4
#define SUPERGW_LEARNING_P4

control Learning(inout local_metadata_t meta) {
    @id(0x0100000a)
    action mark_known() {
    }

    @id(0x0100000b)
    action learn() {
        // Only fields that nothing changes later in ingress: BMv2 may sample digest data
        // at the end of ingress rather than at the call.
        digest<learn_digest_t>(LEARN_DIGEST_RECEIVER,
                               { meta.lookup.eth_src, meta.ingress_port, meta.learn_src_ip });
    }

    @id(0x02000006)
    table learned_sources {
        key = {
            meta.lookup.eth_src : exact @name("src_mac");
            meta.ingress_port   : exact @name("port");
        }
        actions = {
            mark_known;
            @defaultonly learn;
        }
        default_action = learn();
        size = LEARNED_SOURCES_TABLE_SIZE;
        support_timeout = true;
    }

    @id(0x0100001a)
    action mark_ip6_known() {
    }

    @id(0x0100001b)
    action learn_ip6() {
        digest<learn_ip6_digest_t>(LEARN_DIGEST_RECEIVER,
                                   { meta.lookup.eth_src, meta.ingress_port, meta.lookup.ipv6_src });
    }

    // Every IPv6 address a host uses, each with its MAC (a host has a link-local and one or
    // more global addresses, so learned_sources' one digest per MAC cannot carry them).
    @id(0x0200000e)
    table learned_ip6s {
        key = {
            meta.lookup.ipv6_src : exact @name("src_ip6");
            meta.lookup.eth_src  : exact @name("src_mac");
        }
        actions = {
            mark_ip6_known;
            @defaultonly learn_ip6;
        }
        default_action = learn_ip6();
        size = LEARNED_IP6S_TABLE_SIZE;
        support_timeout = true;
    }

    apply {
        if (meta.port_role == PORT_ROLE_HOST || meta.port_role == PORT_ROLE_UPLINK) {
            meta.learn_src_ip = meta.lookup.src_ip;
            // Never teach the controller that a neighbour owns the gateway or public address.
            if (meta.lookup.src_ip == meta.gateway_ip || meta.lookup.src_ip == meta.public_ip) {
                meta.learn_src_ip = 0;
            }
            // Behind an uplink is a router: an IPv4 source is a remote address, not its own.
            if (meta.port_role == PORT_ROLE_UPLINK && !meta.lookup.is_arp) {
                meta.learn_src_ip = 0;
            }
            learned_sources.apply();
        }
        // :: (DAD) and multicast are no host's address; a gateway address is no host's.
        if (meta.port_role == PORT_ROLE_HOST && meta.lookup.ipv6_valid && meta.lookup.ipv6_src != 0
                && meta.lookup.ipv6_src[127:120] != 0xff && !meta.ip6_src_is_gateway) {
            learned_ip6s.apply();
        }
    }
}

#endif  // SUPERGW_LEARNING_P4
