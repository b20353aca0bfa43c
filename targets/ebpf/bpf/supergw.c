// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
/* supergw ingress pipeline for tc (TCX ingress, direct action) on every front port.
 * Stage order, drop reasons and punt reasons follow docs/pipeline-contract.md
 * ("Data paths, in pipeline order"). Every frame is either redirected, flooded
 * (clones), punted to userspace or dropped; none goes up the switch's own stack. */
#include <stdbool.h>
#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "p4constants.h"
#include "supergw_maps.h"
#include "supergw_pkt.h"
#include "supergw_crc32.h"

#ifndef SGW_LEARN_REFRESH_NS
#define SGW_LEARN_REFRESH_NS 1000000000ULL /* refresh a learned entry's hit time at most once per second */
#endif
#ifndef SGW_DIGEST_HOLDOFF_NS
#define SGW_DIGEST_HOLDOFF_NS 10000000ULL /* at most one digest per (mac, port) per 10 ms */
#endif

/* Returned by a stage that does not decide the frame's fate. */
#define SGW_CONTINUE 0x100

/* Per-frame metadata, filled once by the early stages. */
struct sgw_md {
	__u32 ifindex;
	__u32 len;
	__u16 port;
	__u8 role;
	__u8 is_arp;
	__u16 drop_reason;
	__u16 arp_op;
	__be32 arp_spa;
	__be32 arp_tpa;
	/* IPv6 (sgw_classify_ip6, HOST and GATEWAY ports): is_ip6 for a whole version-6 header;
	 * nd_type for ND directly behind it (0: none); nd_target_is_gateway and ns_answerable
	 * only for an NS or NA whose target the frame holds. */
	__u8 is_ip6;
	__u8 ip6_src_is_gateway;
	__u8 nd_type;
	__u8 nd_target_is_gateway;
	__u8 ns_answerable;
	__be32 ip6_vtf; /* version, traffic class, flow label, as on the wire */
	struct sgw_ip6 ip6_src;
	struct sgw_ip6 nd_target;
	const struct sgw_dispatch_config *cfg;
	const struct sgw_ra_config *ra; /* outside ports only (sgw_ra_check_configured) */
	__u64 coarse_ns; /* bpf_ktime_get_coarse_ns() once learning has read it, else 0 */
};

static __always_inline int sgw_drop(struct sgw_md *md, __u16 reason)
{
	md->drop_reason = reason;
	return TC_ACT_SHOT;
}

static __always_inline void sgw_count(void *map, __u32 index, __u32 len)
{
	struct sgw_counter *c = bpf_map_lookup_elem(map, &index);

	if (c) {
		c->packets++;
		c->bytes += len;
	}
}

/* Sends the frame out of port; ifindex 0 means the port is not attached here. */
static __always_inline int sgw_output(struct sgw_md *md, __u16 port, __u32 ifindex)
{
	if (!ifindex)
		return TC_ACT_SHOT;
	sgw_count(&sgw_port_tx, port, md->len);
	return bpf_redirect(ifindex, 0);
}

/* Unicast out of another port; out of the ingress port is a hairpin. */
static __always_inline int sgw_forward(struct sgw_md *md, __u16 port, __u32 ifindex)
{
	if (port == md->port)
		return sgw_drop(md, DROP_REASON_HAIRPIN);
	return sgw_output(md, port, ifindex);
}

/* Replicates to a PRE group (HOST_FLOOD_GROUP on the LAN), pruned from the ingress port. */
static __always_inline int sgw_flood(struct __sk_buff *skb, struct sgw_md *md, __u32 id)
{
	struct sgw_flood_group *g = bpf_map_lookup_elem(&sgw_flood_groups, &id);
	__u32 count;

	if (!g)
		return TC_ACT_SHOT;
	count = g->count;
	for (__u32 i = 0; i < SGW_MAX_FLOOD_PORTS; i++) {
		struct sgw_flood_member *m = &g->members[i];

		if (i >= count)
			break;
		if (m->port == md->port || !m->ifindex)
			continue;
		if (bpf_clone_redirect(skb, m->ifindex, 0) == 0)
			sgw_count(&sgw_port_tx, m->port, md->len);
	}
	return TC_ACT_SHOT;
}

