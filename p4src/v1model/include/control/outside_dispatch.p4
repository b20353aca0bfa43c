// Outside switch, client -> gateway: IPv4 from an uplink to the public address IP_P goes to
// one gateway (docs/pipeline-contract.md, "Outside dispatch"):
// - IKE (UDP 500, or UDP 4500 behind the zero non-ESP marker) of an established IKE SA:
//   ike_spi_labels on the SPI the gateway allocated, which carries that gateway's label
//   (strongSwan's charon.spi_mask / spi_label);
// - ESP (IP protocol 50, or UDP 4500 with a non-zero first word): esp_spi_ranges on the
//   SPI, which lies in that gateway's range (charon.spi_min / spi_max);
// - everything else (IKE_SA_INIT, whose responder SPI is still zero; NAT-T keepalives;
//   ICMP; IP fragments after the first; IPv4 with options): client_pins on the client's
//   outer address, else the bucket of that address's hash (BucketDispatch).
// A SPI no entry owns is dropped, not hashed: the gateways allocate every SPI inside their
// own label or range, so it is stale or forged and no gateway holds its SA. IKE or ESP
// shorter than its header (by the UDP or IPv4 length, or by the frame) is dropped
// MALFORMED_IKE / MALFORMED_ESP; no field beyond what the parser extracted is read.

#ifndef SUPERGW_OUTSIDE_DISPATCH_P4
#define SUPERGW_OUTSIDE_DISPATCH_P4

