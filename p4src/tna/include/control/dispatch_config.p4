// Run-time dispatch settings (gateway IP, vmac block, K, bucket hash) and the bucket hash.
//
// set_dispatch_config's `bucket_hash` picks the hash at run time, as on v1model:
// BUCKET_HASH_IDENTITY is the slice host_mac[15:0] (the contract's mac & (K - 1): a PHV
// move, no hash unit, and no question of which bits an identity Hash<> of a 48-bit list
// into 16 bits keeps); BUCKET_HASH_CRC32 is the CRC:
// Hash<bit<32>>(HashAlgorithm_t.CRC32) is bf-p4c's "crc_32", which bf-utils'
// dynamic_hash defines as polynomial 0x04C11DB7, reflected (input and output), init
// 0xFFFFFFFF, final xor 0xFFFFFFFF: the standard CRC-32 (IEEE 802.3), the function BMv2
// computes for v1model's HashAlgorithm.crc32 (p4src/vectors/bucket-crc32.json). The field
// list { host_mac } is fed in wire order (first octet first), as BMv2 does; the bucket is
// the low bits of the 32-bit result. p4src/tna/tests/ checks these parameters against the
// vectors and the controller's bucket function.
//
// TNA differences, same results for every defined configuration (vmac_base with its low
// 16 bits zero, bucket_mask = K - 1; docs/pipeline-contract.md):
// - host_vmac is vmac_base[47:16] ++ bucket instead of vmac_base | bucket: no 48-bit OR.
// - "low 16 bits <= bucket_mask" is "low 16 bits & ~bucket_mask == 0": the MAU compares
//   a field with a constant in a gateway, not two fields for order.

#ifndef SUPERGW_DISPATCH_CONFIG_P4
#define SUPERGW_DISPATCH_CONFIG_P4

control DispatchConfig(inout local_metadata_t meta) {
    Hash<bit<32>>(HashAlgorithm_t.CRC32) crc32_hash;
    mac_addr_t host_mac;
    bit<32> host_crc;
    bit<16> host_hash;
    bit<32> dst_high_diff;
    bucket_t dst_over_mask;

    // bucket_mask = K - 1; vmac_base has its low 16 bits zero; bucket_hash is a
    // BUCKET_HASH_* value (the controller checks all three).
    action set_dispatch_config(ipv4_addr_t gateway_ip, mac_addr_t vmac_base, bucket_t bucket_mask,
                               bucket_hash_t bucket_hash) {
        meta.configured = true;
        meta.gateway_ip = gateway_ip;
        meta.vmac_base = vmac_base;
        meta.bucket_mask = bucket_mask;
        meta.bucket_hash = bucket_hash;
    }

    action mark_unconfigured() {
        meta.configured = false;
    }

    // Keyless: the controller configures the switch by MODIFYing the default action.
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
                host_crc = crc32_hash.get({ host_mac });
                host_hash = host_crc[15:0];
            }
            meta.host_vmac = meta.vmac_base[47:16] ++ (host_hash & meta.bucket_mask);

            meta.dst_bucket = meta.lookup.eth_dst[15:0] & meta.bucket_mask;
            dst_high_diff = meta.lookup.eth_dst[47:16] ^ meta.vmac_base[47:16];
            dst_over_mask = meta.lookup.eth_dst[15:0] & ~meta.bucket_mask;
            meta.dst_is_vmac = dst_high_diff == 0 && dst_over_mask == 0;
        }
    }
}

#endif  // SUPERGW_DISPATCH_CONFIG_P4