/* Copies the frame to userspace as a packet-in; the frame itself is consumed. */
static __always_inline int sgw_punt(struct __sk_buff *skb, struct sgw_md *md, __u16 reason)
{
	struct sgw_event *e;
	__u32 n = md->len;

	if (n > SGW_PUNT_MAX)
		n = SGW_PUNT_MAX;
	/* Verifier: clang tests a copy of n against 0, so prove 1 <= n <= MAX by
	 * arithmetic instead (identity for n in [1, MAX]; MAX is a power of two). */
	n = ((n - 1) & (SGW_PUNT_MAX - 1)) + 1;
	e = bpf_ringbuf_reserve(&sgw_events, sizeof(*e) + SGW_PUNT_MAX, 0);
	if (!e)
		return TC_ACT_SHOT;
	e->kind = SGW_EVENT_PACKET_IN;
	e->port = md->port;
	e->reason = reason;
	__builtin_memset(e->src_mac, 0, sizeof(e->src_mac));
	e->src_ip = 0;
	e->frame_len = n;
	__builtin_memset(e->src_ip6, 0, sizeof(e->src_ip6));
	e->wire_len = md->len;
	if (bpf_skb_load_bytes(skb, 0, (void *)(e + 1), n)) {
		bpf_ringbuf_discard(e, 0);
		return TC_ACT_SHOT;
	}
	bpf_ringbuf_submit(e, 0);
	return TC_ACT_SHOT;
}

/* vmac(bucket(mac)) = vmac_base | (hash(mac) & bucket_mask): hash is the MAC's low 16 bits
 * (BUCKET_HASH_IDENTITY) or its CRC-32 (BUCKET_HASH_CRC32). */
static __always_inline void sgw_vmac_of(const struct sgw_dispatch_config *cfg, const __u8 mac[6],
					__u8 out[6])
{
	__u32 h;
	__u16 b;

	if (cfg->bucket_hash == BUCKET_HASH_IDENTITY)
		h = ((__u32)mac[4] << 8) | mac[5];
	else
		h = sgw_crc32_mac(mac);
	b = (__u16)(h & cfg->bucket_mask);

	out[0] = cfg->vmac_base[0];
	out[1] = cfg->vmac_base[1];
	out[2] = cfg->vmac_base[2];
	out[3] = cfg->vmac_base[3];
	out[4] = cfg->vmac_base[4] | (b >> 8);
	out[5] = cfg->vmac_base[5] | (b & 0xff);
}

/* True if mac is vmac(b) for some b <= bucket_mask; *bucket = b. */
static __always_inline bool sgw_is_vmac(const struct sgw_dispatch_config *cfg, const __u8 mac[6],
					__u32 *bucket)
{
	__u16 low;

	/* m & ~0xffff == vmac_base: a base with low bits set matches nothing. */
	if (mac[0] != cfg->vmac_base[0] || mac[1] != cfg->vmac_base[1] ||
	    mac[2] != cfg->vmac_base[2] || mac[3] != cfg->vmac_base[3] ||
	    cfg->vmac_base[4] || cfg->vmac_base[5])
		return false;
	low = ((__u16)mac[4] << 8) | mac[5];
	if (low > cfg->bucket_mask)
		return false;
	*bucket = low & cfg->bucket_mask;
	return true;
}

/* Turns the ARP request into the reply "ip is-at mac" and sends it back out of
 * the ingress port. */
static __always_inline int sgw_arp_reply(struct __sk_buff *skb, struct sgw_md *md,
					 const __u8 mac[6], __be32 ip)
{
	struct sgw_eth *eth = sgw_eth_hdr(skb);
	struct sgw_arp *arp = sgw_arp_hdr(skb);

	if (!eth || !arp)
		return sgw_drop(md, DROP_REASON_MALFORMED_ARP);
	sgw_mac_copy(eth->dst, eth->src);
	sgw_mac_copy(eth->src, mac);
	arp->op = bpf_htons(ARP_OPER_REPLY);
	sgw_mac_copy(arp->tha, arp->sha);
	__builtin_memcpy(arp->tpa, arp->spa, 4);
	sgw_mac_copy(arp->sha, mac);
	__builtin_memcpy(arp->spa, &ip, 4);
	return sgw_output(md, md->port, md->ifindex);
}

/* Stage 1: a frame must hold an Ethernet header. */
static __always_inline int sgw_parse(struct __sk_buff *skb, struct sgw_md *md)
{
	if (!sgw_pull(skb, sizeof(struct sgw_eth)))
		return sgw_drop(md, DROP_REASON_MALFORMED_FRAME);
	return SGW_CONTINUE;
}

