// The NS -> NA rewrite shared by the v1model and TNA NdResponder controls (the twin of
// arp_reply.p4): it touches only headers_t; each target sets the egress port and
// recomputes the ICMPv6 checksum (meta.nd_reply) in its own way.

#ifndef SUPERGW_ND_REPLY_P4
#define SUPERGW_ND_REPLY_P4

#include "headers.p4"

// ff02::1, where a DAD probe's answer goes (RFC 4861 7.2.4). Not a defines.p4 const:
// gen_constants exports those to Go and C, which have no 128-bit integers.
const ipv6_addr_t IPV6_ALL_NODES = 0xff020000000000000000000000000001;

// Turns the answerable NS in hdr into the NA "target is at answer_mac", addressed to the
// solicitor (docs/pipeline-contract.md, "The NA the switch builds"). router_flag is
// ND_FLAG_ROUTER for a gateway address, 0 for a host's. A function, not an action: p4c
// would list an action in the P4Info.
void ns_to_na(inout headers_t hdr, in mac_addr_t answer_mac, in bit<32> router_flag) {
    bit<32> solicited = ND_FLAG_SOLICITED;
    if (hdr.ipv6.src_addr == 0) {
        // DAD: the prober has no address yet; tell all nodes, unsolicited.
        hdr.ethernet.dst_addr = ALL_NODES_MAC;
        hdr.ipv6.dst_addr = IPV6_ALL_NODES;
        solicited = 0;
    } else {
        hdr.ethernet.dst_addr = hdr.ethernet.src_addr;
        hdr.ipv6.dst_addr = hdr.ipv6.src_addr;
    }
    hdr.ethernet.src_addr = answer_mac;
    hdr.ipv6.src_addr = hdr.nd.target;
    hdr.ipv6.payload_len = ND_LEN_ONE_OPTION;
    hdr.ipv6.hop_limit = ND_HOP_LIMIT;
    hdr.icmpv6.type = ICMPV6_TYPE_NA;
    hdr.icmpv6.code = 0;
    hdr.nd.flags = router_flag | solicited | ND_FLAG_OVERRIDE;
    // The NS's option (source link-layer address or DAD nonce), or none: either way the
    // NA carries exactly one, the target link-layer address.
    hdr.nd_option.setValid();
    hdr.nd_option.type = ND_OPTION_TARGET_LL_ADDR;
    hdr.nd_option.length = ND_OPTION_LEN_8;
    hdr.nd_option.ll_addr = answer_mac;
}

#endif  // SUPERGW_ND_REPLY_P4
