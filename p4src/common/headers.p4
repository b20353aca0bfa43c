// Packet headers, controller headers and the digest of the supergw pipeline.

#ifndef SUPERGW_HEADERS_P4
#define SUPERGW_HEADERS_P4

#include "defines.p4"

// Sent to the controller in front of the original frame when egress_port == CPU_PORT.
@controller_header("packet_in")
@id(0x04000001)
header packet_in_t {
    port_num_t    ingress_port;
    punt_reason_t reason;
}

// Received from the controller in front of the frame to send out of egress_port.
@controller_header("packet_out")
@id(0x04000002)
header packet_out_t {
    port_num_t egress_port;
}

header ethernet_t {
    mac_addr_t dst_addr;
    mac_addr_t src_addr;
    bit<16>    ether_type;
}

// ARP for IPv4 over Ethernet only (RFC 826 with hlen 6, plen 4): 28 bytes.
header arp_t {
    bit<16>     htype;
    bit<16>     ptype;
    bit<8>      hlen;
    bit<8>      plen;
    bit<16>     oper;
    mac_addr_t  sha;
    ipv4_addr_t spa;
    mac_addr_t  tha;
    ipv4_addr_t tpa;
}

// Parsed to learn a host's IPv4 address, to find a LAN client pool, and to dispatch
// remote-access traffic on the outside switch; never modified.
header ipv4_t {
    bit<4>      version;
    bit<4>      ihl;
    bit<6>      dscp;
    bit<2>      ecn;
    bit<16>     total_len;
    bit<16>     identification;
    bit<3>      flags;
    bit<13>     frag_offset;
    bit<8>      ttl;
    bit<8>      protocol;
    bit<16>     hdr_checksum;
    ipv4_addr_t src_addr;
    ipv4_addr_t dst_addr;
}

// IPv6 is parsed for Neighbor Discovery and learning; only an NS the switch answers is
// modified (turned into an NA in place, common/nd_reply.p4).
header ipv6_t {
    bit<4>      version;
    bit<8>      traffic_class;
    bit<20>     flow_label;
    bit<16>     payload_len;
    bit<8>      next_hdr;
    bit<8>      hop_limit;
    ipv6_addr_t src_addr;
    ipv6_addr_t dst_addr;
}

// ICMPv6 directly behind the IPv6 header.
header icmpv6_t {
    bit<8>  type;
    bit<8>  code;
    bit<16> checksum;
}

// The body of an NS or NA (RFC 4861 4.3, 4.4): reserved / R S O flags, target address.
header nd_t {
    bit<32>     flags;
    ipv6_addr_t target;
}

// One 8-byte ND option behind an NS or NA of 32 bytes: a link-layer address option
// (type 1 source, 2 target) or, in a DAD probe, the nonce (type 14).
header nd_option_t {
    bit<8>     type;
    bit<8>     length;
    mac_addr_t ll_addr;
}

// Parsed (IPv4 without options, first fragment) only to dispatch IKE and ESP on the
// outside switch; never modified.
header udp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

// UDP 4500: the four zero bytes in front of an IKE message (RFC 3948, 2.2).
header non_esp_marker_t {
    bit<32> marker;
}

// UDP 4500: a NAT-T keepalive, the single byte NAT_T_KEEPALIVE (RFC 3948, 2.3).
header nat_t_keepalive_t {
    bit<8> value;
}

// The first 20 bytes of the 28-byte IKE header (RFC 7296, 3.1): message ID and length
// are not needed, and the UDP length says whether the whole header is there.
header ike_t {
    bit<64> initiator_spi;
    bit<64> responder_spi;
    bit<8>  next_payload;
    bit<8>  version;
    bit<8>  exchange_type;
    bit<8>  flags;
}

// ESP (IP protocol 50) or ESP-in-UDP on port 4500 (RFC 4303, 2).
header esp_t {
    bit<32> spi;
    bit<32> seq;
}

struct headers_t {
    packet_out_t      packet_out;
    packet_in_t       packet_in;
    ethernet_t        ethernet;
    arp_t             arp;
    ipv4_t            ipv4;
    ipv6_t            ipv6;
    icmpv6_t          icmpv6;
    nd_t              nd;
    nd_option_t       nd_option;
    udp_t             udp;
    non_esp_marker_t  non_esp_marker;
    nat_t_keepalive_t nat_t_keepalive;
    ike_t             ike;
    esp_t             esp;
}

// Digest of an unknown (source MAC, host port) pair. src_ip is the ARP sender IP for
// ARP, the IPv4 source for IPv4, 0 otherwise, and 0 whenever it equals the gateway IP.
// P4Info names the digest after this type; v1model gives no way to pin its ID.
struct learn_digest_t {
    mac_addr_t  src_mac;
    port_num_t  port;
    ipv4_addr_t src_ip;
}

