/* IPv6 Neighbor Discovery (RFC 4861): parsing and validation of ND messages, the
 * Neighbor Advertisement the switch answers with, and the rewrite of a link-layer
 * address option, with the ICMPv6 checksum over the IPv6 pseudo-header. Included by
 * supergw.c after struct sgw_md and its helpers. Bytes behind the Ethernet header are
 * read with sgw_load (kernel bounds check) and written with bpf_skb_store_bytes, never
 * through packet pointers, so the offsets may depend on the frame. */
#ifndef SUPERGW_ND_H
#define SUPERGW_ND_H

/* Protocol numbers (RFC 8200, 4443, 4861); p4constants.h defines those the P4 program uses. */
#ifndef ETHERTYPE_IPV6
#define ETHERTYPE_IPV6 0x86DD
#endif
#ifndef IP_PROTO_ICMPV6
#define IP_PROTO_ICMPV6 58
#endif
#ifndef ICMPV6_ROUTER_SOLICITATION
#define ICMPV6_ROUTER_SOLICITATION 133
#endif
#ifndef ICMPV6_ROUTER_ADVERTISEMENT
#define ICMPV6_ROUTER_ADVERTISEMENT 134
#endif
#ifndef ICMPV6_NEIGHBOR_SOLICITATION
#define ICMPV6_NEIGHBOR_SOLICITATION 135
#endif
#ifndef ICMPV6_NEIGHBOR_ADVERTISEMENT
#define ICMPV6_NEIGHBOR_ADVERTISEMENT 136
#endif
#ifndef ICMPV6_REDIRECT
#define ICMPV6_REDIRECT 137
#endif
#ifndef ND_OPT_SOURCE_LLADDR
#define ND_OPT_SOURCE_LLADDR 1
#endif
#ifndef ND_OPT_TARGET_LLADDR
#define ND_OPT_TARGET_LLADDR 2
#endif
#ifndef ND_NA_FLAG_ROUTER
#define ND_NA_FLAG_ROUTER 0x80
#endif
#ifndef ND_NA_FLAG_SOLICITED
#define ND_NA_FLAG_SOLICITED 0x40
#endif
#ifndef ND_NA_FLAG_OVERRIDE
#define ND_NA_FLAG_OVERRIDE 0x20
#endif

/* Contract names still to come from p4constants.h (placeholders). */
#ifndef DROP_REASON_MALFORMED_ND
#define DROP_REASON_MALFORMED_ND 19
#endif
#ifndef DROP_REASON_ND_SPOOF_GATEWAY_IP
#define DROP_REASON_ND_SPOOF_GATEWAY_IP 20
#endif
#ifndef DROP_REASON_GATEWAY_ROUTER_ND
#define DROP_REASON_GATEWAY_ROUTER_ND 21
#endif
#ifndef PUNT_REASON_GATEWAY_ND_MISS
#define PUNT_REASON_GATEWAY_ND_MISS 3
#endif

/* Fixed layout: the ND message directly behind a 40-byte IPv6 header (an extension
 * header in front of ICMPv6 makes the frame plain IPv6, as in the P4 parser). */
#define SGW_IP6_OFF sizeof(struct sgw_eth)
#define SGW_ICMP6_OFF (SGW_IP6_OFF + sizeof(struct sgw_ipv6))
#define SGW_ND_MAX_OPTS 8 /* options looked at; an NS or NA carries one or two */

/* Length of the NA the switch sends: header, target, one link-layer address option. */
#define SGW_NA_ICMP_LEN (sizeof(struct sgw_nd_msg) + sizeof(struct sgw_nd_lladdr_opt))
#define SGW_NA_FRAME_LEN (SGW_ICMP6_OFF + SGW_NA_ICMP_LEN)

/* The all-nodes address ff02::1 and its MAC 33:33:00:00:00:01 (RFC 2464). */
static const __u8 sgw_ip6_all_nodes[16] = { 0xff, 0x02, [15] = 0x01 };
static const __u8 sgw_mac_all_nodes[6] = { 0x33, 0x33, 0, 0, 0, 0x01 };

