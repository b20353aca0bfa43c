// Every table and extern size of the supergw pipeline, in one place.
// p4src/gen_constants.py exports these to the controller, the Go switch and the eBPF C.

#ifndef SUPERGW_SIZE_P4
#define SUPERGW_SIZE_P4

// Bucket tables are indexed by a 16-bit bucket id, but only K <= MAX_BUCKETS are used
// (K is chosen at run time through SupergwIngress.dispatch_config.settings).
#define MAX_BUCKETS 4096

// v1model ports are bit<9>: at most 512 of them.
#define PORT_ROLES_TABLE_SIZE 512
// Keyless: only its default action is ever written.
#define SETTINGS_TABLE_SIZE 1
// Hosts: each learned host takes one entry in each of these three (on the LAN switch).
// 65,536 hold a site of 50,000 hosts with room to spare (docs/DESIGN.md, "Sizing"); the
// controller refuses, counts and logs a host beyond the smallest of the switch's sizes.
#define HOST_IPS_TABLE_SIZE 65536
#define MAC_TABLE_SIZE 65536
#define LEARNED_SOURCES_TABLE_SIZE 65536
// Remote access. Keyless, like settings.
#define RA_SETTINGS_TABLE_SIZE 1
// LAN switch: one address pool per gateway, a few prefixes each.
#define CLIENT_POOLS_TABLE_SIZE 256
// Outside switch: one pin per established client's outer address.
#define CLIENT_PINS_TABLE_SIZE 8192
// Outside switch: one IKE SPI label and one ESP SPI range per gateway (ternary).
#define IKE_SPI_LABELS_TABLE_SIZE 64
#define ESP_SPI_RANGES_TABLE_SIZE 64
// IPv6 ND. Keyless, like settings.
#define ND_SETTINGS_TABLE_SIZE 1
// A host has a link-local and one or more global addresses: two per learned host.
#define HOST_IP6S_TABLE_SIZE 131072
#define LEARNED_IP6S_TABLE_SIZE 131072

// Gateway liveness: one backup entry, one timestamp and two counter cells per port (a
// gateway is a port), indexed by the P4 port number.
#define GATEWAY_BACKUPS_TABLE_SIZE 512
#define GATEWAY_LIVENESS_SIZE 512

// Indexed by drop_reason_t; room for reasons added later without resizing the counter.
#define DROP_COUNTER_SIZE 32

#endif  // SUPERGW_SIZE_P4
