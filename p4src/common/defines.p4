// Types and constants shared by every supergw target (v1model today, TNA later).
// p4src/gen_constants.py parses the `const` lines below into Python, Go and C, so keep
// them on one line each: `const <type> <NAME> = <integer>;`.

#ifndef SUPERGW_DEFINES_P4
#define SUPERGW_DEFINES_P4

#include "size.p4"

typedef bit<48> mac_addr_t;
typedef bit<32> ipv4_addr_t;
typedef bit<128> ipv6_addr_t;
// P4Runtime port number: v1model's bit<9> widened so all targets share one P4Info.
typedef bit<16> port_num_t;
typedef bit<8>  port_role_t;
typedef bit<8>  drop_reason_t;
typedef bit<16> punt_reason_t;
typedef bit<16> bucket_t;
typedef bit<16> mcast_group_t;
typedef bit<8>  bucket_hash_t;

// Packet-out frames are only accepted from this port (BMv2: --cpu-port 255).
const port_num_t CPU_PORT = 255;
// PRE multicast group the controller fills with every host port (instance 0).
const mcast_group_t HOST_FLOOD_GROUP = 1;
// The outside switch's floods (docs/pipeline-contract.md, "Outside switch"): what an uplink
// floods to (every GATEWAY_OUTSIDE port) and what a gateway's outside port floods to (every
// UPLINK port), each filled by the controller like HOST_FLOOD_GROUP (instance 0).
const mcast_group_t GATEWAY_OUTSIDE_FLOOD_GROUP = 2;
const mcast_group_t UPLINK_FLOOD_GROUP = 3;

const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<16> ETHERTYPE_ARP = 0x0806;
const bit<16> ETHERTYPE_IPV6 = 0x86DD;
// A front-port frame with this ethertype is dropped: it could be mistaken for a
// controller packet-out by whatever sits behind the CPU port.
const bit<16> ETHERTYPE_PACKET_OUT = 0xBF01;
// A gateway's liveness frame (docs/pipeline-contract.md, "Gateway liveness"): IEEE 802
// Local Experimental Ethertype 2 (tests and bench/controller's probe use the first, 0x88B5),
// sent by each gateway's agent out of its LAN port every few ms.
const bit<16> ETHERTYPE_LIVENESS = 0x88B6;

// Remote access on the outside switch: what tells IKE, ESP and NAT-T apart (RFC 7296,
// RFC 4303, RFC 3948). IKE and ESP are only looked into in IPv4 headers without options.
const bit<4> IPV4_IHL_NO_OPTIONS = 5;
const bit<16> IPV4_HEADER_LEN = 20;
const bit<8> IP_PROTO_UDP = 17;
const bit<8> IP_PROTO_ESP = 50;
const bit<16> UDP_HEADER_LEN = 8;
const bit<16> UDP_PORT_IKE = 500;
const bit<16> UDP_PORT_IKE_NAT_T = 4500;
// On port 4500 an IKE message follows a zero 4-byte non-ESP marker; a non-zero first word is
// an ESP SPI. A NAT-T keepalive is the single byte 0xFF.
const bit<16> NON_ESP_MARKER_LEN = 4;
const bit<8> NAT_T_KEEPALIVE = 0xFF;
// The IKE header (both SPIs, next payload, version, exchange type, flags, message ID, length).
const bit<16> IKE_HEADER_LEN = 28;
// IKE header flag I: the message comes from the original initiator of the IKE SA.
const bit<8> IKE_FLAG_INITIATOR = 0x08;
// ESP header: SPI and sequence number.
const bit<16> ESP_HEADER_LEN = 8;

// IPv6 Neighbor Discovery (RFC 4861; docs/pipeline-contract.md, "IPv6 Neighbor Discovery").
// ND is only recognised as ICMPv6 directly behind the IPv6 header.
const bit<4> IPV6_VERSION = 6;
const bit<8> IP_PROTO_ICMPV6 = 58;
const bit<8> ICMPV6_TYPE_RS = 133;
const bit<8> ICMPV6_TYPE_RA = 134;
const bit<8> ICMPV6_TYPE_NS = 135;
const bit<8> ICMPV6_TYPE_NA = 136;
const bit<8> ICMPV6_TYPE_REDIRECT = 137;
const bit<8> ND_HOP_LIMIT = 255;
// The ICMPv6 part (IPv6 payload length) of an NS or NA without options, and with one
// 8-byte option (source/target link-layer address, or the DAD nonce of RFC 7527).
const bit<16> ND_LEN_NO_OPTION = 24;
const bit<16> ND_LEN_ONE_OPTION = 32;
const bit<8> ND_OPTION_TARGET_LL_ADDR = 2;
// Option length in units of 8 bytes: one option of 8 bytes.
const bit<8> ND_OPTION_LEN_8 = 1;
// NA flags, the first 32 bits of the message after the checksum.
const bit<32> ND_FLAG_ROUTER = 0x80000000;
const bit<32> ND_FLAG_SOLICITED = 0x40000000;
const bit<32> ND_FLAG_OVERRIDE = 0x20000000;
// A DAD NA goes to all-nodes ff02::1 (RFC 4861 7.2.4); its Ethernet group address (RFC 2464).
const bit<48> ALL_NODES_MAC = 0x333300000001;