static __always_inline bool sgw_ip6_eq(const struct sgw_ip6 *a, const struct sgw_ip6 *b)
{
	return a->w[0] == b->w[0] && a->w[1] == b->w[1] && a->w[2] == b->w[2] && a->w[3] == b->w[3];
}

static __always_inline bool sgw_ip6_is_unspecified(const struct sgw_ip6 *a)
{
	return !(a->w[0] | a->w[1] | a->w[2] | a->w[3]);
}

static __always_inline bool sgw_ip6_is_multicast(const struct sgw_ip6 *a)
{
	return (bpf_ntohl(a->w[0]) >> 24) == 0xff;
}

/* ff02::1:ffXX:XXXX (RFC 4291 2.7.1), for any XX:XXXX. */
static __always_inline bool sgw_ip6_is_solicited_node(const struct sgw_ip6 *a)
{
	return a->w[0] == bpf_htonl(0xff020000) && a->w[1] == 0 && a->w[2] == bpf_htonl(1) &&
	       (bpf_ntohl(a->w[3]) >> 24) == 0xff;
}

/* Reads the IPv6 header and, when it carries an ICMPv6 ND message (types 133-137),
 * the fields of md the ND stages use. Returns the ND type, or 0 for any other frame
 * (not IPv6, truncated header, another next header or ICMPv6 type). */
static __always_inline __u8 sgw_parse_nd(struct __sk_buff *skb, struct sgw_md *md)
{
	struct sgw_ipv6 ip;
	__u8 type;

	if (!sgw_load(skb, SGW_IP6_OFF, &ip, sizeof(ip)))
		return 0;
	if ((ip.ver_tc_flow[0] >> 4) != 6)
		return 0;
	md->ip6_src = ip.saddr;
	md->ip6_dst = ip.daddr;
	md->is_ip6 = 1;
	if (ip.nexthdr != IP_PROTO_ICMPV6 || !sgw_load(skb, SGW_ICMP6_OFF, &type, 1))
		return 0;
	if (type < ICMPV6_ROUTER_SOLICITATION || type > ICMPV6_REDIRECT)
		return 0;
	md->nd_type = type;
	md->nd_hop_limit = ip.hop_limit;
	md->nd_len = bpf_ntohs(ip.payload_len);
	return type;
}

/* Fixed part of each ND message (RFC 4861 4.1-4.5): options start behind it. */
static __always_inline __u32 sgw_nd_fixed_len(__u8 type)
{
	switch (type) {
	case ICMPV6_ROUTER_SOLICITATION:
		return 8;
	case ICMPV6_ROUTER_ADVERTISEMENT:
		return 16;
	case ICMPV6_NEIGHBOR_SOLICITATION:
	case ICMPV6_NEIGHBOR_ADVERTISEMENT:
		return 24;
	default: /* redirect */
		return 40;
	}
}

/* Walks the options: each has a non-zero length and lies inside the message (RFC 4861
 * 7.1.1, 7.1.2). Records the offset of the source (NS, RS, RA) or target (NA) link-layer
 * address option in md->nd_lladdr_off (0: none). False if the options are malformed or
 * more than SGW_ND_MAX_OPTS. */
static __always_inline bool sgw_nd_walk_options(struct __sk_buff *skb, struct sgw_md *md)
{
	__u8 want = md->nd_type == ICMPV6_NEIGHBOR_ADVERTISEMENT ? ND_OPT_TARGET_LLADDR
								  : ND_OPT_SOURCE_LLADDR;
	__u32 end = SGW_ICMP6_OFF + md->nd_len;
	__u32 off = SGW_ICMP6_OFF + sgw_nd_fixed_len(md->nd_type);

	md->nd_lladdr_off = 0;
	for (int i = 0; i < SGW_ND_MAX_OPTS; i++) {
		struct sgw_nd_opt opt;

		if (off == end)
			return true;
		if (off + sizeof(opt) > end || !sgw_load(skb, off, &opt, sizeof(opt)) || !opt.len)
			return false;
		if (opt.type == want && opt.len == 1 && !md->nd_lladdr_off)
			md->nd_lladdr_off = off;
		off += opt.len * 8;
		if (off > end)
			return false;
	}
	return off == end;
}

