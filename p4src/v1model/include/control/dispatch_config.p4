// Run-time dispatch settings (gateway IP, vmac block, K) and the bucket hash.

#ifndef SUPERGW_DISPATCH_CONFIG_P4
#define SUPERGW_DISPATCH_CONFIG_P4

control DispatchConfig(inout local_metadata_t meta) {
    bit<16> host_crc;
    mac_addr_t host_mac;

    // bucket_mask = K - 1; vmac_base has its low 16 bits zero (the controller checks).
    @id(0x01000002)
    action set_dispatch_config(ipv4_addr_t gateway_ip, mac_addr_t vmac_base, bucket_t bucket_mask) {
        meta.configured = true;
        meta.gateway_ip = gateway_ip;
        meta.vmac_base = vmac_base;
        meta.bucket_mask = bucket_mask;
    }

    @id(0x01000003)
    action mark_unconfigured() {
        meta.configured = false;
    }

    // Keyless: the controller configures the switch by MODIFYing the default action.
    @id(0x02000002)
    table settings {
        actions = {
            @defaultonly set_dispatch_config;
            @defaultonly mark_unconfigured;
        }
        default_action = mark_unconfigured();
        size = SETTINGS_TABLE_SIZE;
    }

    apply {
        settings.apply();
        if (!meta.configured) {
            meta.drop_reason = DROP_REASON_NOT_CONFIGURED;
            meta.decided = true;
        } else {
            // The host of a frame is its source on a host port and its destination on a
            // gateway port; its vmac is what the host knows as the gateway's MAC.
            host_mac = meta.lookup.eth_src;
            if (meta.port_role == PORT_ROLE_GATEWAY) {
                host_mac = meta.lookup.eth_dst;
            }
            // v1model: result = base + (crc32 mod max), so host_crc is the low 16 bits of
            // the standard CRC-32 (IEEE 802.3) on BMv2 (p4src/vectors/bucket-crc32.json).
            hash(host_crc, HashAlgorithm.crc32, 16w0, { host_mac }, 32w65536);
            meta.host_vmac = meta.vmac_base | (mac_addr_t)(host_crc & meta.bucket_mask);

            meta.dst_bucket = meta.lookup.eth_dst[15:0] & meta.bucket_mask;
            meta.dst_is_vmac = meta.lookup.eth_dst[47:16] == meta.vmac_base[47:16]
                               && meta.lookup.eth_dst[15:0] <= meta.bucket_mask;
        }
    }
}

#endif  // SUPERGW_DISPATCH_CONFIG_P4
