// Parsers and deparsers of the TNA pipeline.
//
// Differences from v1model (docs/pipeline-contract.md, "TNA"):
// - Ingress parses the intrinsic metadata and skips the port metadata first.
// - The packet_in header is built in ingress (PacketIoPunt), so nothing is bridged to
//   egress and egress is bypassed: flood pruning is the PRE's (FloodPruning).
// - The learning digest is packed here, in the ingress deparser, when ingress set
//   ig_dprsr_md.digest_type (Learning.learn); its fields must not change after learn().
// - IPv4 is never modified (as on v1model); the ICMPv6 checksum of an NA the switch built
//   is computed with Checksum() in the ingress deparser (v1model: update_checksum).
// - Parser errors: LookupMdInit reads parser_err, as v1model reads parser_error. Whether
//   the Tofino parser already drops such a frame is not checked here (no bf-p4c); either
//   way it never leaves the switch, and a front port cannot deliver a truncated ARP (the
//   MAC drops frames under 64 bytes).
// - UDP, IKE and ESP are parsed as on v1model, for OutsideDispatch; it decides from the UDP
//   and IPv4 lengths whether a header is complete, so bytes a frame carries past its IP
//   datagram (padding, Tofino's FCS) are never taken for a header.

#ifndef SUPERGW_PARSER_P4
#define SUPERGW_PARSER_P4

// `meta` is left to LookupMdInit, which sets every field a later control reads before it
// is read (bf-p4c also zero-fills ingress metadata); p4test's "may be uninitialized"
// warning for it is expected (p4src/tna/check.sh). `meta = { ... }` would silence it but
// needs a newer front end than some SDE releases ship.
parser SupergwIngressParser(packet_in packet,
                            out headers_t hdr,
                            out local_metadata_t meta,
                            out ingress_intrinsic_metadata_t ig_intr_md) {
    state start {
        packet.extract(ig_intr_md);
        // Nothing is resubmitted, so what follows the intrinsic header is always the
        // port metadata (64 bits on Tofino 1, 192 on Tofino 2), unused here.
        packet.advance(PORT_METADATA_SIZE);
        transition select(ig_intr_md.ingress_port) {
            TNA_CPU_PORT: parse_packet_out;
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

control SupergwIngressDeparser(packet_out packet,
                               inout headers_t hdr,
                               in local_metadata_t meta,
                               in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    // P4Runtime digest "learn_digest_t", as on v1model (where p4c names the digest after
    // its type): the leading dot makes the name absolute, so no control prefix is added.
    @name(".learn_digest_t")
    Digest<learn_digest_t>(LEARN_DIGEST_TYPE) learn_digest;
    @name(".learn_ip6_digest_t")
    Digest<learn_ip6_digest_t>(LEARN_IP6_DIGEST_TYPE) learn_ip6_digest;
    // The NA the switch built from an NS (common/nd_reply.p4): all 32 bytes are parsed
    // headers, so no residual of the payload enters the sum.
    Checksum() icmpv6_checksum;

    apply {
        if (ig_dprsr_md.digest_type == LEARN_DIGEST_TYPE) {
            learn_digest.pack({ meta.lookup.eth_src, meta.ingress_port, meta.learn_src_ip });
        } else if (ig_dprsr_md.digest_type == LEARN_IP6_DIGEST_TYPE) {
            learn_ip6_digest.pack({ meta.lookup.eth_src, meta.ingress_port, meta.lookup.ipv6_src });
        }
        if (meta.nd_reply) {
            hdr.icmpv6.checksum = icmpv6_checksum.update({
                hdr.ipv6.src_addr, hdr.ipv6.dst_addr, hdr.ipv6.payload_len,
                8w0, hdr.ipv6.next_hdr,
                hdr.icmpv6.type, hdr.icmpv6.code,
                hdr.nd.flags, hdr.nd.target,
                hdr.nd_option.type, hdr.nd_option.length, hdr.nd_option.ll_addr });
        }
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

// Egress is bypassed (ig_tm_md.bypass_egress); TNA still requires the blocks.
struct supergw_egress_headers_t { }
struct supergw_egress_metadata_t { }

parser SupergwEgressParser(packet_in packet,
                           out supergw_egress_headers_t hdr,
                           out supergw_egress_metadata_t meta,
                           out egress_intrinsic_metadata_t eg_intr_md) {
    state start {
        packet.extract(eg_intr_md);
        transition accept;
    }
}

control SupergwEgressDeparser(packet_out packet,
                              inout supergw_egress_headers_t hdr,
                              in supergw_egress_metadata_t meta,
                              in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    apply { }
}

#endif  // SUPERGW_PARSER_P4
