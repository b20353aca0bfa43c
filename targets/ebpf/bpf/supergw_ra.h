/* Remote access: the stages of the outside switch's ports (UPLINK, GATEWAY_OUTSIDE) and
 * the LAN's client pools, as docs/pipeline-contract.md ("Outside switch", "Client pools")
 * and p4src's RaConfig, OutsideDispatch, PoolDispatch and L2Forwarding define them.
 * Included by supergw.c after its helpers (sgw_drop, sgw_count, sgw_output, sgw_forward,
 * sgw_flood, sgw_learn, sgw_arp_reply, sgw_dispatch); returns a verdict or SGW_CONTINUE
 * like every stage there. Packet bytes beyond the Ethernet and ARP headers are read with
 * sgw_load (kernel bounds check), never through packet pointers. */
#ifndef SUPERGW_RA_H
#define SUPERGW_RA_H

/* What a packet to IP_P is, for dispatch. */
enum sgw_ra_kind {
	SGW_RA_OTHER, /* pinned, else hashed */
	SGW_RA_IKE,
	SGW_RA_ESP,
};

/* ra_config.ra_settings: frames from outside ports need IP_P. Other roles pass. */
static __always_inline int sgw_ra_check_configured(struct sgw_md *md)
{
	__u32 zero = 0;
	const struct sgw_ra_config *ra;

	if (md->role != PORT_ROLE_UPLINK && md->role != PORT_ROLE_GATEWAY_OUTSIDE)
		return SGW_CONTINUE;
	ra = bpf_map_lookup_elem(&sgw_ra_settings, &zero);
	if (!ra || !ra->configured)
		return sgw_drop(md, DROP_REASON_RA_NOT_CONFIGURED);
	md->ra = ra;
	return SGW_CONTINUE;
}

/* A dispatch table hit: dst := the gateway's MAC, out its port, counted in the entry's
 * direct counter; back out of the ingress port is a hairpin. */
static __always_inline int sgw_to_gateway(struct __sk_buff *skb, struct sgw_md *md,
					  const struct sgw_gateway *gw, void *counter)
{
	struct sgw_eth *eth = sgw_eth_hdr(skb);

	if (!eth)
		return sgw_drop(md, DROP_REASON_MALFORMED_FRAME);
	sgw_count(counter, gw->slot, md->len);
	sgw_mac_copy(eth->dst, gw->gateway_mac);
	return sgw_forward(md, gw->port, gw->ifindex);
}

/* pool_dispatch.client_pools, for a host's frame to a vmac: SGW_CONTINUE (bucket dispatch)
 * while the table is empty, for a frame without a complete IPv4 header, and on a miss. */
static __always_inline int sgw_pool_dispatch(struct __sk_buff *skb, struct sgw_md *md, __be16 type)
{
	__u32 zero = 0;
	__u32 *pools = bpf_map_lookup_elem(&sgw_client_pool_count, &zero);
	struct sgw_lpm_v4 key = { .prefixlen = 32 };
	const struct sgw_gateway *gw;

	if (!pools || !*pools || type != bpf_htons(ETHERTYPE_IPV4) || md->len < SGW_L4_OFF)
		return SGW_CONTINUE;
	if (!sgw_load(skb, SGW_IPV4_OFF + __builtin_offsetof(struct sgw_ipv4, daddr), key.addr, 4))
		return SGW_CONTINUE;
	gw = bpf_map_lookup_elem(&sgw_client_pools, &key);
	if (!gw)
		return SGW_CONTINUE;
	return sgw_to_gateway(skb, md, gw, &sgw_pool_counter);
}

/* L2 of the outside switch, a star: an uplink reaches the gateways' outside ports, a
 * gateway's outside port the uplinks; each floods to the other side's group. */
