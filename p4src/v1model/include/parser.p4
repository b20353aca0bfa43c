// Parser and deparser of the v1model pipeline.
//
// BMv2 does not drop a packet whose parse fails: it enters ingress with
// standard_metadata.parser_error set and the failed header invalid. The pipeline turns
// that into MALFORMED_FRAME (no Ethernet header) or MALFORMED_ARP (truncated ARP); a
// truncated IPv4 header is harmless (only its source address is read, for learning).

#ifndef SUPERGW_PARSER_P4
#define SUPERGW_PARSER_P4

parser SupergwParser(packet_in packet,
                     out headers_t hdr,
                     inout local_metadata_t meta,
                     inout standard_metadata_t standard_metadata) {
    state start {
        transition select(standard_metadata.ingress_port) {
            V1MODEL_CPU_PORT: parse_packet_out;
            default: parse_ethernet;
        }
    }

    state parse_packet_out {
        packet.extract(hdr.packet_out);
        // The frame behind a packet-out leaves unchanged, so it stays unparsed payload.
        transition accept;
    }

    state parse_ethernet {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_ARP: parse_arp;
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_arp {
        packet.extract(hdr.arp);
        transition accept;
    }

    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition accept;
    }
}

control SupergwVerifyChecksum(inout headers_t hdr, inout local_metadata_t meta) {
    // IPv4 is never modified, so its checksum is neither verified nor updated.
    apply { }
}

control SupergwComputeChecksum(inout headers_t hdr, inout local_metadata_t meta) {
    apply { }
}

control SupergwDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.packet_in);
        packet.emit(hdr.ethernet);
        packet.emit(hdr.arp);
        packet.emit(hdr.ipv4);
    }
}

#endif  // SUPERGW_PARSER_P4