/* RFC 4861 7.1.1 / 7.1.2 (and 6.1.1 / 6.1.2, 8.1 for the router messages): hop limit
 * 255, code 0, the message at least its fixed length and inside the frame, options
 * well formed; for NS and NA a target that is not multicast; an NS from :: goes to a
 * solicited-node address and carries no source link-layer option; an NA to a multicast
 * address has S clear. Fills md->nd_target, md->nd_flags and md->nd_lladdr_off. */
static __always_inline bool sgw_nd_valid(struct __sk_buff *skb, struct sgw_md *md)
{
	struct sgw_nd_msg msg;
	__u8 type = md->nd_type;

	if (md->nd_hop_limit != 255 || md->nd_len < sgw_nd_fixed_len(type) ||
	    SGW_ICMP6_OFF + md->nd_len > md->len)
		return false;
	if (type != ICMPV6_NEIGHBOR_SOLICITATION && type != ICMPV6_NEIGHBOR_ADVERTISEMENT) {
		__u8 code;

		return sgw_load(skb, SGW_ICMP6_OFF + 1, &code, 1) && code == 0 &&
		       sgw_nd_walk_options(skb, md);
	}
	if (!sgw_load(skb, SGW_ICMP6_OFF, &msg, sizeof(msg)) || msg.code != 0)
		return false;
	md->nd_target = msg.target;
	md->nd_flags = msg.flags[0];
	if (sgw_ip6_is_multicast(&md->nd_target) || !sgw_nd_walk_options(skb, md))
		return false;
	if (type == ICMPV6_NEIGHBOR_SOLICITATION && sgw_ip6_is_unspecified(&md->ip6_src))
		return sgw_ip6_is_solicited_node(&md->ip6_dst) && !md->nd_lladdr_off;
	if (type == ICMPV6_NEIGHBOR_ADVERTISEMENT && sgw_ip6_is_multicast(&md->ip6_dst))
		return !(md->nd_flags & ND_NA_FLAG_SOLICITED);
	return true;
}

/* The ICMPv6 checksum of an ND message of len bytes at msg (a multiple of 4) from src to
 * dst: the ones' complement sum over the pseudo-header (RFC 8200 8.1: source,
 * destination, upper-layer length, next header 58) and the message, its checksum field
 * zero. bpf_csum_diff sums in the CPU's byte order; the 16-bit result is stored as is. */
static __always_inline __u16 sgw_icmp6_csum(const struct sgw_ip6 *src, const struct sgw_ip6 *dst,
					    void *msg, __u32 len)
{
	__s64 sum;
	__u32 s;

	/* The pseudo-header's last two words: length and next header, in network order. */
	sum = bpf_csum_diff(NULL, 0, (void *)src, 16, bpf_htonl(len + IP_PROTO_ICMPV6));
	sum = bpf_csum_diff(NULL, 0, (void *)dst, 16, (__u32)sum);
	sum = bpf_csum_diff(NULL, 0, msg, len, (__u32)sum);
	s = (__u32)sum;
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return (__u16)~s;
}

/* The NA the switch sends, header to option, built on the stack and written in one
 * store. */
struct sgw_na_frame {
	struct sgw_ipv6 ip;
	struct sgw_nd_msg na;
	struct sgw_nd_lladdr_opt tlla;
} __attribute__((packed));

/* Turns the NS in the frame into the Neighbor Advertisement "target is-at mac" and
 * sends it back out of the ingress port (RFC 4861 7.2.4): to the soliciting host, or,
 * for a DAD probe (source ::), to all nodes with S clear (RFC 4862 5.4.3: the address
 * is defended). The frame is cut or grown to exactly the NA (a link-layer option, no
 * other). flags: ND_NA_FLAG_ROUTER for the gateway's addresses; S and O are added here. */