// Digest of an IPv6 source address not yet seen with this source MAC on a host port
// (docs/pipeline-contract.md, "IPv6 Neighbor Discovery on the LAN"); its ID, like
// learn_digest_t's, is p4c's hash of this name.
struct learn_ip6_digest_t {
    mac_addr_t  src_mac;
    port_num_t  port;
    ipv6_addr_t src_ip6;
}

// Header fields normalised once (zeros when a header is invalid), so later controls
// match and branch on plain metadata.
struct lookup_metadata_t {
    mac_addr_t  eth_dst;
    mac_addr_t  eth_src;
    bit<16>     eth_type;
    bool        eth_dst_is_group;  // broadcast or multicast (I/G bit set)
    bool        is_arp;            // ethertype is ARP, whatever its content
    bool        arp_valid;         // a well-formed IPv4-over-Ethernet request or reply
    bit<16>     arp_oper;
    ipv4_addr_t arp_spa;
    ipv4_addr_t arp_tpa;
    ipv4_addr_t src_ip;            // ARP sender IP, IPv4 source, or 0
    bool        ipv4_valid;        // a complete IPv4 header was parsed
    ipv4_addr_t ipv4_src;
    ipv4_addr_t ipv4_dst;
    bool        ipv6_valid;        // a complete IPv6 header (version 6) was parsed
    ipv6_addr_t ipv6_src;
    // ICMPv6 type of an ND message (RS, RA, NS, NA, Redirect directly behind IPv6), else 0.
    bit<8>      nd_type;
    bool        nd_has_target;     // an NS or NA whose target was parsed
    ipv6_addr_t nd_target;
    // An NS the switch can answer exactly: hop limit 255, code 0, 24 bytes, or 32 with
    // one option of length 1, all in the frame.
    bool        ns_answerable;
}

struct local_metadata_t {
    lookup_metadata_t lookup;
    port_num_t        ingress_port;
    // Frames from the CPU port are packet-outs; everything else is a front-port frame.
    bool              is_packet_out;
    // An Ethernet header (front port) or a packet-out header (CPU port) was parsed.
    bool              frame_valid;
    // Port looked up in port_roles: the ingress port, or a packet-out's egress port.
    port_num_t        classified_port;
    port_role_t       port_role;
    // Set once the packet's fate (a drop or an output) is known; later controls skip.
    bool              decided;
    drop_reason_t     drop_reason;
    punt_reason_t     punt_reason;
    // From SupergwIngress.dispatch_config.settings.
    bool              configured;
    ipv4_addr_t       gateway_ip;
    mac_addr_t        vmac_base;
    bucket_t          bucket_mask;
    bucket_hash_t     bucket_hash;
    // vmac(bucket(host MAC)), the host being the frame's source on a host port and its
    // destination on a gateway port.
    mac_addr_t        host_vmac;
    bool              dst_is_vmac;
    bucket_t          dst_bucket;
    ipv4_addr_t       learn_src_ip;
    bool              l2_hit;
    port_num_t        l2_port;
    // Role of l2_port, from mac_table's action data (port_roles is applied once).
    port_role_t       l2_port_role;
    bool              flood;
    mcast_group_t     flood_group;
    // From SupergwIngress.ra_config.ra_settings (outside switch).
    bool              ra_configured;
    ipv4_addr_t       public_ip;
    mac_addr_t        public_mac;
    // Outside dispatch: the frame is for IP_P and goes to buckets[dst_bucket], dst_bucket
    // being the bucket of the client's outer IPv4 source address.
    bool              by_client_hash;
    // The IKE SPI the gateway allocated (OutsideDispatch); a key of ike_spi_labels.
    bit<64>           ike_spi;
    // From SupergwIngress.nd_config.nd_settings: the gateway's shared IPv6 addresses
    // (0 = unset), and what NdConfig makes of this frame's addresses with them.
    ipv6_addr_t       gateway_ip6_link_local;
    ipv6_addr_t       gateway_ip6_global;
    bool              ip6_src_is_gateway;
    bool              nd_target_is_gateway;
    // The switch turned an NS into an NA: the ICMPv6 checksum is recomputed.
    bool              nd_reply;
    // BucketDispatch's set_gateway chose this gateway port: GatewayLiveness sends the frame
    // to the port's backup instead when the gateway's liveness frames have stopped.
    bool              to_bucket_gateway;
    port_num_t        bucket_gateway_port;
    // From SupergwIngress.gateway_liveness.gateway_backups (GatewayLiveness).
    bool              has_backup;
    port_num_t        backup_port;
    mac_addr_t        backup_mac;
    bit<32>           liveness_timeout;
    // The target's liveness clock now, and the time since the gateway's last liveness
    // frame in its units (0: never heard since the switch started).
    bit<32>           liveness_now;
    bit<32>           liveness_age;
}

#endif  // SUPERGW_HEADERS_P4
