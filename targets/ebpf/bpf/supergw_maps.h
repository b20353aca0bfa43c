/* Maps of the supergw datapath. Each mirrors a P4 table or extern of
 * SupergwIngress (docs/pipeline-contract.md); the Go side (internal/dataplane)
 * writes them in P4 terms. Sizes are overridable at build time. */
#ifndef SUPERGW_MAPS_H
#define SUPERGW_MAPS_H

#include <linux/types.h>
#include <bpf/bpf_helpers.h>

#include "p4constants.h"
#include "supergw_pkt.h" /* struct sgw_ip6 */

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
/* Sources remembered for the digest hold-off (LRU), as many as the learning tables hold:
 * at a site's cold start every host is a miss at once, and an evicted source only costs
 * one more digest, which the P4Runtime server's digest engine suppresses while unacked. */
#ifndef SGW_MAX_DIGEST_HOLDOFF
#define SGW_MAX_DIGEST_HOLDOFF LEARNED_SOURCES_TABLE_SIZE
#endif
#ifndef SGW_MAX_DIGEST_IP6_HOLDOFF
#define SGW_MAX_DIGEST_IP6_HOLDOFF LEARNED_IP6S_TABLE_SIZE
#endif
#ifndef SGW_MAX_FLOOD_GROUPS
#define SGW_MAX_FLOOD_GROUPS 8
#endif
#ifndef SGW_MAX_FLOOD_PORTS
#define SGW_MAX_FLOOD_PORTS 32
#endif
/* 8 MiB: a digest record takes 48 bytes, so a cold start of LEARNED_SOURCES_TABLE_SIZE
 * dual-stack hosts (an IPv4 and an IPv6 digest each, all at once: 6 MiB) fits while
 * userspace catches up; a record that does not fit is not sent and its source is digested
 * again on its next frame (a host that sends nothing more stays unlearned until then). */
#ifndef SGW_EVENTS_BYTES
#define SGW_EVENTS_BYTES (1 << 23)
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
	SGW_EVENT_DIGEST_IP6 = 3, /* learn_ip6_digest_t */
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
	__u8 src_ip6[16]; /* IPv6 digest */
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

/* Value of sgw_nd_settings[0] (params of set_nd_config); configured == 0 is the default
 * action mark_nd_unconfigured (no gateway address). :: is an unset address. */
struct sgw_nd_config {
	struct sgw_ip6 link_local_ip6;
	struct sgw_ip6 global_ip6;
	__u8 configured;
	__u8 pad[3];
};

/* nd_config.nd_settings: the single default action. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sgw_nd_config);
} sgw_nd_settings SEC(".maps");

/* nd_responder.host_ip6s: host IPv6 -> host MAC (a gateway's NS for it is answered). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, HOST_IP6S_TABLE_SIZE);
	__type(key, struct sgw_ip6);
	__type(value, struct sgw_mac);
} sgw_host_ip6s SEC(".maps");

/* Key of sgw_learned_ip6s. */
struct sgw_learn_ip6_key {
	struct sgw_ip6 ip6;
	__u8 mac[6];
	__u16 pad;
};

/* learning.learned_ip6s: (src IPv6, src MAC) -> last hit, bpf_ktime_get_coarse_ns(). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LEARNED_IP6S_TABLE_SIZE);
	__type(key, struct sgw_learn_ip6_key);
	__type(value, __u64);
} sgw_learned_ip6s SEC(".maps");

/* (src IPv6, src MAC) -> time of the last learn_ip6_digest_t, for the hold-off. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SGW_MAX_DIGEST_IP6_HOLDOFF);
	__type(key, struct sgw_learn_ip6_key);
	__type(value, __u64);
} sgw_digest_ip6_sent SEC(".maps");

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

/* ---- Gateway liveness (docs/pipeline-contract.md, "Gateway liveness"). ---- */

/* Value of sgw_gateway_backups[port]: action set_backup(port, gateway_mac, timeout_us) of
 * the gateway on `port`, the backup's port resolved to an ifindex (valid == 0: no_backup). */
struct sgw_gateway_backup {
	__u64 timeout_ns; /* timeout_us x 1000 */
	__u32 ifindex; /* 0: backup port not attached on this target, frames are discarded */
	__u16 port;
	__u8 valid;
	__u8 pad;
	__u8 gateway_mac[6];
	__u16 pad2;
};

/* gateway_liveness.gateway_backups: gateway port -> its backup. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, GATEWAY_BACKUPS_TABLE_SIZE);
	__type(key, __u32);
	__type(value, struct sgw_gateway_backup);
} sgw_gateway_backups SEC(".maps");

/* gateway_liveness.gateway_last_seen: port -> bpf_ktime_get_ns() of its last liveness frame
 * (0: never heard). Written by the program only, so a table write never moves it. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, GATEWAY_LIVENESS_SIZE);
	__type(key, __u32);
	__type(value, __u64);
} sgw_gateway_last_seen SEC(".maps");

/* gateway_liveness.liveness_frames: liveness frames heard per port, per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, GATEWAY_LIVENESS_SIZE);
	__type(key, __u32);
	__type(value, struct sgw_counter);
} sgw_liveness_frames SEC(".maps");

/* gateway_liveness.failover_frames: per gateway port, its buckets' frames sent to its backup
 * because it was stale, per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, GATEWAY_LIVENESS_SIZE);
	__type(key, __u32);
	__type(value, struct sgw_counter);
} sgw_failover_frames SEC(".maps");

/* ---- Remote access: the outside switch's tables and the LAN's client pools. ---- */