/* Stage 2: port_roles; packet-out headers are only accepted from the CPU port. */
static __always_inline int sgw_classify_port(struct __sk_buff *skb, struct sgw_md *md)
{
	const struct sgw_port_info *pi;
	struct sgw_eth *eth;

	pi = bpf_map_lookup_elem(&sgw_ifindex_port, &md->ifindex);
	if (!pi)
		return sgw_drop(md, DROP_REASON_UNKNOWN_PORT);
	md->port = pi->port;
	if (pi->role != PORT_ROLE_HOST && pi->role != PORT_ROLE_GATEWAY && pi->role != PORT_ROLE_UPLINK &&
	    pi->role != PORT_ROLE_GATEWAY_OUTSIDE)
		return sgw_drop(md, DROP_REASON_UNKNOWN_PORT);
	md->role = pi->role;
	eth = sgw_eth_hdr(skb);
	if (!eth)
		return sgw_drop(md, DROP_REASON_MALFORMED_FRAME);
	if (eth->type == bpf_htons(ETHERTYPE_PACKET_OUT))
		return sgw_drop(md, DROP_REASON_PACKET_OUT_FROM_FRONT_PORT);
	return SGW_CONTINUE;
}

/* Stage 3: settings must hold set_dispatch_config with a defined bucket_hash (the server
 * refuses any other; as in p4src, an undefined one would leave the switch unconfigured). */
static __always_inline int sgw_check_configured(struct sgw_md *md)
{
	__u32 zero = 0;
	const struct sgw_dispatch_config *cfg = bpf_map_lookup_elem(&sgw_settings, &zero);

	if (!cfg || !cfg->configured ||
	    (cfg->bucket_hash != BUCKET_HASH_CRC32 && cfg->bucket_hash != BUCKET_HASH_IDENTITY))
		return sgw_drop(md, DROP_REASON_NOT_CONFIGURED);
	md->cfg = cfg;
	return SGW_CONTINUE;
}

/* Stage 4: ARP must be Ethernet/IPv4 request or reply, complete. */
static __always_inline int sgw_validate_arp(struct __sk_buff *skb, struct sgw_md *md)
{
	struct sgw_eth *eth = sgw_eth_hdr(skb);
	struct sgw_arp *arp;
	__u16 op;

	if (!eth)
		return sgw_drop(md, DROP_REASON_MALFORMED_FRAME);
	if (eth->type != bpf_htons(ETHERTYPE_ARP))
		return SGW_CONTINUE;
	if (!sgw_pull(skb, SGW_ARP_LEN))
		return sgw_drop(md, DROP_REASON_MALFORMED_ARP);
	arp = sgw_arp_hdr(skb);
	if (!arp)
		return sgw_drop(md, DROP_REASON_MALFORMED_ARP);
	op = bpf_ntohs(arp->op);
	if (arp->htype != bpf_htons(ARP_HTYPE_ETHERNET) || arp->ptype != bpf_htons(ARP_PTYPE_IPV4) ||
	    arp->hlen != ARP_HLEN_ETHERNET || arp->plen != ARP_PLEN_IPV4 ||
	    (op != ARP_OPER_REQUEST && op != ARP_OPER_REPLY))
		return sgw_drop(md, DROP_REASON_MALFORMED_ARP);
	md->is_arp = 1;
	md->arp_op = op;
	__builtin_memcpy(&md->arp_spa, arp->spa, 4);
	__builtin_memcpy(&md->arp_tpa, arp->tpa, 4);
	return SGW_CONTINUE;
}

/* learn_digest_t.src_ip: ARP sender IP, IPv4 source (not from an uplink, where it is a
 * remote address behind the router), else 0. */
static __always_inline __be32 sgw_digest_src_ip(struct __sk_buff *skb, struct sgw_md *md,
					       __be16 type)
{
	__be32 ip = 0;

	if (md->is_arp)
		return md->arp_spa;
	if (md->role == PORT_ROLE_UPLINK)
		return 0;
	/* Like the P4 parser: a truncated IPv4 header is no IPv4 header. */
	if (type == bpf_htons(ETHERTYPE_IPV4) && md->len >= sizeof(struct sgw_eth) + SGW_IPV4_HDR_MIN &&
	    bpf_skb_load_bytes(skb, SGW_IPV4_SADDR_OFF, &ip, 4) == 0)
		return ip;
	return 0;
}

/* A learning table (learned_sources, learned_ip6s): a hit refreshes the entry's last hit
 * (at most once per SGW_LEARN_REFRESH_NS) and is no miss; a miss whose digest went out
 * less than SGW_DIGEST_HOLDOFF_NS ago (sent: the key's last digest) is not reported again. */
static __always_inline bool sgw_learn_miss(void *learned, void *sent, const void *key, __u64 now)
{
	__u64 *seen = bpf_map_lookup_elem(learned, key);

	if (seen) {
		if (now - *seen > SGW_LEARN_REFRESH_NS)
			*seen = now;
		return false;
	}
	seen = bpf_map_lookup_elem(sent, key);
	return !seen || now - *seen >= SGW_DIGEST_HOLDOFF_NS;
}