static __always_inline int sgw_outside_l2(struct __sk_buff *skb, struct sgw_md *md,
					  const struct sgw_ra_config *ra)
{
	bool from_uplink = md->role == PORT_ROLE_UPLINK;
	__u32 group = from_uplink ? GATEWAY_OUTSIDE_FLOOD_GROUP : UPLINK_FLOOD_GROUP;
	struct sgw_l2_entry *l2;
	struct sgw_eth *eth;
	struct sgw_ipv4 ip;

	eth = sgw_eth_hdr(skb);
	if (!eth)
		return sgw_drop(md, DROP_REASON_MALFORMED_FRAME);
	if (!from_uplink) {
		/* A gateway's outside ARP goes to the uplinks; nothing else may be broadcast. */
		if (sgw_mac_is_group(eth->dst) && !md->is_arp)
			return sgw_drop(md, DROP_REASON_GATEWAY_BROADCAST);
		/* The router only ever sees the public MAC for IP_P. */
		if (eth->type == bpf_htons(ETHERTYPE_IPV4) && sgw_load(skb, SGW_IPV4_OFF, &ip, sizeof(ip)) &&
		    ip.saddr == ra->public_ip) {
			eth = sgw_eth_hdr(skb);
			if (!eth)
				return sgw_drop(md, DROP_REASON_MALFORMED_FRAME);
			sgw_mac_copy(eth->src, ra->public_mac);
		}
	}
	if (sgw_mac_is_group(eth->dst))
		return sgw_flood(skb, md, group);
	l2 = bpf_map_lookup_elem(&sgw_mac_table, eth->dst);
	if (!l2)
		return sgw_flood(skb, md, group);
	if (from_uplink) {
		if (l2->port == md->port)
			return sgw_drop(md, DROP_REASON_HAIRPIN);
		if (l2->role != PORT_ROLE_GATEWAY_OUTSIDE)
			return sgw_drop(md, DROP_REASON_UPLINK_TO_UPLINK);
	} else if (l2->role != PORT_ROLE_UPLINK || l2->port == md->port) {
		return sgw_drop(md, DROP_REASON_GATEWAY_TO_GATEWAY);
	}
	return sgw_output(md, l2->port, l2->ifindex);
}

/* What the P4 parser and OutsideDispatch make of a packet to IP_P: *kind and, for IKE and
 * ESP, *off, where the IKE header or the ESP SPI starts; or a MALFORMED_* drop. A header
 * is complete when both the length field (UDP, or IPv4 for ESP) and the frame hold it. */
