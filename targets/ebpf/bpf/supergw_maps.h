/* Maps of the supergw datapath. Each mirrors a P4 table or extern of
 * SupergwIngress (docs/pipeline-contract.md); the Go side (internal/dataplane)
 * writes them in P4 terms. Sizes are overridable at build time. */
#ifndef SUPERGW_MAPS_H
#define SUPERGW_MAPS_H

#include <linux/types.h>
#include <bpf/bpf_helpers.h>

#include "p4constants.h"

/* Table sizes come from p4src/common/size.p4 through p4constants.h. */
#ifndef SGW_MAX_PORTS
#define SGW_MAX_PORTS PORT_ROLES_TABLE_SIZE /* also bounds the P4 ports counted in sgw_port_tx */
#endif
#ifndef SGW_MAX_HOST_IPS
#define SGW_MAX_HOST_IPS HOST_IPS_TABLE_SIZE
#endif
#ifndef SGW_MAX_L2
#define SGW_MAX_L2 MAC_TABLE_SIZE
#endif
#ifndef SGW_MAX_LEARNED
#define SGW_MAX_LEARNED LEARNED_SOURCES_TABLE_SIZE
#endif
#ifndef SGW_MAX_DIGEST_HOLDOFF
#define SGW_MAX_DIGEST_HOLDOFF 4096 /* sources remembered for the digest hold-off (LRU) */
#endif
#ifndef SGW_MAX_FLOOD_GROUPS
#define SGW_MAX_FLOOD_GROUPS 8
#endif
#ifndef SGW_MAX_FLOOD_PORTS
#define SGW_MAX_FLOOD_PORTS 32
#endif
#ifndef SGW_EVENTS_BYTES
#define SGW_EVENTS_BYTES (1 << 20)
#endif
#ifndef SGW_PUNT_MAX
#define SGW_PUNT_MAX 2048 /* frame bytes carried by a packet-in event; a power of two */
#endif

struct sgw_mac {
	__u8 addr[6];
};

struct sgw_counter {
	__u64 packets;
	__u64 bytes;
};

/* Value of sgw_settings[0] (params of set_dispatch_config); configured == 0 is the default action mark_unconfigured. */
struct sgw_dispatch_config {
	__be32 gateway_ip;
	__u16 bucket_mask;
	__u8 configured;
	__u8 bucket_hash; /* BUCKET_HASH_CRC32 or BUCKET_HASH_IDENTITY */
	__u8 vmac_base[6]; /* low 16 bits are zero */
	__u16 pad2;
};

/* Value of sgw_buckets[b]: action set_gateway(port, gateway_mac), resolved to an ifindex. */
struct sgw_bucket {
	__u32 ifindex; /* 0: port not attached on this target, frames are discarded */
	__u16 port;
	__u8 valid;
	__u8 pad;
	__u8 gateway_mac[6];
	__u16 pad2;
};

/* Value of sgw_mac_table: action set_output_port(port, role), port resolved to an
 * ifindex; role is the controller's port_roles role of port, carried in the entry so
 * that every target decides GATEWAY_TO_GATEWAY from this one lookup. */
struct sgw_l2_entry {
	__u32 ifindex;
	__u16 port;
	__u8 role;
	__u8 pad;
};

/* Key of sgw_learned_sources. */
struct sgw_learn_key {
	__u8 mac[6];
	__u16 port;
};

struct sgw_flood_member {
	__u32 ifindex;
	__u16 port;
	__u16 pad;
};

/* Value of sgw_flood_groups[id]: replicas of a PRE multicast group. */
struct sgw_flood_group {
	__u32 count;
	struct sgw_flood_member members[SGW_MAX_FLOOD_PORTS];
};

enum sgw_event_kind {
	SGW_EVENT_DIGEST = 1,
	SGW_EVENT_PACKET_IN = 2,
};

/* Record in sgw_events; a packet-in is followed by frame_len bytes of the frame. */
struct sgw_event {
	__u16 kind;
	__u16 port; /* digest: port; packet-in: ingress_port */
	__u16 reason; /* packet-in reason */
	__u8 src_mac[6]; /* digest */
	__be32 src_ip; /* digest */
	__u32 frame_len; /* packet-in: bytes that follow */
	__u32 wire_len; /* packet-in: length of the frame on the wire */
};

/* Only referenced through pointers: keeps struct sgw_event in BTF for bpf2go. */
const struct sgw_event *sgw_event_btf __attribute__((unused));

/* Value of sgw_ifindex_port. role is the port's port_roles entry (0: none), copied
 * in by the Go side whenever port_roles changes, so that a frame is classified by
 * one lookup instead of two. */
struct sgw_port_info {
	__u16 port;
	__u8 role;
	__u8 pad;
};

/* ifindex -> {P4 port, role} of every attached front port (ports static, from -i N@iface). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SGW_MAX_PORTS);
	__type(key, __u32);
	__type(value, struct sgw_port_info);
} sgw_ifindex_port SEC(".maps");

/* port_classifier.port_roles: P4 port -> PortRole, as written, for every port (attached or
 * not): it holds the table's size limit; the program reads the copy in sgw_ifindex_port. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SGW_MAX_PORTS);
	__type(key, __u16);
	__type(value, __u8);
} sgw_port_roles SEC(".maps");

/* dispatch_config.settings: the single default action. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sgw_dispatch_config);
} sgw_settings SEC(".maps");

/* arp_responder.host_ips: IPv4 (network order) -> host MAC. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SGW_MAX_HOST_IPS);
	__type(key, __be32);
	__type(value, struct sgw_mac);
} sgw_host_ips SEC(".maps");

/* bucket_dispatch.buckets: bucket -> gateway (valid == 0 is drop_unassigned). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_BUCKETS);
	__type(key, __u32);
	__type(value, struct sgw_bucket);
} sgw_buckets SEC(".maps");

/* bucket_dispatch.bucket_counter: direct counter of sgw_buckets, per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_BUCKETS);
	__type(key, __u32);
	__type(value, struct sgw_counter);
} sgw_bucket_counter SEC(".maps");

/* l2_forwarding.mac_table: dst MAC -> output port. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SGW_MAX_L2);
	__type(key, struct sgw_mac);
	__type(value, struct sgw_l2_entry);
} sgw_mac_table SEC(".maps");

/* learning.learned_sources: (src MAC, port) -> last hit, bpf_ktime_get_coarse_ns(). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SGW_MAX_LEARNED);
	__type(key, struct sgw_learn_key);
	__type(value, __u64);
} sgw_learned_sources SEC(".maps");

/* (src MAC, port) -> time of the last digest, to send one digest per holdoff, not per frame. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SGW_MAX_DIGEST_HOLDOFF);
	__type(key, struct sgw_learn_key);
	__type(value, __u64);
} sgw_digest_sent SEC(".maps");

/* PRE multicast groups: group id -> replicas. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SGW_MAX_FLOOD_GROUPS);
	__type(key, __u32);
	__type(value, struct sgw_flood_group);
} sgw_flood_groups SEC(".maps");

/* SupergwIngress.drop_counter: DropReason -> packets/bytes, per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, DROP_COUNTER_SIZE);
	__type(key, __u32);
	__type(value, struct sgw_counter);
} sgw_drop_counter SEC(".maps");

/* Not in the P4 program: frames sent per egress P4 port (< SGW_MAX_PORTS), per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SGW_MAX_PORTS);
	__type(key, __u32);
	__type(value, struct sgw_counter);
} sgw_port_tx SEC(".maps");

/* Digests and packet-ins to userspace (struct sgw_event records). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, SGW_EVENTS_BYTES);
} sgw_events SEC(".maps");

#endif
