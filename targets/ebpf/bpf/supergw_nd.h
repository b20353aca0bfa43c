/* IPv6 Neighbor Discovery on the LAN (docs/pipeline-contract.md, "IPv6 Neighbor Discovery
 * on the LAN"; p4src's NdConfig, NdGuard, NdResponder and the IPv6 half of Learning): the
 * classification of IPv6 frames, the spoof guards, the NA the switch answers with (built on
 * the stack, ICMPv6 checksum over the pseudo-header with bpf_csum_diff) and the learning of
 * host IPv6 addresses. Included by supergw.c after struct sgw_md and its helpers. Bytes
 * behind the Ethernet header are read with sgw_load (kernel bounds check) and written with
 * bpf_skb_store_bytes, never through packet pointers. */
#ifndef SUPERGW_ND_H
#define SUPERGW_ND_H

/* ND directly behind a 40-byte IPv6 header; behind an extension header it is plain IPv6. */
#define SGW_IP6_OFF sizeof(struct sgw_eth)
#define SGW_ICMP6_OFF (SGW_IP6_OFF + sizeof(struct sgw_ipv6))
#define SGW_ND_OPT_OFF (SGW_ICMP6_OFF + sizeof(struct sgw_nd_msg))

/* The NA the switch sends: header, target, one link-layer address option. */
#define SGW_NA_FRAME_LEN (SGW_ICMP6_OFF + ND_LEN_ONE_OPTION)

/* The all-nodes address ff02::1 (RFC 4291 2.7.1) and its MAC (ALL_NODES_MAC, RFC 2464 7). */
static const __u8 sgw_ip6_all_nodes[16] = { 0xff, 0x02, [15] = 0x01 };
static const __u8 sgw_mac_all_nodes[6] = { 0x33, 0x33, 0, 0, 0, 0x01 };

_Static_assert(sizeof(struct sgw_nd_msg) == ND_LEN_NO_OPTION, "NS/NA without options");
_Static_assert(sizeof(struct sgw_nd_msg) + sizeof(struct sgw_nd_lladdr_opt) == ND_LEN_ONE_OPTION,
	       "NS/NA with one option");

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

/* A gateway address: LL_G or GUA_G of nd_settings; :: (unset) matches nothing. */
static __always_inline bool sgw_is_gateway_ip6(const struct sgw_nd_config *nd, const struct sgw_ip6 *a)
{
	return nd && !sgw_ip6_is_unspecified(a) &&
	       (sgw_ip6_eq(a, &nd->link_local_ip6) || sgw_ip6_eq(a, &nd->global_ip6));
}

/* An NS the switch can answer in place: hop limit 255, code 0, and by the payload length
 * no option or exactly one 8-byte option, all of it in the frame. */
static __always_inline bool sgw_ns_answerable(struct __sk_buff *skb, const struct sgw_ipv6 *ip,
					      const struct sgw_nd_msg *ns)
{
	struct sgw_nd_opt opt;
	__u16 len = bpf_ntohs(ip->payload_len);

	if (ip->hop_limit != ND_HOP_LIMIT || ns->code != 0)
		return false;
	if (len == ND_LEN_NO_OPTION)
		return true;
	return len == ND_LEN_ONE_OPTION && SGW_ICMP6_OFF + ND_LEN_ONE_OPTION <= skb->len &&
	       sgw_load(skb, SGW_ND_OPT_OFF, &opt, sizeof(opt)) && opt.len == ND_OPTION_LEN_8;
}

/* NdConfig and the parser's IPv6 part, for HOST and GATEWAY ports: fills the md fields of
 * an IPv6 frame (version 6, a whole header) and, for ND directly behind it, its type, target
 * and whether the switch can answer it. Never decides a frame. */