control OutsideDispatch(inout headers_t hdr,
                        inout local_metadata_t meta,
                        inout standard_metadata_t standard_metadata) {
    bit<16> client_hash;

    @id(0x13000003)
    direct_counter(CounterType.packets_and_bytes) pin_counter;
    @id(0x13000004)
    direct_counter(CounterType.packets_and_bytes) ike_spi_counter;
    @id(0x13000005)
    direct_counter(CounterType.packets_and_bytes) esp_spi_counter;

    // Every gateway action has the shape of buckets' set_gateway: port and real MAC.
    @id(0x01000010)
    action set_pin_gateway(port_num_t port, mac_addr_t gateway_mac) {
        pin_counter.count();
        standard_metadata.egress_spec = (v1model_port_t)port;
        hdr.ethernet.dst_addr = gateway_mac;
    }

    @id(0x01000011)
    action dispatch_by_client_hash() {
        pin_counter.count();
        meta.by_client_hash = true;
    }

    @id(0x01000012)
    action set_ike_gateway(port_num_t port, mac_addr_t gateway_mac) {
        ike_spi_counter.count();
        standard_metadata.egress_spec = (v1model_port_t)port;
        hdr.ethernet.dst_addr = gateway_mac;
    }

    @id(0x01000013)
    action drop_unknown_ike_spi() {
        ike_spi_counter.count();
        meta.drop_reason = DROP_REASON_IKE_SPI_UNKNOWN;
    }

    @id(0x01000014)
    action set_esp_gateway(port_num_t port, mac_addr_t gateway_mac) {
        esp_spi_counter.count();
        standard_metadata.egress_spec = (v1model_port_t)port;
        hdr.ethernet.dst_addr = gateway_mac;
    }

    @id(0x01000015)
    action drop_unknown_esp_spi() {
        esp_spi_counter.count();
        meta.drop_reason = DROP_REASON_ESP_SPI_UNKNOWN;
    }

    // Exact on the client's outer IPv4 source: the controller pins each established
    // client to the gateway that holds its IKE SA, so its IKE_SA_INITs (a reauthentication)
    // and unclassified packets stay there when buckets move.
    @id(0x02000009)
    table client_pins {
        key = {
            meta.lookup.ipv4_src : exact @name("client_ip");
        }
        actions = {
            set_pin_gateway;
            @defaultonly dispatch_by_client_hash;
        }
        default_action = dispatch_by_client_hash();
        counters = pin_counter;
        size = CLIENT_PINS_TABLE_SIZE;
    }

    // Ternary on the IKE SPI the gateway allocated: one entry per gateway, its label
    // under the mask (e.g. 0x0100000000000000 &&& 0xff00000000000000).
    @id(0x0200000a)
    table ike_spi_labels {
        key = {
            meta.ike_spi : ternary @name("ike_spi");
        }
        actions = {
            set_ike_gateway;
            @defaultonly drop_unknown_ike_spi;
        }
        default_action = drop_unknown_ike_spi();
        counters = ike_spi_counter;
        size = IKE_SPI_LABELS_TABLE_SIZE;
    }

    // Ternary on the ESP SPI: one entry per gateway, its [spi_min, spi_max] as a prefix
    // (e.g. 0xc0000000 &&& 0xff000000).
    @id(0x0200000b)
    table esp_spi_ranges {
        key = {
            hdr.esp.spi : ternary @name("esp_spi");
        }
        actions = {
            set_esp_gateway;
            @defaultonly drop_unknown_esp_spi;
        }
        default_action = drop_unknown_esp_spi();
        counters = esp_spi_counter;
        size = ESP_SPI_RANGES_TABLE_SIZE;
    }

    apply {
        if (meta.port_role == PORT_ROLE_UPLINK && meta.lookup.ipv4_valid
                && meta.lookup.ipv4_dst == meta.public_ip) {
            bool ike = false;
            bool esp = false;
            if (hdr.udp.isValid() && hdr.udp.dst_port == UDP_PORT_IKE) {
                ike = true;
                if (hdr.udp.length < UDP_HEADER_LEN + IKE_HEADER_LEN || !hdr.ike.isValid()) {
                    meta.drop_reason = DROP_REASON_MALFORMED_IKE;
                }
            } else if (hdr.udp.isValid() && hdr.udp.dst_port == UDP_PORT_IKE_NAT_T) {
                if (hdr.nat_t_keepalive.isValid() && hdr.nat_t_keepalive.value == NAT_T_KEEPALIVE) {
                    // Neither IKE nor ESP: pinned or hashed below.
                } else if (hdr.udp.length >= UDP_HEADER_LEN + NON_ESP_MARKER_LEN && hdr.non_esp_marker.isValid()) {
                    ike = true;
                    if (hdr.udp.length < UDP_HEADER_LEN + NON_ESP_MARKER_LEN + IKE_HEADER_LEN || !hdr.ike.isValid()) {
                        meta.drop_reason = DROP_REASON_MALFORMED_IKE;
                    }
                } else {
                    // Anything but a marker is an SPI (RFC 3948): ESP, complete or not.
                    esp = true;
                    if (hdr.udp.length < UDP_HEADER_LEN + ESP_HEADER_LEN || !hdr.esp.isValid()) {
                        meta.drop_reason = DROP_REASON_MALFORMED_ESP;
                    }
                }
            } else if (hdr.ipv4.protocol == IP_PROTO_ESP && hdr.ipv4.ihl == IPV4_IHL_NO_OPTIONS
                       && hdr.ipv4.frag_offset == 0) {
                esp = true;
                if (hdr.ipv4.total_len < IPV4_HEADER_LEN + ESP_HEADER_LEN || !hdr.esp.isValid()) {
                    meta.drop_reason = DROP_REASON_MALFORMED_ESP;
                }
            }

            if (meta.drop_reason != DROP_REASON_NONE) {
                meta.decided = true;
            } else if (ike && hdr.ike.responder_spi != 0) {
                // The gateway's SPI is the responder's when the client initiated the IKE SA
                // (flag I set), the initiator's when the gateway did (its IKE SA rekey).
                meta.ike_spi = hdr.ike.initiator_spi;
                if ((hdr.ike.flags & IKE_FLAG_INITIATOR) != 0) {
                    meta.ike_spi = hdr.ike.responder_spi;
                }
                ike_spi_labels.apply();
                meta.decided = true;
            } else if (esp) {
                esp_spi_ranges.apply();
                meta.decided = true;
            } else {
                if (client_pins.apply().hit) {
                    meta.decided = true;
                } else {
                    // bucket = hash(client address) & bucket_mask, the hash of the settings:
                    // CRC-32 of the 4 address bytes, or their low 16 bits.
                    if (meta.bucket_hash == BUCKET_HASH_IDENTITY) {
                        client_hash = meta.lookup.ipv4_src[15:0];
                    } else {
                        hash(client_hash, HashAlgorithm.crc32, 16w0, { meta.lookup.ipv4_src }, 32w65536);
                    }
                    meta.dst_bucket = client_hash & meta.bucket_mask;
                }
            }
            // A gateway entry pointing back at the uplink is a hairpin, as in L2.
            if (meta.decided && meta.drop_reason == DROP_REASON_NONE
                    && standard_metadata.egress_spec == standard_metadata.ingress_port) {
                meta.drop_reason = DROP_REASON_HAIRPIN;
            }
        }
    }
}

#endif  // SUPERGW_OUTSIDE_DISPATCH_P4
