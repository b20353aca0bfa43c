/* Packet headers and bounds-checked access helpers. Every pointer into the packet
 * comes from one of these and is re-derived after any helper that may move data. */
#ifndef SUPERGW_PKT_H
#define SUPERGW_PKT_H

#include <stdbool.h>
#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "p4constants.h"

struct sgw_eth {
	__u8 dst[6];
	__u8 src[6];
	__be16 type;
} __attribute__((packed));

/* Ethernet/IPv4 ARP body; the IPv4 fields are unaligned, access them with memcpy. */
struct sgw_arp {
	__be16 htype;
	__be16 ptype;
	__u8 hlen;
	__u8 plen;
	__be16 op;
	__u8 sha[6];
	__u8 spa[4];
	__u8 tha[6];
	__u8 tpa[4];
} __attribute__((packed));

#define SGW_ARP_LEN (sizeof(struct sgw_eth) + sizeof(struct sgw_arp))
#define SGW_IPV4_HDR_MIN 20 /* an IPv4 header without options */
#define SGW_IPV4_SADDR_OFF (sizeof(struct sgw_eth) + 12)

/* IPv4 header without options; loaded with sgw_load, never accessed in place. */
struct sgw_ipv4 {
	__u8 ver_ihl;
	__u8 tos;
	__be16 tot_len;
	__be16 id;
	__be16 frag_off; /* flags (3 bits) and fragment offset (13 bits) */
	__u8 ttl;
	__u8 protocol;
	__be16 check;
	__be32 saddr;
	__be32 daddr;
} __attribute__((packed));

struct sgw_udp {
	__be16 source;
	__be16 dest;
	__be16 len;
	__be16 check;
} __attribute__((packed));

/* The first 20 bytes of the IKE header (RFC 7296, 3.1): SPIs (network order), next
 * payload, version, exchange type, flags. */
struct sgw_ike {
	__u8 initiator_spi[8];
	__u8 responder_spi[8];
	__u8 next_payload;
	__u8 version;
	__u8 exchange_type;
	__u8 flags;
} __attribute__((packed));

/* An IPv6 address in network order, as four words (map keys, comparisons). */
struct sgw_ip6 {
	__be32 w[4];
};

/* IPv6 fixed header (RFC 8200 3); loaded with sgw_load, never accessed in place. */
struct sgw_ipv6 {
	__u8 ver_tc_flow[4]; /* version (4 bits), traffic class, flow label */
	__be16 payload_len;
	__u8 nexthdr;
	__u8 hop_limit;
	struct sgw_ip6 saddr;
	struct sgw_ip6 daddr;
} __attribute__((packed));

/* Neighbor Solicitation / Advertisement (RFC 4861 4.3, 4.4): ICMPv6 header, the flags
 * word (R, S, O of an NA; reserved in an NS), the target. */
struct sgw_nd_msg {
	__u8 type;
	__u8 code;
	__u16 checksum; /* as on the wire */
	__be32 flags;
	struct sgw_ip6 target;
} __attribute__((packed));

/* ND option header (RFC 4861 4.6): length in units of 8 bytes. */
struct sgw_nd_opt {
	__u8 type;
	__u8 len;
} __attribute__((packed));

/* Source/target link-layer address option on Ethernet (RFC 4861 4.6.1). */
struct sgw_nd_lladdr_opt {
	__u8 type;
	__u8 len; /* 1 */
	__u8 addr[6];
} __attribute__((packed));

#define SGW_IPV4_OFF sizeof(struct sgw_eth)
#define SGW_L4_OFF (SGW_IPV4_OFF + IPV4_HEADER_LEN) /* behind an IPv4 header without options */
#define SGW_UDP_PAYLOAD_OFF (SGW_L4_OFF + UDP_HEADER_LEN)
#define SGW_IPV4_FRAG_OFFSET_MASK 0x1fff

/* Copies len bytes at off into dst; false if the frame ends before off + len. The kernel
 * checks the bounds, so nothing past the frame is ever read. */
static __always_inline bool sgw_load(struct __sk_buff *skb, __u32 off, void *dst, __u32 len)
{
	return off + len <= skb->len && bpf_skb_load_bytes(skb, off, dst, len) == 0;
}

/* sgw_load for the hot path: straight from the linear area when it holds the bytes (no
 * helper call), else through the kernel. len must be a constant at every call site. */
static __always_inline bool sgw_load_fast(struct __sk_buff *skb, __u32 off, void *dst, __u32 len)
{
	void *data = (void *)(long)skb->data;

	if (data + off + len <= (void *)(long)skb->data_end) {
		__builtin_memcpy(dst, data + off, len);
		return true;
	}
	return sgw_load(skb, off, dst, len);
}

/* Verifier: the context may only be read at a constant offset from skb itself; this
 * keeps clang from computing &skb->data_end once and dereferencing that address later. */
#define sgw_ctx_barrier(skb) asm volatile("" : "+r"(skb))

/* Makes the first n bytes linear; false if the frame is shorter than n. */
static __always_inline bool sgw_pull(struct __sk_buff *skb, __u32 n)
{
	if ((void *)(long)skb->data + n <= (void *)(long)skb->data_end)
		return true;
	if (skb->len < n || bpf_skb_pull_data(skb, n))
		return false;
	sgw_ctx_barrier(skb);
	return (void *)(long)skb->data + n <= (void *)(long)skb->data_end;
}

/* Returns the Ethernet header if it is in the linear area, else NULL. */
static __always_inline struct sgw_eth *sgw_eth_hdr(struct __sk_buff *skb)
{
	struct sgw_eth *eth;

	sgw_ctx_barrier(skb);
	eth = (void *)(long)skb->data;
	if ((void *)(eth + 1) > (void *)(long)skb->data_end)
		return NULL;
	return eth;
}

/* Returns the ARP body if it is in the linear area, else NULL. */
static __always_inline struct sgw_arp *sgw_arp_hdr(struct __sk_buff *skb)
{
	struct sgw_arp *arp;

	sgw_ctx_barrier(skb);
	arp = (void *)(long)skb->data + sizeof(struct sgw_eth);
	if ((void *)(arp + 1) > (void *)(long)skb->data_end)
		return NULL;
	return arp;
}

/* The ethertype, or 0 when the Ethernet header is not in the linear area. */
static __always_inline __be16 sgw_eth_type(struct __sk_buff *skb)
{
	struct sgw_eth *eth = sgw_eth_hdr(skb);

	return eth ? eth->type : 0;
}

static __always_inline bool sgw_mac_is_group(const __u8 mac[6])
{
	return mac[0] & 1;
}

static __always_inline bool sgw_mac_eq(const __u8 a[6], const __u8 b[6])
{
	return a[0] == b[0] && a[1] == b[1] && a[2] == b[2] && a[3] == b[3] &&
	       a[4] == b[4] && a[5] == b[5];
}

static __always_inline void sgw_mac_copy(__u8 dst[6], const __u8 src[6])
{
	__builtin_memcpy(dst, src, 6);
}

#endif
