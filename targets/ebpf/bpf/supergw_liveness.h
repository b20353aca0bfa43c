// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
/* Gateway liveness (docs/pipeline-contract.md, "Gateway liveness"): a gateway's liveness
 * frame refreshes its port's timestamp; a frame the buckets send to a gateway heard longer
 * ago than its gateway_backups entry's timeout goes to the backup instead. Included by
 * supergw.c after its helpers (sgw_count, sgw_forward). */
#ifndef SUPERGW_LIVENESS_H
#define SUPERGW_LIVENESS_H

/* A liveness frame from a gateway port: consumed (not forwarded, no drop reason). */
static __always_inline int sgw_liveness_refresh(struct sgw_md *md)
{
	__u32 port = md->port;
	__u64 *seen = bpf_map_lookup_elem(&sgw_gateway_last_seen, &port);

	if (seen)
		*seen = bpf_ktime_get_ns();
	sgw_count(&sgw_liveness_frames, port, md->len);
	return TC_ACT_SHOT;
}

/* The backup of the gateway on `port` when that gateway has gone stale, else NULL. A port
 * without a backup entry, or never heard since the switch started, is never stale; the
 * clock is read only for a gateway that has a backup. */
static __always_inline const struct sgw_gateway_backup *sgw_stale_backup(struct sgw_md *md, __u16 port)
{
	__u32 key = port;
	const struct sgw_gateway_backup *bk = bpf_map_lookup_elem(&sgw_gateway_backups, &key);
	const __u64 *seen;

	if (!bk || !bk->valid)
		return NULL;
	seen = bpf_map_lookup_elem(&sgw_gateway_last_seen, &key);
	if (!seen || !*seen || bpf_ktime_get_ns() - *seen <= bk->timeout_ns)
		return NULL;
	sgw_count(&sgw_failover_frames, key, md->len);
	return bk;
}

#endif
