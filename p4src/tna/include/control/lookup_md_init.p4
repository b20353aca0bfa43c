// Fills local_metadata once per packet so that later controls never re-check header
// validity: fields of invalid headers read as zero. Makes no forwarding decision.
// TNA: Tofino may overlay an invalid header's containers with other data, so the
// validity checks here are needed for correctness, not only for clarity.

#ifndef SUPERGW_LOOKUP_MD_INIT_P4
#define SUPERGW_LOOKUP_MD_INIT_P4

control LookupMdInit(in headers_t hdr,
                     inout local_metadata_t meta,
                     in ingress_intrinsic_metadata_t ig_intr_md,
                     in ingress_intrinsic_metadata_from_parser_t ig_prsr_md) {
    apply {
        meta.ingress_port = (port_num_t)ig_intr_md.ingress_port;
        meta.is_packet_out = ig_intr_md.ingress_port == TNA_CPU_PORT;
        // A packet-out is classified by the port it asks for, anything else by where it
        // came in: port_roles is looked up once per packet either way.
        meta.classified_port = meta.ingress_port;
        if (hdr.packet_out.isValid()) {
            meta.classified_port = hdr.packet_out.egress_port;
        }
        meta.frame_valid = hdr.ethernet.isValid() || hdr.packet_out.isValid();

        meta.decided = false;
        meta.drop_reason = DROP_REASON_NONE;
        meta.punt_reason = PUNT_REASON_NONE;
        meta.port_role = PORT_ROLE_UNKNOWN;
        meta.configured = false;
        meta.dst_is_vmac = false;
        meta.l2_hit = false;
        meta.l2_port = 0;
        meta.l2_port_role = PORT_ROLE_UNKNOWN;
        meta.learn_src_ip = 0;
        meta.flood = false;
        meta.flood_group = 0;
        meta.ra_configured = false;
        meta.public_ip = 0;
        meta.public_mac = 0;
        meta.by_client_hash = false;
        meta.ike_spi = 0;
        meta.gateway_ip6_link_local = 0;
        meta.gateway_ip6_global = 0;
        meta.ip6_src_is_gateway = false;
        meta.nd_target_is_gateway = false;
        meta.nd_reply = false;
        meta.to_bucket_gateway = false;
        meta.bucket_gateway_port = 0;
        meta.has_backup = false;
        meta.backup_port = 0;
        meta.backup_mac = 0;
        meta.liveness_timeout = 0;
        meta.liveness_now = 0;
        meta.liveness_age = 0;

        meta.lookup.eth_dst = 0;
        meta.lookup.eth_src = 0;
        meta.lookup.eth_type = 0;
        meta.lookup.eth_dst_is_group = false;
        if (hdr.ethernet.isValid()) {
            meta.lookup.eth_dst = hdr.ethernet.dst_addr;
            meta.lookup.eth_src = hdr.ethernet.src_addr;
            meta.lookup.eth_type = hdr.ethernet.ether_type;
            // The I/G bit is the least significant bit of the first octet.
            meta.lookup.eth_dst_is_group = hdr.ethernet.dst_addr[40:40] == 1;
        }

        meta.lookup.is_arp = hdr.ethernet.isValid() && hdr.ethernet.ether_type == ETHERTYPE_ARP;
        meta.lookup.arp_valid = false;
        meta.lookup.arp_oper = 0;
        meta.lookup.arp_spa = 0;
        meta.lookup.arp_tpa = 0;
        meta.lookup.src_ip = 0;
        meta.lookup.ipv4_valid = hdr.ipv4.isValid();
        meta.lookup.ipv4_src = 0;
        meta.lookup.ipv4_dst = 0;
        if (hdr.ipv4.isValid()) {
            meta.lookup.ipv4_src = hdr.ipv4.src_addr;
            meta.lookup.ipv4_dst = hdr.ipv4.dst_addr;
        }
        meta.lookup.ipv6_valid = hdr.ipv6.isValid() && hdr.ipv6.version == IPV6_VERSION;
        meta.lookup.ipv6_src = 0;
        meta.lookup.nd_type = 0;
        meta.lookup.nd_has_target = false;
        meta.lookup.nd_target = 0;
        meta.lookup.ns_answerable = false;
        if (meta.lookup.ipv6_valid) {
            meta.lookup.ipv6_src = hdr.ipv6.src_addr;
            // The parser reads ICMPv6 only behind a version-6 header.
            if (hdr.icmpv6.isValid()
                    && hdr.icmpv6.type >= ICMPV6_TYPE_RS && hdr.icmpv6.type <= ICMPV6_TYPE_REDIRECT) {
                meta.lookup.nd_type = hdr.icmpv6.type;
            }
            if (hdr.nd.isValid()) {
                meta.lookup.nd_has_target = true;
                meta.lookup.nd_target = hdr.nd.target;
                // A failed extract of the option leaves it invalid (parser_error set).
                meta.lookup.ns_answerable = hdr.icmpv6.type == ICMPV6_TYPE_NS
                                            && hdr.ipv6.hop_limit == ND_HOP_LIMIT
                                            && hdr.icmpv6.code == 0
                                            && (hdr.ipv6.payload_len == ND_LEN_NO_OPTION
                                                || (hdr.ipv6.payload_len == ND_LEN_ONE_OPTION
                                                    && hdr.nd_option.isValid()
                                                    && hdr.nd_option.length == ND_OPTION_LEN_8));
            }
        }
        if (hdr.arp.isValid()) {
            // Tofino's MAC pads every frame to 64 bytes, so a truncated ARP does not reach
            // the parser from a front port; parser_err is checked all the same.
            meta.lookup.arp_valid = ig_prsr_md.parser_err == 0
                                    && hdr.arp.htype == ARP_HTYPE_ETHERNET
                                    && hdr.arp.ptype == ARP_PTYPE_IPV4
                                    && hdr.arp.hlen == ARP_HLEN_ETHERNET
                                    && hdr.arp.plen == ARP_PLEN_IPV4
                                    && (hdr.arp.oper == ARP_OPER_REQUEST || hdr.arp.oper == ARP_OPER_REPLY);
            meta.lookup.arp_oper = hdr.arp.oper;
            meta.lookup.arp_spa = hdr.arp.spa;
            meta.lookup.arp_tpa = hdr.arp.tpa;
            meta.lookup.src_ip = hdr.arp.spa;
        } else if (hdr.ipv4.isValid()) {
            meta.lookup.src_ip = hdr.ipv4.src_addr;
        }
    }
}

#endif  // SUPERGW_LOOKUP_MD_INIT_P4