static __always_inline int sgw_nd_reply(struct __sk_buff *skb, struct sgw_md *md, const __u8 mac[6],
					__u8 flags)
{
	bool dad = sgw_ip6_is_unspecified(&md->ip6_src);
	struct sgw_na_frame f = {};
	struct sgw_ip6 dst = md->ip6_src;
	struct sgw_eth *eth;
	__u8 dst_mac[6];

	if (dad) {
		__builtin_memcpy(&dst, sgw_ip6_all_nodes, 16);
		sgw_mac_copy(dst_mac, sgw_mac_all_nodes);
	} else {
		eth = sgw_eth_hdr(skb);
		if (!eth)
			return sgw_drop(md, DROP_REASON_MALFORMED_FRAME);
		sgw_mac_copy(dst_mac, eth->src);
	}
	f.ip.ver_tc_flow[0] = 0x60;
	f.ip.payload_len = bpf_htons(SGW_NA_ICMP_LEN);
	f.ip.nexthdr = IP_PROTO_ICMPV6;
	f.ip.hop_limit = 255;
	f.ip.saddr = md->nd_target;
	f.ip.daddr = dst;
	f.na.type = ICMPV6_NEIGHBOR_ADVERTISEMENT;
	f.na.flags[0] = flags | ND_NA_FLAG_OVERRIDE | (dad ? 0 : ND_NA_FLAG_SOLICITED);
	f.na.target = md->nd_target;
	f.tlla.type = ND_OPT_TARGET_LLADDR;
	f.tlla.len = 1;
	sgw_mac_copy(f.tlla.addr, mac);
	f.na.checksum = sgw_icmp6_csum(&md->nd_target, &dst, &f.na, SGW_NA_ICMP_LEN);

	if (skb->len != SGW_NA_FRAME_LEN && bpf_skb_change_tail(skb, SGW_NA_FRAME_LEN, 0))
		return TC_ACT_SHOT;
	if (bpf_skb_store_bytes(skb, SGW_IP6_OFF, &f, sizeof(f), BPF_F_RECOMPUTE_CSUM))
		return TC_ACT_SHOT;
	eth = sgw_eth_hdr(skb);
	if (!eth)
		return sgw_drop(md, DROP_REASON_MALFORMED_FRAME);
	sgw_mac_copy(eth->dst, dst_mac);
	sgw_mac_copy(eth->src, mac);
	md->len = SGW_NA_FRAME_LEN;
	return sgw_output(md, md->port, md->ifindex);
}

/* Replaces the address in the link-layer option at md->nd_lladdr_off with mac and
 * updates the ICMPv6 checksum by the difference (RFC 1624): the pseudo-header and the
 * rest of the message are unchanged. Does nothing when there is no such option. */
static __always_inline bool sgw_nd_rewrite_lladdr(struct __sk_buff *skb, struct sgw_md *md,
						  const __u8 mac[6])
{
	struct sgw_nd_lladdr_opt old, new;
	__u32 off = md->nd_lladdr_off;
	__u16 check;
	__s64 sum;
	__u32 s;

	if (!off)
		return true;
	if (!sgw_load(skb, off, &old, sizeof(old)) ||
	    !sgw_load(skb, SGW_ICMP6_OFF + 2, &check, sizeof(check)))
		return false;
	new = old;
	sgw_mac_copy(new.addr, mac);
	sum = bpf_csum_diff((void *)&old, sizeof(old), (void *)&new, sizeof(new), (__u16)~check);
	s = (__u32)sum;
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	check = (__u16)~s;
	return bpf_skb_store_bytes(skb, off, &new, sizeof(new), BPF_F_RECOMPUTE_CSUM) == 0 &&
	       bpf_skb_store_bytes(skb, SGW_ICMP6_OFF + 2, &check, sizeof(check), BPF_F_RECOMPUTE_CSUM) == 0;
}

