// Source learning on host ports: an unknown (source MAC, ingress port) pair is reported
// with a learn_digest_t; the controller installs learned_sources (with an idle timeout),
// mac_table and host_ips. The frame itself is forwarded as usual.

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

    apply {
        if (meta.port_role == PORT_ROLE_HOST) {
            // Never teach the controller that a host owns the gateway address.
            meta.learn_src_ip = meta.lookup.src_ip;
            if (meta.lookup.src_ip == meta.gateway_ip) {
                meta.learn_src_ip = 0;
            }
            learned_sources.apply();
        }
    }
}

#endif  // SUPERGW_LEARNING_P4