const bit<16> ARP_HTYPE_ETHERNET = 1;
const bit<16> ARP_PTYPE_IPV4 = 0x0800;
const bit<8> ARP_HLEN_ETHERNET = 6;
const bit<8> ARP_PLEN_IPV4 = 4;
const bit<16> ARP_OPER_REQUEST = 1;
const bit<16> ARP_OPER_REPLY = 2;

// The BMv2 implementation ignores the receiver; kept stable for other targets.
const bit<32> LEARN_DIGEST_RECEIVER = 1;

// PortRole: what sits behind a port (table port_roles, action param `role`).
const port_role_t PORT_ROLE_UNKNOWN = 0;
const port_role_t PORT_ROLE_HOST = 1;
const port_role_t PORT_ROLE_GATEWAY = 2;
// The outside switch: ports towards the internet (remote clients, the router) and the
// gateways' outside (WAN) interfaces, which hold the public address IP_P.
const port_role_t PORT_ROLE_UPLINK = 3;
const port_role_t PORT_ROLE_GATEWAY_OUTSIDE = 4;

// BucketHash: how a host MAC becomes its bucket (param `bucket_hash` of
// set_dispatch_config); bucket = hash(mac) & bucket_mask. Any other value is undefined
// (the eBPF target refuses it; v1model and TNA then drop every frame NOT_CONFIGURED).
// CRC32: the standard CRC-32 (IEEE 802.3) over the 6 MAC bytes in network order.
// IDENTITY: the MAC's low 16 bits, the clustering paper's h(m) = base | (m % K).
const bucket_hash_t BUCKET_HASH_CRC32 = 0;
const bucket_hash_t BUCKET_HASH_IDENTITY = 1;

// DropReason: index into SupergwIngress.drop_counter (size DROP_COUNTER_SIZE).
// Values are part of the contract: never renumber, only append.
const drop_reason_t DROP_REASON_NONE = 0;
const drop_reason_t DROP_REASON_ARP_SPOOF_GATEWAY_IP = 1;
const drop_reason_t DROP_REASON_BUCKET_UNASSIGNED = 2;
const drop_reason_t DROP_REASON_GATEWAY_BROADCAST = 3;
const drop_reason_t DROP_REASON_MALFORMED_ARP = 4;
const drop_reason_t DROP_REASON_PACKET_OUT_FROM_FRONT_PORT = 5;
const drop_reason_t DROP_REASON_UNKNOWN_PORT = 6;
const drop_reason_t DROP_REASON_MALFORMED_FRAME = 7;
const drop_reason_t DROP_REASON_NOT_CONFIGURED = 8;
const drop_reason_t DROP_REASON_PACKET_OUT_BAD_PORT = 9;
const drop_reason_t DROP_REASON_HAIRPIN = 10;
const drop_reason_t DROP_REASON_GATEWAY_TO_GATEWAY = 11;
const drop_reason_t DROP_REASON_ARP_SPOOF_PUBLIC_IP = 12;
const drop_reason_t DROP_REASON_RA_NOT_CONFIGURED = 13;
const drop_reason_t DROP_REASON_MALFORMED_IKE = 14;
const drop_reason_t DROP_REASON_MALFORMED_ESP = 15;
const drop_reason_t DROP_REASON_IKE_SPI_UNKNOWN = 16;
const drop_reason_t DROP_REASON_ESP_SPI_UNKNOWN = 17;
const drop_reason_t DROP_REASON_UPLINK_TO_UPLINK = 18;
// IPv6 ND (docs/pipeline-contract.md, "IPv6 Neighbor Discovery on the LAN").
const drop_reason_t DROP_REASON_ND_SPOOF_GATEWAY_IP = 19;
const drop_reason_t DROP_REASON_ND_UNSUPPORTED = 20;
const drop_reason_t DROP_REASON_GATEWAY_ND_GATEWAY_IP = 21;
const drop_reason_t DROP_REASON_GATEWAY_ROUTER_ND = 22;

// PuntReason: field `reason` of the packet_in controller header.
const punt_reason_t PUNT_REASON_NONE = 0;
const punt_reason_t PUNT_REASON_GATEWAY_ARP_MISS = 1;
const punt_reason_t PUNT_REASON_GATEWAY_ARP_REPLY = 2;
const punt_reason_t PUNT_REASON_GATEWAY_ND_MISS = 3;
const punt_reason_t PUNT_REASON_GATEWAY_NA = 4;
const punt_reason_t PUNT_REASON_ROUTER_SOLICITATION = 5;

#endif  // SUPERGW_DEFINES_P4