static __always_inline bool sgw_is_gateway_ip6(const struct sgw_ip6 *a)
{
	return bpf_map_lookup_elem(&sgw_gateway_ip6s, a) != NULL;
}

/* Stage 4, IPv6: an ND message must be valid (RFC 4861 7.1); other IPv6 passes. */
static __always_inline int sgw_validate_nd(struct __sk_buff *skb, struct sgw_md *md, __be16 type)
{
	if ((md->role != PORT_ROLE_HOST && md->role != PORT_ROLE_GATEWAY) ||
	    type != bpf_htons(ETHERTYPE_IPV6) || !sgw_parse_nd(skb, md))
		return SGW_CONTINUE;
	if (!sgw_nd_valid(skb, md))
		return sgw_drop(md, DROP_REASON_MALFORMED_ND);
	return SGW_CONTINUE;
}

/* Host port, before learning (the IPv6 twin of the ARP guard): ND from a gateway
 * address, or an NA claiming one, is a host posing as the gateway. A DAD probe for a
 * gateway address (from ::) claims nothing and is answered. */
static __always_inline int sgw_host_nd_guard(struct sgw_md *md)
{
	if (!md->nd_type)
		return SGW_CONTINUE;
	if (sgw_is_gateway_ip6(&md->ip6_src) ||
	    (md->nd_type == ICMPV6_NEIGHBOR_ADVERTISEMENT && sgw_is_gateway_ip6(&md->nd_target)))
		return sgw_drop(md, DROP_REASON_ND_SPOOF_GATEWAY_IP);
	return SGW_CONTINUE;
}

/* Host port: an NS for a gateway address, multicast or unicast (NUD to the vmac), is
 * answered with vmac(bucket(src)) as a router. */
static __always_inline int sgw_host_nd(struct __sk_buff *skb, struct sgw_md *md)
{
	struct sgw_eth *eth;
	__u8 vmac[6];

	if (md->nd_type != ICMPV6_NEIGHBOR_SOLICITATION || !sgw_is_gateway_ip6(&md->nd_target))
		return SGW_CONTINUE;
	eth = sgw_eth_hdr(skb);
	if (!eth)
		return sgw_drop(md, DROP_REASON_MALFORMED_FRAME);
	sgw_vmac_of(md->cfg, eth->src, vmac);
	return sgw_nd_reply(skb, md, vmac, ND_NA_FLAG_ROUTER);
}

/* Gateway port: an NS for a known host address is answered with the host's MAC; for
 * another address it goes to the controller. Router messages never reach the LAN. */
static __always_inline int sgw_gateway_nd(struct __sk_buff *skb, struct sgw_md *md)
{
	const struct sgw_mac *host = NULL;

	if (!md->nd_type)
		return SGW_CONTINUE;
	if (md->nd_type == ICMPV6_NEIGHBOR_SOLICITATION) {
		if (!sgw_is_gateway_ip6(&md->nd_target))
			host = bpf_map_lookup_elem(&sgw_host_ip6s, &md->nd_target);
		if (!host)
			return sgw_punt(skb, md, PUNT_REASON_GATEWAY_ND_MISS);
		return sgw_nd_reply(skb, md, host->addr, 0);
	}
	if (md->nd_type == ICMPV6_NEIGHBOR_ADVERTISEMENT) {
		struct sgw_eth *eth = sgw_eth_hdr(skb);
		__u8 vmac[6];

		if (!eth)
			return sgw_drop(md, DROP_REASON_MALFORMED_FRAME);
		if (sgw_mac_is_group(eth->dst))
			return SGW_CONTINUE;
		/* As the source MAC below: the host must learn the vmac, not this gateway. */
		sgw_vmac_of(md->cfg, eth->dst, vmac);
		if (!sgw_nd_rewrite_lladdr(skb, md, vmac))
			return sgw_drop(md, DROP_REASON_MALFORMED_ND);
		return SGW_CONTINUE;
	}
	return sgw_drop(md, DROP_REASON_GATEWAY_ROUTER_ND);
}

#endif
