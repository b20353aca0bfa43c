//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR MIT)
/* sgw-traffic: the dataplane benchmark's generator (XDP, run with BPF_PROG_RUN and
 * BPF_F_TEST_XDP_LIVE_FRAMES) and its sink (tc ingress on the receiving veth). */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

/* The part of each planned frame the generator writes: Ethernet + IPv6 + UDP, or
 * Ethernet + IPv4 + UDP for a plan of IPv4 frames (sgw_gen_ipv6 = 0). */
#define SGW_GEN_HEADER_LEN 62
#define SGW_GEN_HEADER_LEN_IPV4 42
#define SGW_GEN_MAX_FRAMES 4096

struct sgw_gen_header {
	__u8 bytes[SGW_GEN_HEADER_LEN];
};

/* Frame i of the plan differs from the template only in its headers (the first 42 or 62 bytes). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SGW_GEN_MAX_FRAMES);
	__type(key, __u32);
	__type(value, struct sgw_gen_header);
} sgw_gen_headers SEC(".maps");

struct sgw_gen_state {
	__u64 sent; /* frames handed to XDP_TX: BPF_PROG_RUN may run more than Repeat times */
	__u64 paced; /* runs dropped to keep to the rate */
	__u64 last_ns; /* pacing: when tokens were last added (0: not yet) */
	__u64 tokens; /* pacing: frames allowed, times 1e9 */
	__u32 next; /* index of the next planned frame */
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sgw_gen_state);
} sgw_gen SEC(".maps");

volatile const __u32 sgw_gen_count = 1; /* frames in the plan, set before loading */
volatile const __u8 sgw_gen_ipv6; /* the plan's frames are IPv6: 62 bytes of headers, else 42 */
volatile const __u64 sgw_gen_rate; /* frames per second; 0: every run sends */

#define SGW_GEN_NS 1000000000ULL
#define SGW_GEN_BURST 32 /* frames the pacing may send back to back after a pause */

/* Token bucket: BPF_PROG_RUN runs the program back to back, and a run that finds no
 * token drops its frame instead of sending it, so the frames leave evenly spaced at
 * sgw_gen_rate (bursts of at most SGW_GEN_BURST) whatever the syscall overhead. */
static __always_inline int sgw_gen_paced_out(struct sgw_gen_state *st)
{
	__u64 now, dt;

	if (!sgw_gen_rate)
		return 0;
	now = bpf_ktime_get_ns();
	dt = st->last_ns ? now - st->last_ns : SGW_GEN_NS;
	if (dt > SGW_GEN_NS)
		dt = SGW_GEN_NS;
	st->last_ns = now;
	st->tokens += dt * sgw_gen_rate;
	if (st->tokens > SGW_GEN_BURST * SGW_GEN_NS)
		st->tokens = SGW_GEN_BURST * SGW_GEN_NS;
	if (st->tokens < SGW_GEN_NS) {
		st->paced++;
		return 1;
	}
	st->tokens -= SGW_GEN_NS;
	return 0;
}

/* Live-frame pages are recycled, and the switch edits frames in place: every frame
 * gets its planned headers written again, so each one is exactly the plan's. */
SEC("xdp")
int sgw_gen_tx(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct sgw_gen_header *h;
	struct sgw_gen_state *st;
	__u32 zero = 0, i;

	if (data + (sgw_gen_ipv6 ? SGW_GEN_HEADER_LEN : SGW_GEN_HEADER_LEN_IPV4) > end)
		return XDP_ABORTED;
	st = bpf_map_lookup_elem(&sgw_gen, &zero);
	if (!st)
		return XDP_ABORTED;
	if (sgw_gen_paced_out(st))
		return XDP_DROP;
	i = st->next;
	st->next = i + 1 >= sgw_gen_count ? 0 : i + 1;
	h = bpf_map_lookup_elem(&sgw_gen_headers, &i);
	if (!h)
		return XDP_ABORTED;
	if (sgw_gen_ipv6) {
		if (data + SGW_GEN_HEADER_LEN > end)
			return XDP_ABORTED;
		__builtin_memcpy(data, h->bytes, SGW_GEN_HEADER_LEN);
	} else {
		if (data + SGW_GEN_HEADER_LEN_IPV4 > end)
			return XDP_ABORTED;
		__builtin_memcpy(data, h->bytes, SGW_GEN_HEADER_LEN_IPV4);
	}
	st->sent++;
	return XDP_TX;
}

enum sgw_sink_counter {
	SGW_SINK_FRAMES,
	SGW_SINK_BYTES,
	SGW_SINK_DST_IS_OWN, /* dst MAC == the receiving interface's MAC */
	SGW_SINK_SRC_IS_VMAC, /* src MAC == vmac_base | b for some b <= bucket_mask */
	SGW_SINK_COUNTERS,
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SGW_SINK_COUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} sgw_sink_counts SEC(".maps");

volatile const __u8 sgw_sink_vmac_base[6];
volatile const __u16 sgw_sink_bucket_mask;

static __always_inline void sgw_sink_add(__u32 key, __u64 n)
{
	__u64 *c = bpf_map_lookup_elem(&sgw_sink_counts, &key);

	if (c)
		*c += n;
}

static __always_inline int sgw_sink_is_vmac(const __u8 *mac)
{
	__u16 low = ((__u16)mac[4] << 8) | mac[5];

	return mac[0] == sgw_sink_vmac_base[0] && mac[1] == sgw_sink_vmac_base[1] &&
	       mac[2] == sgw_sink_vmac_base[2] && mac[3] == sgw_sink_vmac_base[3] &&
	       low <= sgw_sink_bucket_mask;
}

/* Counts and drops every frame; eth_type_trans has set pkt_type from the dst MAC. */
SEC("tc")
int sgw_sink(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;

	sgw_sink_add(SGW_SINK_FRAMES, 1);
	sgw_sink_add(SGW_SINK_BYTES, skb->len);
	if (skb->pkt_type == PACKET_HOST)
		sgw_sink_add(SGW_SINK_DST_IS_OWN, 1);
	if ((void *)(eth + 1) <= end && sgw_sink_is_vmac(eth->h_source))
		sgw_sink_add(SGW_SINK_SRC_IS_VMAC, 1);
	return TC_ACT_SHOT;
}

char __license[] SEC("license") = "Dual MIT/GPL";