static __always_inline void sgw_classify_ip6(struct __sk_buff *skb, struct sgw_md *md, __be16 type)
{
	__u32 zero = 0;
	const struct sgw_nd_config *nd;
	struct sgw_nd_msg msg;
	struct sgw_ipv6 ip;

	if ((md->role != PORT_ROLE_HOST && md->role != PORT_ROLE_GATEWAY) ||
	    type != bpf_htons(ETHERTYPE_IPV6) || !sgw_load_fast(skb, SGW_IP6_OFF, &ip, sizeof(ip)) ||
	    (ip.ver_tc_flow[0] >> 4) != IPV6_VERSION)
		return;
	nd = bpf_map_lookup_elem(&sgw_nd_settings, &zero);
	if (nd && !nd->configured)
		nd = NULL;
	md->is_ip6 = 1;
	md->ip6_src = ip.saddr;
	md->ip6_src_is_gateway = sgw_is_gateway_ip6(nd, &md->ip6_src);
	/* The ICMPv6 type, code and checksum must be in the frame, as in the P4 parser. */
	if (ip.nexthdr != IP_PROTO_ICMPV6 || !sgw_load_fast(skb, SGW_ICMP6_OFF, &msg, 4) ||
	    msg.type < ICMPV6_TYPE_RS || msg.type > ICMPV6_TYPE_REDIRECT)
		return;
	md->nd_type = msg.type;
	if ((msg.type != ICMPV6_TYPE_NS && msg.type != ICMPV6_TYPE_NA) ||
	    !sgw_load(skb, SGW_ICMP6_OFF, &msg, sizeof(msg)))
		return;
	md->nd_target = msg.target;
	md->nd_target_is_gateway = sgw_is_gateway_ip6(nd, &md->nd_target);
	md->ns_answerable = msg.type == ICMPV6_TYPE_NS && sgw_ns_answerable(skb, &ip, &msg);
	__builtin_memcpy(&md->ip6_vtf, ip.ver_tc_flow, 4);
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

/* Turns the answerable NS in the frame into the Neighbor Advertisement "target is-at mac"
 * (the contract's "The NA the switch builds") and sends it back out of the ingress port
 * (RFC 4861 7.2.4): to the soliciting host, or, for a DAD probe (source ::), to all nodes
 * with S clear (RFC 4862 5.4.3: the address is defended). The frame becomes exactly the
 * NA, grown from a 24-byte NS or cut behind it. router: ND_FLAG_ROUTER for a gateway
 * address, 0 for a host's; S and O are added here. */
static __always_inline int sgw_nd_reply(struct __sk_buff *skb, struct sgw_md *md, const __u8 mac[6],
					__u32 router)
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
	__builtin_memcpy(f.ip.ver_tc_flow, &md->ip6_vtf, 4);
	f.ip.payload_len = bpf_htons(ND_LEN_ONE_OPTION);
	f.ip.nexthdr = IP_PROTO_ICMPV6;
	f.ip.hop_limit = ND_HOP_LIMIT;
	f.ip.saddr = md->nd_target;
	f.ip.daddr = dst;
	f.na.type = ICMPV6_TYPE_NA;
	f.na.flags = bpf_htonl(router | ND_FLAG_OVERRIDE | (dad ? 0 : ND_FLAG_SOLICITED));
	f.na.target = md->nd_target;
	f.tlla.type = ND_OPTION_TARGET_LL_ADDR;
	f.tlla.len = ND_OPTION_LEN_8;
	sgw_mac_copy(f.tlla.addr, mac);
	f.na.checksum = sgw_icmp6_csum(&md->nd_target, &dst, &f.na, ND_LEN_ONE_OPTION);

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

/* NdGuard. Host port, before learning (the IPv6 twin of the ARP guard): an NS from a
 * gateway address, or an NA claiming one, whatever its shape. Gateway port: RS, RA and
 * Redirect (only the controller advertises the router). */
static __always_inline int sgw_nd_guard(struct sgw_md *md)
{
	if (!md->nd_type)
		return SGW_CONTINUE;
	if (md->role == PORT_ROLE_HOST) {
		if ((md->nd_type == ICMPV6_TYPE_NS && md->ip6_src_is_gateway) ||
		    (md->nd_type == ICMPV6_TYPE_NA && md->nd_target_is_gateway))
			return sgw_drop(md, DROP_REASON_ND_SPOOF_GATEWAY_IP);
		return SGW_CONTINUE;
	}
	if (md->nd_type == ICMPV6_TYPE_RS || md->nd_type == ICMPV6_TYPE_RA ||
	    md->nd_type == ICMPV6_TYPE_REDIRECT)
		return sgw_drop(md, DROP_REASON_GATEWAY_ROUTER_ND);
	return SGW_CONTINUE;
}

/* Learning, IPv6 half (host ports): every (IPv6 source, MAC) a host uses, its source
 * neither ::, multicast nor a gateway address; a miss sends learn_ip6_digest_t (at most
 * one per pair per hold-off) and the frame goes on. */
static __always_inline void sgw_learn_ip6(struct __sk_buff *skb, struct sgw_md *md)
{
	struct sgw_learn_ip6_key key = { .ip6 = md->ip6_src };
	struct sgw_eth *eth = sgw_eth_hdr(skb);
	struct sgw_event *e;
	__u64 now;

	if (!eth || !md->is_ip6 || sgw_ip6_is_unspecified(&md->ip6_src) ||
	    sgw_ip6_is_multicast(&md->ip6_src) || md->ip6_src_is_gateway)
		return;
	sgw_mac_copy(key.mac, eth->src);
	now = md->coarse_ns ? md->coarse_ns : bpf_ktime_get_coarse_ns();
	if (!sgw_learn_miss(&sgw_learned_ip6s, &sgw_digest_ip6_sent, &key, now))
		return;
	e = bpf_ringbuf_reserve(&sgw_events, sizeof(*e), 0);
	if (!e)
		return;
	__builtin_memset(e, 0, sizeof(*e));
	e->kind = SGW_EVENT_DIGEST_IP6;
	e->port = md->port;
	sgw_mac_copy(e->src_mac, key.mac);
	__builtin_memcpy(e->src_ip6, &key.ip6, 16);
	bpf_ringbuf_submit(e, 0);
	bpf_map_update_elem(&sgw_digest_ip6_sent, &key, &now, BPF_ANY);
}

/* NdResponder. Host port: RS to the controller; an NS for a gateway address answered with
 * vmac(bucket(src MAC)) as a router, or ND_UNSUPPORTED. Gateway port: NA to the controller;
 * an NS for a gateway address is GATEWAY_ND_GATEWAY_IP (the gateways' own DAD must not
 * fire), else answered from host_ip6s or punted. Other ND continues as any frame. */
static __always_inline int sgw_nd_respond(struct __sk_buff *skb, struct sgw_md *md)
{
	const struct sgw_mac *host;
	struct sgw_eth *eth;
	__u8 vmac[6];

	if (md->role == PORT_ROLE_HOST) {
		if (md->nd_type == ICMPV6_TYPE_RS)
			return sgw_punt(skb, md, PUNT_REASON_ROUTER_SOLICITATION);
		if (md->nd_type != ICMPV6_TYPE_NS || !md->nd_target_is_gateway)
			return SGW_CONTINUE;
		if (!md->ns_answerable)
			return sgw_drop(md, DROP_REASON_ND_UNSUPPORTED);
		eth = sgw_eth_hdr(skb);
		if (!eth)
			return sgw_drop(md, DROP_REASON_MALFORMED_FRAME);
		sgw_vmac_of(md->cfg, eth->src, vmac);
		return sgw_nd_reply(skb, md, vmac, ND_FLAG_ROUTER);
	}
	if (md->nd_type == ICMPV6_TYPE_NA)
		return sgw_punt(skb, md, PUNT_REASON_GATEWAY_NA);
	if (md->nd_type != ICMPV6_TYPE_NS)
		return SGW_CONTINUE;
	if (md->nd_target_is_gateway)
		return sgw_drop(md, DROP_REASON_GATEWAY_ND_GATEWAY_IP);
	if (!md->ns_answerable)
		return sgw_drop(md, DROP_REASON_ND_UNSUPPORTED);
	host = bpf_map_lookup_elem(&sgw_host_ip6s, &md->nd_target);
	if (!host)
		return sgw_punt(skb, md, PUNT_REASON_GATEWAY_ND_MISS);
	return sgw_nd_reply(skb, md, host->addr, 0);
}

#endif
