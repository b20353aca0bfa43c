// XDP sink for the gateway side of the dataplane benchmark: counts and drops every
// frame, so the receiver costs next to nothing on the measured core and the count
// is exact. Counter: per-CPU array, key 0 = frames, key 1 = bytes.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} sgw_bench_sink SEC(".maps");

SEC("xdp")
int sgw_bench_sink_prog(struct xdp_md *ctx)
{
	__u32 k_frames = 0, k_bytes = 1;
	__u64 *frames = bpf_map_lookup_elem(&sgw_bench_sink, &k_frames);
	__u64 *bytes = bpf_map_lookup_elem(&sgw_bench_sink, &k_bytes);

	if (frames)
		*frames += 1;
	if (bytes)
		*bytes += ctx->data_end - ctx->data;
	return XDP_DROP;
}

char __license[] SEC("license") = "Dual MIT/GPL";