/* learning.learned_sources: hit refreshes the idle time, miss emits a digest. */
static __always_inline void sgw_learn(struct __sk_buff *skb, struct sgw_md *md)
{
	struct sgw_learn_key key = { .port = md->port };
	struct sgw_eth *eth = sgw_eth_hdr(skb);
	struct sgw_event *e;
	__be16 type;
	__u64 now;

	if (!eth)
		return;
	sgw_mac_copy(key.mac, eth->src);
	type = eth->type;
	/* Coarse (tick-resolution) clock: cheaper than bpf_ktime_get_ns, and both
	 * users (1 s refresh, 10 ms hold-off) are coarser than a tick. */
	now = bpf_ktime_get_coarse_ns();
	md->coarse_ns = now; /* sgw_learn_ip6 reads the clock once per frame, too */
	if (!sgw_learn_miss(&sgw_learned_sources, &sgw_digest_sent, &key, now))
		return;
	e = bpf_ringbuf_reserve(&sgw_events, sizeof(*e), 0);
	if (!e)
		return;
	e->kind = SGW_EVENT_DIGEST;
	e->port = md->port;
	e->reason = 0;
	sgw_mac_copy(e->src_mac, key.mac);
	e->src_ip = sgw_digest_src_ip(skb, md, type);
	/* Never teach the controller that a neighbour owns the gateway or public address. */
	if (e->src_ip == md->cfg->gateway_ip || (md->ra && e->src_ip == md->ra->public_ip))
		e->src_ip = 0;
	e->frame_len = 0;
	e->wire_len = 0;
	__builtin_memset(e->src_ip6, 0, sizeof(e->src_ip6));
	bpf_ringbuf_submit(e, 0);
	bpf_map_update_elem(&sgw_digest_sent, &key, &now, BPF_ANY);
}

/* Gateway liveness: refresh and the stale gateway's backup. */
#include "supergw_liveness.h"

/* Host → vmac: buckets[dst & mask] picks the gateway (the fast path), or its backup when
 * the gateway's liveness frames have stopped. */
static __always_inline int sgw_dispatch(struct sgw_md *md, struct sgw_eth *eth, __u32 bucket)
{
	struct sgw_bucket *b = bpf_map_lookup_elem(&sgw_buckets, &bucket);
	const struct sgw_gateway_backup *bk;

	if (!b || !b->valid)
		return sgw_drop(md, DROP_REASON_BUCKET_UNASSIGNED);
	sgw_count(&sgw_bucket_counter, bucket, md->len);
	bk = sgw_stale_backup(md, b->port);
	if (bk) {
		sgw_mac_copy(eth->dst, bk->gateway_mac);
		return sgw_forward(md, bk->port, bk->ifindex);
	}
	sgw_mac_copy(eth->dst, b->gateway_mac);
	return sgw_forward(md, b->port, b->ifindex);
}

/* Remote access: the outside switch's stages and the LAN's client pools. */
#include "supergw_ra.h"

/* IPv6 Neighbor Discovery on the LAN. */
#include "supergw_nd.h"

/* Stage 5: frames from a host port. */
static __always_inline int sgw_host(struct __sk_buff *skb, struct sgw_md *md)
{
	const struct sgw_dispatch_config *cfg = md->cfg;
	struct sgw_l2_entry *l2;
	struct sgw_eth *eth;
	__u32 bucket;
	int v;

	/* As p4src ArpGuard: the spoof check runs before learning, so a host
	 * claiming IP_G is never reported to the controller. */
	if (md->is_arp && md->arp_spa == cfg->gateway_ip)
		return sgw_drop(md, DROP_REASON_ARP_SPOOF_GATEWAY_IP);
	v = sgw_nd_guard(md);
	if (v != SGW_CONTINUE)
		return v;
	sgw_learn(skb, md);
	sgw_learn_ip6(skb, md);
	if (md->is_arp) {
		if (md->arp_op == ARP_OPER_REQUEST && md->arp_tpa == cfg->gateway_ip) {
			__u8 vmac[6];

			eth = sgw_eth_hdr(skb);
			if (!eth)
				return sgw_drop(md, DROP_REASON_MALFORMED_FRAME);
			sgw_vmac_of(cfg, eth->src, vmac);
			return sgw_arp_reply(skb, md, vmac, cfg->gateway_ip);
		}
	}
	if (md->nd_type) {
		v = sgw_nd_respond(skb, md);
		if (v != SGW_CONTINUE)
			return v;
	}
	eth = sgw_eth_hdr(skb);
	if (!eth)
		return sgw_drop(md, DROP_REASON_MALFORMED_FRAME);
	if (sgw_is_vmac(cfg, eth->dst, &bucket)) {
		v = sgw_pool_dispatch(skb, md, eth->type);

		if (v != SGW_CONTINUE)
			return v;
		eth = sgw_eth_hdr(skb);
		if (!eth)
			return sgw_drop(md, DROP_REASON_MALFORMED_FRAME);
		return sgw_dispatch(md, eth, bucket);
	}
	if (sgw_mac_is_group(eth->dst))
		return sgw_flood(skb, md, HOST_FLOOD_GROUP);
	l2 = bpf_map_lookup_elem(&sgw_mac_table, eth->dst);
	if (!l2)
		return sgw_flood(skb, md, HOST_FLOOD_GROUP);
	return sgw_forward(md, l2->port, l2->ifindex);
}

