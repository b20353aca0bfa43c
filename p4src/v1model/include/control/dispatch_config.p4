// Run-time dispatch settings (gateway IP, vmac block, K, bucket hash) and the bucket hash.
//
// The hash is chosen at run time by set_dispatch_config's `bucket_hash`, so one program
// serves both and the controller switches with one MODIFY of the settings (no recompile):
// - BUCKET_HASH_CRC32: v1model's hash(HashAlgorithm.crc32, 0, {mac}, 65536).
// - BUCKET_HASH_IDENTITY: the slice mac[15:0]. This is the contract's definition
//   (bucket = mac & (K - 1), K <= 65536) written out; HashAlgorithm.identity with max
//   65536 gives the same on BMv2 (p4src/vectors/generate.py checks both), but its result
//   depends on how a target packs the field list (BMv2 keeps the first 8 bytes), and a
//   slice says which bits without that, here and in the TNA twin.

#ifndef SUPERGW_DISPATCH_CONFIG_P4
#define SUPERGW_DISPATCH_CONFIG_P4

control DispatchConfig(inout local_metadata_t meta) {
    bit<16> host_hash;
    mac_addr_t host_mac;

    // bucket_mask = K - 1; vmac_base has its low 16 bits zero; bucket_hash is a
    // BUCKET_HASH_* value (the controller checks all three).
    @id(0x01000002)
    action set_dispatch_config(ipv4_addr_t gateway_ip, mac_addr_t vmac_base, bucket_t bucket_mask,
                               bucket_hash_t bucket_hash) {
        meta.configured = true;
        meta.gateway_ip = gateway_ip;
        meta.vmac_base = vmac_base;
        meta.bucket_mask = bucket_mask;
        meta.bucket_hash = bucket_hash;
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
        // An undefined bucket_hash leaves the switch unconfigured: no frame is dispatched
        // by a hash the controller did not ask for.
        if (meta.bucket_hash != BUCKET_HASH_CRC32 && meta.bucket_hash != BUCKET_HASH_IDENTITY) {
            meta.configured = false;
        }
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
            if (meta.bucket_hash == BUCKET_HASH_IDENTITY) {
                host_hash = host_mac[15:0];
            } else {
                // v1model: result = base + (crc32 mod max), so host_hash is the low 16 bits
                // of the standard CRC-32 (IEEE 802.3) on BMv2 (p4src/vectors/bucket-crc32.json).
                hash(host_hash, HashAlgorithm.crc32, 16w0, { host_mac }, 32w65536);
            }
            meta.host_vmac = meta.vmac_base | (mac_addr_t)(host_hash & meta.bucket_mask);

            meta.dst_bucket = meta.lookup.eth_dst[15:0] & meta.bucket_mask;
            meta.dst_is_vmac = meta.lookup.eth_dst[47:16] == meta.vmac_base[47:16]
                               && meta.lookup.eth_dst[15:0] <= meta.bucket_mask;
        }
    }
}

#endif  // SUPERGW_DISPATCH_CONFIG_P4