#ifndef SGW_MAX_CLIENT_POOLS
#define SGW_MAX_CLIENT_POOLS CLIENT_POOLS_TABLE_SIZE
#endif
#ifndef SGW_MAX_CLIENT_PINS
#define SGW_MAX_CLIENT_PINS CLIENT_PINS_TABLE_SIZE
#endif
/* Both ternary tables share one layout; each is held to its own P4 size in userspace. */
#if IKE_SPI_LABELS_TABLE_SIZE > ESP_SPI_RANGES_TABLE_SIZE
#define SGW_MAX_TERNARY IKE_SPI_LABELS_TABLE_SIZE
#else
#define SGW_MAX_TERNARY ESP_SPI_RANGES_TABLE_SIZE
#endif

/* Value of sgw_ra_settings[0] (params of set_ra_config); configured == 0 is the default
 * action mark_ra_unconfigured. */
struct sgw_ra_config {
	__be32 public_ip;
	__u8 configured;
	__u8 pad;
	__u8 public_mac[6];
};

/* Action data of set_pool_gateway, set_pin_gateway, set_ike_gateway and set_esp_gateway
 * (port, gateway_mac), the port resolved to an ifindex; slot indexes the entry's direct
 * counter in its table's counter map, fixed for the entry's lifetime. */
struct sgw_gateway {
	__u32 ifindex; /* 0: port not attached on this target, frames are discarded */
	__u16 port;
	__u16 slot;
	__u8 gateway_mac[6];
	__u16 pad;
};

/* Key of sgw_client_pools: an IPv4 prefix (BPF_MAP_TYPE_LPM_TRIE layout). */
struct sgw_lpm_v4 {
	__u32 prefixlen;
	__u8 addr[4];
};

/* One ternary entry: value and mask in host order, the key right-aligned in 64 bits. */
struct sgw_ternary_entry {
	__u64 value;
	__u64 mask;
	struct sgw_gateway gw;
};

/* A ternary table, entries sorted by descending P4Runtime priority (the first match
 * wins). Replaced as a whole by userspace, so a lookup never sees half an update. */
struct sgw_ternary_table {
	__u32 count;
	__u32 pad;
	struct sgw_ternary_entry entries[SGW_MAX_TERNARY];
};

/* ra_config.ra_settings: the single default action. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sgw_ra_config);
} sgw_ra_settings SEC(".maps");

/* pool_dispatch.client_pools: IPv4 prefix -> gateway (longest prefix wins). */
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, SGW_MAX_CLIENT_POOLS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct sgw_lpm_v4);
	__type(value, struct sgw_gateway);
} sgw_client_pools SEC(".maps");

/* 0 -> number of client_pools entries: the LAN fast path skips the trie while it is empty. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} sgw_client_pool_count SEC(".maps");

/* pool_dispatch.pool_counter: direct counter of sgw_client_pools by slot, per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SGW_MAX_CLIENT_POOLS);
	__type(key, __u32);
	__type(value, struct sgw_counter);
} sgw_pool_counter SEC(".maps");

/* outside_dispatch.client_pins: client IPv4 (network order) -> gateway. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SGW_MAX_CLIENT_PINS);
	__type(key, __be32);
	__type(value, struct sgw_gateway);
} sgw_client_pins SEC(".maps");

/* outside_dispatch.pin_counter: direct counter of sgw_client_pins by slot, per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SGW_MAX_CLIENT_PINS);
	__type(key, __u32);
	__type(value, struct sgw_counter);
} sgw_pin_counter SEC(".maps");

/* outside_dispatch.ike_spi_labels: 0 -> the table (ternary on the 64-bit IKE SPI). A hash
 * map without preallocation, so that an update replaces the value under RCU instead of
 * overwriting it in place. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct sgw_ternary_table);
} sgw_ike_spi_labels SEC(".maps");

/* outside_dispatch.ike_spi_counter: direct counter of sgw_ike_spi_labels by slot, per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SGW_MAX_TERNARY);
	__type(key, __u32);
	__type(value, struct sgw_counter);
} sgw_ike_spi_counter SEC(".maps");

/* outside_dispatch.esp_spi_ranges: 0 -> the table (ternary on the 32-bit ESP SPI), as above. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, struct sgw_ternary_table);
} sgw_esp_spi_ranges SEC(".maps");

/* outside_dispatch.esp_spi_counter: direct counter of sgw_esp_spi_ranges by slot, per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SGW_MAX_TERNARY);
	__type(key, __u32);
	__type(value, struct sgw_counter);
} sgw_esp_spi_counter SEC(".maps");

/* Digests and packet-ins to userspace (struct sgw_event records). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, SGW_EVENTS_BYTES);
} sgw_events SEC(".maps");

#endif