static __always_inline int sgw_ra_classify(struct __sk_buff *skb, struct sgw_md *md,
					   const struct sgw_ipv4 *ip, int *kind, __u32 *off)
{
	struct sgw_udp udp;
	__u16 udp_len;
	__u32 word = 0;
	__u8 keepalive;
	bool has_word;

	*kind = SGW_RA_OTHER;
	/* Behind options or in a later fragment there is no UDP or ESP header. */
	if ((ip->ver_ihl & 0x0f) != IPV4_IHL_NO_OPTIONS ||
	    (bpf_ntohs(ip->frag_off) & SGW_IPV4_FRAG_OFFSET_MASK))
		return SGW_CONTINUE;
	if (ip->protocol == IP_PROTO_ESP) {
		*kind = SGW_RA_ESP;
		*off = SGW_L4_OFF;
		if (bpf_ntohs(ip->tot_len) < IPV4_HEADER_LEN + ESP_HEADER_LEN || md->len < SGW_L4_OFF + ESP_HEADER_LEN)
			return sgw_drop(md, DROP_REASON_MALFORMED_ESP);
		return SGW_CONTINUE;
	}
	if (ip->protocol != IP_PROTO_UDP || !sgw_load(skb, SGW_L4_OFF, &udp, sizeof(udp)))
		return SGW_CONTINUE;
	udp_len = bpf_ntohs(udp.len);
	if (udp.dest == bpf_htons(UDP_PORT_IKE)) {
		*kind = SGW_RA_IKE;
		*off = SGW_UDP_PAYLOAD_OFF;
		if (udp_len < UDP_HEADER_LEN + IKE_HEADER_LEN || md->len < *off + sizeof(struct sgw_ike))
			return sgw_drop(md, DROP_REASON_MALFORMED_IKE);
		return SGW_CONTINUE;
	}
	if (udp.dest != bpf_htons(UDP_PORT_IKE_NAT_T))
		return SGW_CONTINUE;
	if (udp_len == UDP_HEADER_LEN + 1) {
		if (sgw_load(skb, SGW_UDP_PAYLOAD_OFF, &keepalive, 1) && keepalive == NAT_T_KEEPALIVE)
			return SGW_CONTINUE;
		*kind = SGW_RA_ESP;
		return sgw_drop(md, DROP_REASON_MALFORMED_ESP);
	}
	/* A zero first word is the non-ESP marker (IKE follows), anything else an SPI. */
	has_word = sgw_load(skb, SGW_UDP_PAYLOAD_OFF, &word, 4);
	if (has_word && word == 0 && udp_len >= UDP_HEADER_LEN + NON_ESP_MARKER_LEN) {
		*kind = SGW_RA_IKE;
		*off = SGW_UDP_PAYLOAD_OFF + NON_ESP_MARKER_LEN;
		if (udp_len < UDP_HEADER_LEN + NON_ESP_MARKER_LEN + IKE_HEADER_LEN ||
		    md->len < *off + sizeof(struct sgw_ike))
			return sgw_drop(md, DROP_REASON_MALFORMED_IKE);
		return SGW_CONTINUE;
	}
	*kind = SGW_RA_ESP;
	*off = SGW_UDP_PAYLOAD_OFF;
	if (udp_len < UDP_HEADER_LEN + ESP_HEADER_LEN || !has_word || word == 0 ||
	    md->len < SGW_UDP_PAYLOAD_OFF + ESP_HEADER_LEN)
		return sgw_drop(md, DROP_REASON_MALFORMED_ESP);
	return SGW_CONTINUE;
}

/* ike_spi_labels / esp_spi_ranges: the first entry (highest priority) whose value equals
 * key under its mask; a miss is the table's drop reason. */
static __always_inline int sgw_ternary_dispatch(struct __sk_buff *skb, struct sgw_md *md, void *table,
						void *counter, __u64 key, __u16 miss)
{
	__u32 zero = 0;
	const struct sgw_ternary_table *t = bpf_map_lookup_elem(table, &zero);
	__u32 count;

	if (!t)
		return sgw_drop(md, miss);
	count = t->count;
	for (__u32 i = 0; i < SGW_MAX_TERNARY; i++) {
		const struct sgw_ternary_entry *e = &t->entries[i];

		if (i >= count)
			break;
		if ((key & e->mask) == e->value)
			return sgw_to_gateway(skb, md, &e->gw, counter);
	}
	return sgw_drop(md, miss);
}

/* client_pins on the client's outer address, else buckets[hash(address) & bucket_mask]. */
static __always_inline int sgw_pin_dispatch(struct __sk_buff *skb, struct sgw_md *md, __be32 client)
{
	const struct sgw_dispatch_config *cfg = md->cfg;
	const struct sgw_gateway *gw = bpf_map_lookup_elem(&sgw_client_pins, &client);
	const __u8 *a = (const __u8 *)&client;
	struct sgw_eth *eth;
	__u32 h;

	if (gw)
		return sgw_to_gateway(skb, md, gw, &sgw_pin_counter);
	eth = sgw_eth_hdr(skb);
	if (!eth)
		return sgw_drop(md, DROP_REASON_MALFORMED_FRAME);
	/* The address's low 16 bits (IDENTITY) or the CRC-32 of its 4 bytes (CRC32). */
	if (cfg->bucket_hash == BUCKET_HASH_IDENTITY)
		h = ((__u32)a[2] << 8) | a[3];
	else
		h = sgw_crc32_ipv4(a);
	return sgw_dispatch(md, eth, h & cfg->bucket_mask);
}

/* Outside dispatch of a client's packet to IP_P: IKE of an established SA by the SPI the
 * gateway allocated, ESP by its SPI, everything else by pin or hash. */
