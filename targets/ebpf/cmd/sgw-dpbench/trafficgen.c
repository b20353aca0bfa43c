//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
/* XDP helpers of sgw-dpbench's live-traffic mode (BPF_F_TEST_XDP_LIVE_FRAMES). */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

/* Run in live-frame mode: every frame is transmitted out of ingress_ifindex. */
SEC("xdp")
int sgw_gen_tx(struct xdp_md *ctx)
{
	return XDP_TX;
}

/* Attached to the generator's veth: live-frame XDP_TX needs an XDP program there. */
SEC("xdp")
int sgw_gen_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

/* Attached to the sink veth behind the gateway port: counts and discards. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} sgw_sink_packets SEC(".maps");

SEC("xdp")
int sgw_sink_drop(struct xdp_md *ctx)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&sgw_sink_packets, &zero);

	if (n)
		(*n)++;
	return XDP_DROP;
}

char __license[] SEC("license") = "Dual MIT/GPL";
