// Parser and deparser of the v1model pipeline.
//
// BMv2 does not drop a packet whose parse fails: it enters ingress with
// standard_metadata.parser_error set and the failed header invalid. The pipeline turns
// that into MALFORMED_FRAME (no Ethernet header) or MALFORMED_ARP (truncated ARP); a
// truncated IPv4 header is no IPv4 header (meta.lookup.ipv4_valid false). Behind IPv4,
// UDP, IKE and ESP are parsed for the outside switch's dispatch (OutsideDispatch), which
// decides from the UDP and IPv4 lengths whether an IKE or ESP header is complete: a frame
// may be padded past its IP datagram, or end inside a header (then that header is invalid).
// A lookahead or extract past the end of the frame only sets parser_error, which nothing
// but ArpGuard reads, and leaves the rest of the frame as payload.

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
            ETHERTYPE_IPV6: parse_ipv6;
            default: accept;
        }
    }

    state parse_arp {
        packet.extract(hdr.arp);
        transition accept;
    }

    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        // Behind options or in a later fragment the bytes are not a UDP or ESP header.
        transition select(hdr.ipv4.ihl, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (IPV4_IHL_NO_OPTIONS, 0, IP_PROTO_UDP): parse_udp;
            (IPV4_IHL_NO_OPTIONS, 0, IP_PROTO_ESP): parse_esp;
            default: accept;
        }
    }

    state parse_ipv6 {
        packet.extract(hdr.ipv6);
        // ND only directly behind the IPv6 header (docs/pipeline-contract.md).
        transition select(hdr.ipv6.version, hdr.ipv6.next_hdr) {
            (IPV6_VERSION, IP_PROTO_ICMPV6): parse_icmpv6;
            default: accept;
        }
    }

    state parse_icmpv6 {
        packet.extract(hdr.icmpv6);
        transition select(hdr.icmpv6.type) {
            ICMPV6_TYPE_NS: parse_nd;
            ICMPV6_TYPE_NA: parse_nd;
            default: accept;
        }
    }

    state parse_nd {
        packet.extract(hdr.nd);
        // The one option of a 32-byte NS or NA; longer ones are never rewritten.
        transition select(hdr.ipv6.payload_len) {
            ND_LEN_ONE_OPTION: parse_nd_option;
            default: accept;
        }
    }

    state parse_nd_option {
        packet.extract(hdr.nd_option);
        transition accept;
    }

    state parse_udp {
        packet.extract(hdr.udp);
        transition select(hdr.udp.dst_port) {
            UDP_PORT_IKE: parse_ike;
            UDP_PORT_IKE_NAT_T: parse_nat_t;
            default: accept;
        }
    }

    state parse_nat_t {
        // A one-byte payload can only be a keepalive; anything longer starts with a marker
        // (IKE) or an SPI (ESP).
        transition select(hdr.udp.length) {
            UDP_HEADER_LEN + 1: parse_nat_t_keepalive;
            default: parse_nat_t_payload;
        }
    }

    state parse_nat_t_keepalive {
        packet.extract(hdr.nat_t_keepalive);
        transition accept;
    }

    state parse_nat_t_payload {
        transition select(packet.lookahead<bit<32>>()) {
            0: parse_non_esp_marker;
            default: parse_esp;
        }
    }

    state parse_non_esp_marker {
        packet.extract(hdr.non_esp_marker);
        transition parse_ike;
    }

    state parse_ike {
        packet.extract(hdr.ike);
        transition accept;
    }

    state parse_esp {
        packet.extract(hdr.esp);
        transition accept;
    }
}

control SupergwVerifyChecksum(inout headers_t hdr, inout local_metadata_t meta) {
    // IPv4 is never modified, so its checksum is neither verified nor updated; an NS the
    // switch answers is not verified either (docs/pipeline-contract.md).
    apply { }
}

control SupergwComputeChecksum(inout headers_t hdr, inout local_metadata_t meta) {
    apply {
        // The NA built from an NS (common/nd_reply.p4): all 32 bytes are parsed headers,
        // so the sum needs no payload. Pseudo-header: the 16-bit payload length and a zero
        // byte before next header give the same 16-bit words as RFC 8200's 32-bit forms.
        update_checksum(meta.nd_reply,
                        { hdr.ipv6.src_addr, hdr.ipv6.dst_addr, hdr.ipv6.payload_len,
                          8w0, hdr.ipv6.next_hdr,
                          hdr.icmpv6.type, hdr.icmpv6.code,
                          hdr.nd.flags, hdr.nd.target,
                          hdr.nd_option.type, hdr.nd_option.length, hdr.nd_option.ll_addr },
                        hdr.icmpv6.checksum, HashAlgorithm.csum16);
    }
}

control SupergwDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.packet_in);
        packet.emit(hdr.ethernet);
        packet.emit(hdr.arp);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.ipv6);
        packet.emit(hdr.icmpv6);
        packet.emit(hdr.nd);
        packet.emit(hdr.nd_option);
        packet.emit(hdr.udp);
        packet.emit(hdr.non_esp_marker);
        packet.emit(hdr.nat_t_keepalive);
        packet.emit(hdr.ike);
        packet.emit(hdr.esp);
    }
}

#endif  // SUPERGW_PARSER_P4
