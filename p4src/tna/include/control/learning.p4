// Source learning on host and uplink ports: an unknown (source MAC, ingress port) pair is
// reported with a learn_digest_t; the controller installs learned_sources (with an idle
// timeout), mac_table and host_ips. On host ports an unknown (IPv6 source, source MAC)
// pair is reported with a learn_ip6_digest_t; the controller installs learned_ip6s (idle
// timeout) and host_ip6s. The frame itself is forwarded as usual.
// TNA: learn() only selects the digest; SupergwIngressDeparser packs it from metadata
// that nothing changes after this control. A packet carries one digest: when a frame misses
// both tables, learn_digest_t is sent and the IPv6 one comes with the host's next frame. Idle timeout: the table property idle_timeout
// (v1model: support_timeout); the P4Info says NOTIFY_CONTROL on both.

#ifndef SUPERGW_LEARNING_P4
#define SUPERGW_LEARNING_P4

control Learning(inout local_metadata_t meta,
                 inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    action mark_known() {
    }

    action learn() {
        ig_dprsr_md.digest_type = LEARN_DIGEST_TYPE;
    }

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
        idle_timeout = true;
    }

    action mark_ip6_known() {
    }

    action learn_ip6() {
        ig_dprsr_md.digest_type = LEARN_IP6_DIGEST_TYPE;
    }

    // Every IPv6 address a host uses, each with its MAC (a host has a link-local and one or
    // more global addresses, so learned_sources' one digest per MAC cannot carry them).
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
        idle_timeout = true;
    }

    apply {
        // :: (DAD) and multicast are no host's address; a gateway address is no host's.
        // First: learn() below then overrides learn_ip6()'s digest_type when both miss.
        if (meta.port_role == PORT_ROLE_HOST && meta.lookup.ipv6_valid && meta.lookup.ipv6_src != 0
                && meta.lookup.ipv6_src[127:120] != 0xff && !meta.ip6_src_is_gateway) {
            learned_ip6s.apply();
        }
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
    }
}

#endif  // SUPERGW_LEARNING_P4
