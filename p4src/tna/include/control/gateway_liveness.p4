// Gateway liveness in the data plane (docs/pipeline-contract.md, "Gateway liveness").
// Each gateway's agent sends a liveness frame (ETHERTYPE_LIVENESS) out of its LAN port
// every few ms; the switch keeps the time of each gateway port's last one. A frame that
// BucketDispatch sends to a gateway heard longer ago than its gateway_backups entry's
// timeout goes to the backup the controller chose in advance, from the next frame on,
// without a controller round trip. A port never heard since the switch started is not
// judged. The controller still confirms the verdict and writes the lasting move.
// TNA: the clock is the frame's MAC receive timestamp (ns) in units of 1024 ns, bits
// [41:10], so that it fits a 32-bit stateful ALU (wraps every 73 minutes; ages modulo
// 2^32). A timeout_us of T acts as T x 1.024 us. The stateful ALU returns the age, and
// "age > timeout" is the sign of timeout - age (both below 2^31 units, 36 minutes), a
// comparison every MAU gateway can make. docs/deploy-tofino.md, "Gateway liveness",
// compares this with the packet-generator way.

#ifndef SUPERGW_GATEWAY_LIVENESS_P4
#define SUPERGW_GATEWAY_LIVENESS_P4

control GatewayLiveness(inout headers_t hdr,
                        inout local_metadata_t meta,
                        in ingress_intrinsic_metadata_t ig_intr_md,
                        inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                        inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    // Indexed by port: the clock at the port's last liveness frame, with bit 0 set (0:
    // never heard).
    Register<bit<32>, PortId_t>(GATEWAY_LIVENESS_SIZE, 0) gateway_last_seen;
    // Indexed by port: the liveness frames heard from it.
    Counter<bit<32>, PortId_t>(GATEWAY_LIVENESS_SIZE, CounterType_t.PACKETS_AND_BYTES) liveness_frames;
    // Indexed by port: frames for its buckets sent to its backup because it was stale.
    Counter<bit<32>, PortId_t>(GATEWAY_LIVENESS_SIZE, CounterType_t.PACKETS_AND_BYTES) failover_frames;

    RegisterAction<bit<32>, PortId_t, bit<32>>(gateway_last_seen) refresh_last_seen = {
        void apply(inout bit<32> value) {
            value = meta.liveness_now | 1;
        }
    };

    RegisterAction<bit<32>, PortId_t, bit<32>>(gateway_last_seen) age_since_last_seen = {
        void apply(inout bit<32> value, out bit<32> age) {
            if (value == 0) {
                age = 0;
            } else {
                age = meta.liveness_now - value;
            }
        }
    };

    // timeout_us: the longest silence (microseconds) before the gateway counts as stale.
    action set_backup(port_num_t port, mac_addr_t gateway_mac, bit<32> timeout_us) {
        meta.has_backup = true;
        meta.backup_port = port;
        meta.backup_mac = gateway_mac;
        meta.liveness_timeout = timeout_us;
    }

    action no_backup() {
        meta.has_backup = false;
    }

    // Keyed by the gateway's port (the one a buckets entry names).
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
        meta.liveness_now = ig_intr_md.ingress_mac_tstamp[41:10];
        if (!meta.decided && meta.port_role == PORT_ROLE_GATEWAY
                && meta.lookup.eth_type == ETHERTYPE_LIVENESS) {
            // Consumed: not forwarded, not a drop.
            refresh_last_seen.execute((PortId_t)meta.ingress_port);
            liveness_frames.count((PortId_t)meta.ingress_port);
            ig_dprsr_md.drop_ctl = TNA_DROP;
            meta.decided = true;
        } else if (meta.to_bucket_gateway && meta.drop_reason == DROP_REASON_NONE) {
            gateway_backups.apply();
            if (meta.has_backup) {
                meta.liveness_age = age_since_last_seen.execute((PortId_t)meta.bucket_gateway_port);
                bit<32> slack = meta.liveness_timeout - meta.liveness_age;
                if (meta.liveness_age != 0 && slack[31:31] == 1) {
                    failover_frames.count((PortId_t)meta.bucket_gateway_port);
                    ig_tm_md.ucast_egress_port = (PortId_t)meta.backup_port;
                    hdr.ethernet.dst_addr = meta.backup_mac;
                    if (meta.backup_port == meta.ingress_port) {
                        meta.drop_reason = DROP_REASON_HAIRPIN;
                    }
                }
            }
        }
    }
}

#endif  // SUPERGW_GATEWAY_LIVENESS_P4