/* Stage 6: frames from a gateway port. */
static __always_inline int sgw_gateway(struct __sk_buff *skb, struct sgw_md *md)
{
	const struct sgw_dispatch_config *cfg = md->cfg;
	struct sgw_l2_entry *l2;
	struct sgw_eth *eth;
	struct sgw_mac *host;
	int v;

	/* Before everything else of this stage, which ignores the ethertype anyway. */
	if (sgw_eth_type(skb) == bpf_htons(ETHERTYPE_LIVENESS))
		return sgw_liveness_refresh(md);
	v = sgw_nd_guard(md);
	if (v != SGW_CONTINUE)
		return v;
	if (md->is_arp) {
		if (md->arp_op != ARP_OPER_REQUEST)
			return sgw_punt(skb, md, PUNT_REASON_GATEWAY_ARP_REPLY);
		host = NULL;
		if (md->arp_tpa != cfg->gateway_ip)
			host = bpf_map_lookup_elem(&sgw_host_ips, &md->arp_tpa);
		if (!host)
			return sgw_punt(skb, md, PUNT_REASON_GATEWAY_ARP_MISS);
		return sgw_arp_reply(skb, md, host->addr, md->arp_tpa);
	}
	if (md->nd_type) {
		v = sgw_nd_respond(skb, md);
		if (v != SGW_CONTINUE)
			return v;
	}
	eth = sgw_eth_hdr(skb);
	if (!eth)
		return sgw_drop(md, DROP_REASON_MALFORMED_FRAME);
	if (sgw_mac_is_group(eth->dst))
		return sgw_drop(md, DROP_REASON_GATEWAY_BROADCAST);
	sgw_vmac_of(cfg, eth->dst, eth->src);
	l2 = bpf_map_lookup_elem(&sgw_mac_table, eth->dst);
	if (!l2)
		return sgw_flood(skb, md, HOST_FLOOD_GROUP);
	if (l2->role != PORT_ROLE_HOST || l2->port == md->port)
		return sgw_drop(md, DROP_REASON_GATEWAY_TO_GATEWAY);
	return sgw_output(md, l2->port, l2->ifindex);
}

static __always_inline int sgw_pipeline(struct __sk_buff *skb, struct sgw_md *md)
{
	int v;

	v = sgw_parse(skb, md);
	if (v != SGW_CONTINUE)
		return v;
	v = sgw_classify_port(skb, md);
	if (v != SGW_CONTINUE)
		return v;
	v = sgw_check_configured(md);
	if (v != SGW_CONTINUE)
		return v;
	v = sgw_ra_check_configured(md);
	if (v != SGW_CONTINUE)
		return v;
	v = sgw_validate_arp(skb, md);
	if (v != SGW_CONTINUE)
		return v;
	sgw_classify_ip6(skb, md, sgw_eth_type(skb));
	if (md->role == PORT_ROLE_HOST)
		return sgw_host(skb, md);
	if (md->role == PORT_ROLE_GATEWAY)
		return sgw_gateway(skb, md);
	if (md->role == PORT_ROLE_UPLINK)
		return sgw_uplink(skb, md);
	return sgw_gateway_outside(skb, md);
}

SEC("tc")
int sgw_ingress(struct __sk_buff *skb)
{
	struct sgw_md md = {
		.ifindex = skb->ifindex,
		.len = skb->len,
	};
	int verdict = sgw_pipeline(skb, &md);

	if (md.drop_reason)
		sgw_count(&sgw_drop_counter, md.drop_reason, md.len);
	return verdict;
}

char __license[] SEC("license") = "Dual MIT/GPL";
