// The gateway's shared IPv6 addresses (docs/pipeline-contract.md, "IPv6 Neighbor
// Discovery on the LAN"): its link-local address, the source of the controller's Router
// Advertisements, and a global one. Unset (0, and the initial default) drops nothing:
// an IPv4-only LAN never writes this table. Only IPv6 frames look it up.

#ifndef SUPERGW_ND_CONFIG_P4
#define SUPERGW_ND_CONFIG_P4

control NdConfig(inout local_metadata_t meta) {
    @id(0x01000016)
    action set_nd_config(ipv6_addr_t link_local_ip6, ipv6_addr_t global_ip6) {
        meta.gateway_ip6_link_local = link_local_ip6;
        meta.gateway_ip6_global = global_ip6;
    }

    @id(0x01000017)
    action mark_nd_unconfigured() {
        meta.gateway_ip6_link_local = 0;
        meta.gateway_ip6_global = 0;
    }

    // Keyless, like settings: the controller MODIFYs the default action.
    @id(0x0200000c)
    table nd_settings {
        actions = {
            @defaultonly set_nd_config;
            @defaultonly mark_nd_unconfigured;
        }
        default_action = mark_nd_unconfigured();
        size = ND_SETTINGS_TABLE_SIZE;
    }

    apply {
        if (meta.lookup.ipv6_valid) {
            nd_settings.apply();
            // :: is never a gateway address, so an unset one matches nothing.
            meta.ip6_src_is_gateway = meta.lookup.ipv6_src != 0
                && (meta.lookup.ipv6_src == meta.gateway_ip6_link_local
                    || meta.lookup.ipv6_src == meta.gateway_ip6_global);
            meta.nd_target_is_gateway = meta.lookup.nd_has_target && meta.lookup.nd_target != 0
                && (meta.lookup.nd_target == meta.gateway_ip6_link_local
                    || meta.lookup.nd_target == meta.gateway_ip6_global);
        }
    }
}

#endif  // SUPERGW_ND_CONFIG_P4
