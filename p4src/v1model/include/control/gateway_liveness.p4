// Gateway liveness in the data plane (docs/pipeline-contract.md, "Gateway liveness").
// Each gateway's agent sends a liveness frame (ETHERTYPE_LIVENESS) out of its LAN port
// every few ms; the switch keeps the time of each gateway port's last one. A frame that
// BucketDispatch sends to a gateway heard longer ago than its gateway_backups entry's
// timeout goes to the backup the controller chose in advance, from the next frame on,
// without a controller round trip. A port never heard since the switch started is not
// judged. The controller still confirms the verdict and writes the lasting move.
// v1model: the clock is ingress_global_timestamp (BMv2: microseconds), kept in 32 bits;
// ages are taken modulo 2^32 (71 minutes).

#ifndef SUPERGW_GATEWAY_LIVENESS_P4
#define SUPERGW_GATEWAY_LIVENESS_P4

control GatewayLiveness(inout headers_t hdr,
                        inout local_metadata_t meta,
                        inout standard_metadata_t standard_metadata) {
    // Indexed by port: the clock at the port's last liveness frame, with bit 0 set (0:
    // never heard).
    @id(0x16000001)
    register<bit<32>>(GATEWAY_LIVENESS_SIZE) gateway_last_seen;
    // Indexed by port: the liveness frames heard from it.
    @id(0x12000002)
    counter(GATEWAY_LIVENESS_SIZE, CounterType.packets_and_bytes) liveness_frames;
    // Indexed by port: frames for its buckets sent to its backup because it was stale.
    @id(0x12000003)
    counter(GATEWAY_LIVENESS_SIZE, CounterType.packets_and_bytes) failover_frames;

    // timeout_us: the longest silence (microseconds) before the gateway counts as stale.
    @id(0x0100001c)
    action set_backup(port_num_t port, mac_addr_t gateway_mac, bit<32> timeout_us) {
        meta.has_backup = true;
        meta.backup_port = port;
        meta.backup_mac = gateway_mac;
        meta.liveness_timeout = timeout_us;
    }

    @id(0x0100001d)
    action no_backup() {
        meta.has_backup = false;
    }

    // Keyed by the gateway's port (the one a buckets entry names).
    @id(0x0200000f)
    table gateway_backups {
        key = {
            meta.bucket_gateway_port : exact @name("port");
        }
        actions = {
            set_backup;
            @defaultonly no_backup;
        }
        default_action = no_backup();
        size = GATEWAY_BACKUPS_TABLE_SIZE;
    }

    apply {
        meta.liveness_now = (bit<32>)standard_metadata.ingress_global_timestamp;
        if (!meta.decided && meta.port_role == PORT_ROLE_GATEWAY
                && meta.lookup.eth_type == ETHERTYPE_LIVENESS) {
            // Consumed: not forwarded, not a drop.
            gateway_last_seen.write((bit<32>)meta.ingress_port, meta.liveness_now | 1);
            liveness_frames.count((bit<32>)meta.ingress_port);
            mark_to_drop(standard_metadata);
            meta.decided = true;
        } else if (meta.to_bucket_gateway && meta.drop_reason == DROP_REASON_NONE) {
            gateway_backups.apply();
            if (meta.has_backup) {
                bit<32> last;
                gateway_last_seen.read(last, (bit<32>)meta.bucket_gateway_port);
                if (last != 0) {
                    meta.liveness_age = meta.liveness_now - last;
                    if (meta.liveness_age > meta.liveness_timeout) {
                        failover_frames.count((bit<32>)meta.bucket_gateway_port);
                        standard_metadata.egress_spec = (v1model_port_t)meta.backup_port;
                        hdr.ethernet.dst_addr = meta.backup_mac;
                        if (standard_metadata.egress_spec == standard_metadata.ingress_port) {
                            meta.drop_reason = DROP_REASON_HAIRPIN;
                        }
                    }
                }
            }
        }
    }
}

#endif  // SUPERGW_GATEWAY_LIVENESS_P4