static __always_inline int sgw_outside_dispatch(struct __sk_buff *skb, struct sgw_md *md,
						const struct sgw_ipv4 *ip)
{
	struct sgw_ike ike;
	__u64 spi_i, spi_r;
	__be32 esp_spi;
	__u32 off = 0;
	int kind, v;

	v = sgw_ra_classify(skb, md, ip, &kind, &off);
	if (v != SGW_CONTINUE)
		return v;
	if (kind == SGW_RA_IKE) {
		if (!sgw_load(skb, off, &ike, sizeof(ike)))
			return sgw_drop(md, DROP_REASON_MALFORMED_IKE);
		__builtin_memcpy(&spi_i, ike.initiator_spi, 8);
		__builtin_memcpy(&spi_r, ike.responder_spi, 8);
		/* Responder SPI 0: IKE_SA_INIT, before any gateway chose an SPI. */
		if (spi_r) {
			/* The gateway's SPI is the responder's when the client initiated the IKE
			 * SA (flag I set), the initiator's when the gateway did (its IKE rekey). */
			__u64 spi = (ike.flags & IKE_FLAG_INITIATOR) ? spi_r : spi_i;

			return sgw_ternary_dispatch(skb, md, &sgw_ike_spi_labels, &sgw_ike_spi_counter,
						    bpf_be64_to_cpu(spi), DROP_REASON_IKE_SPI_UNKNOWN);
		}
	} else if (kind == SGW_RA_ESP) {
		if (!sgw_load(skb, off, &esp_spi, 4))
			return sgw_drop(md, DROP_REASON_MALFORMED_ESP);
		return sgw_ternary_dispatch(skb, md, &sgw_esp_spi_ranges, &sgw_esp_spi_counter,
					    bpf_ntohl(esp_spi), DROP_REASON_ESP_SPI_UNKNOWN);
	}
	return sgw_pin_dispatch(skb, md, ip->saddr);
}

/* Frames from an uplink: ARP for IP_P answered with the public MAC, IPv4 to IP_P
 * dispatched to a gateway, the rest L2. */
static __always_inline int sgw_uplink(struct __sk_buff *skb, struct sgw_md *md)
{
	const struct sgw_ra_config *ra = md->ra;
	struct sgw_eth *eth;
	struct sgw_ipv4 ip;

	/* Verifier: set by sgw_ra_check_configured for every outside port. */
	if (!ra)
		return sgw_drop(md, DROP_REASON_RA_NOT_CONFIGURED);
	sgw_learn(skb, md);
	if (md->is_arp) {
		if (md->arp_op == ARP_OPER_REQUEST && md->arp_tpa == ra->public_ip)
			return sgw_arp_reply(skb, md, ra->public_mac, ra->public_ip);
		return sgw_outside_l2(skb, md, ra);
	}
	eth = sgw_eth_hdr(skb);
	if (!eth)
		return sgw_drop(md, DROP_REASON_MALFORMED_FRAME);
	if (eth->type == bpf_htons(ETHERTYPE_IPV4) && sgw_load(skb, SGW_IPV4_OFF, &ip, sizeof(ip)) &&
	    ip.daddr == ra->public_ip)
		return sgw_outside_dispatch(skb, md, &ip);
	return sgw_outside_l2(skb, md, ra);
}

/* Frames from a gateway's outside port: never an ARP claim on IP_P, then L2. */
static __always_inline int sgw_gateway_outside(struct __sk_buff *skb, struct sgw_md *md)
{
	const struct sgw_ra_config *ra = md->ra;

	/* Verifier: set by sgw_ra_check_configured for every outside port. */
	if (!ra)
		return sgw_drop(md, DROP_REASON_RA_NOT_CONFIGURED);
	if (md->is_arp && md->arp_spa == ra->public_ip)
		return sgw_drop(md, DROP_REASON_ARP_SPOOF_PUBLIC_IP);
	return sgw_outside_l2(skb, md, ra);
}

#endif
