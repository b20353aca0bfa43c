// Package dataplane is the boundary between the P4Runtime server and the eBPF
// programs: one typed method per P4 table/extern, in P4 port numbers and raw
// field values. The real implementation is backed by BPF maps (ebpf.go); a fake
// (fake.go) lets the server be unit-tested without root.
package dataplane

import (
	"errors"
	"time"

	"supergw/targets/ebpf/internal/p4constants"
)

// MAC is an Ethernet address in network byte order.
type MAC [6]byte

// IPv4 is an IPv4 address in network byte order.
type IPv4 [4]byte

// IPv6 is an IPv6 address in network byte order.
type IPv6 [16]byte

// DispatchConfig mirrors the params of SupergwIngress.dispatch_config.set_dispatch_config.
// Configured=false is the initial default action mark_unconfigured.
type DispatchConfig struct {
	Configured bool
	GatewayIP  IPv4
	VMACBase   MAC
	BucketMask uint16
	// BucketHash picks bucket(mac): CRC-32 (the zero value) or the MAC's low bits.
	BucketHash p4constants.BucketHash
}

// NDConfig mirrors the params of SupergwIngress.nd_config.set_nd_config: the gateway's
// shared IPv6 addresses, :: for unset. Configured=false is the initial default action
// mark_nd_unconfigured (no gateway address).
type NDConfig struct {
	Configured bool
	LinkLocal  IPv6
	Global     IPv6
}

// LearnedIP6Key identifies a learned_ip6s entry.
type LearnedIP6Key struct {
	IP  IPv6
	MAC MAC
}

// LearnedKey identifies a learned_sources entry.
type LearnedKey struct {
	MAC  MAC
	Port uint16
}

// RAConfig mirrors the params of SupergwIngress.ra_config.set_ra_config (the outside
// switch of remote access). Configured=false is the initial default action
// mark_ra_unconfigured.
type RAConfig struct {
	Configured bool
	PublicIP   IPv4
	PublicMAC  MAC
}

// DispatchTable names a table whose action sends a frame to one gateway (Gateway) and
// counts it in the entry's direct counter: the LAN's client_pools and the outside
// switch's client_pins, ike_spi_labels and esp_spi_ranges. Their default actions are
// fixed (fall through to buckets, or drop), so only entries are written.
type DispatchTable uint8

const (
	// ClientPools is pool_dispatch.client_pools: LPM on a host frame's IPv4 destination.
	ClientPools DispatchTable = iota + 1
	// ClientPins is outside_dispatch.client_pins: exact on a client's outer IPv4 address.
	ClientPins
	// IKESPILabels is outside_dispatch.ike_spi_labels: ternary on the 64-bit IKE SPI.
	IKESPILabels
	// ESPSPIRanges is outside_dispatch.esp_spi_ranges: ternary on the 32-bit ESP SPI.
	ESPSPIRanges
)

// DispatchKey is the match of a DispatchTable entry, its key as an integer (an IPv4
// address in network order read as a big-endian number):
//   - ClientPools: Value and PrefixLen (0..32), the bits below the prefix zero;
//   - ClientPins: Value only;
//   - IKESPILabels, ESPSPIRanges: Value, Mask (Value has no bit outside Mask) and
//     Priority (> 0; the higher wins, as in P4Runtime).
//
// Fields a table does not use must be zero.
type DispatchKey struct {
	Value     uint64
	Mask      uint64
	PrefixLen uint8
	Priority  int32
}

// Gateway is the action data of every DispatchTable entry: the gateway's port and real MAC.
type Gateway struct {
	Port uint16
	MAC  MAC
}

// GatewayBackup mirrors the params of SupergwIngress.gateway_liveness.set_backup: where the
// buckets of a gateway go while its liveness frames have stopped for longer than Timeout.
type GatewayBackup struct {
	Port    uint16
	MAC     MAC
	Timeout time.Duration
}

// PortCounter names an indexed counter of gateway_liveness, indexed by P4 port.
type PortCounter uint8

const (
	// LivenessFrames is gateway_liveness.liveness_frames: liveness frames heard per port.
	LivenessFrames PortCounter = iota + 1
	// FailoverFrames is gateway_liveness.failover_frames: per gateway port, frames of its
	// buckets sent to its backup because it was stale.
	FailoverFrames
)

// Counter is a packets-and-bytes counter value.
type Counter struct {
	Packets uint64
	Bytes   uint64
}

// EventKind says what an Event carries.
type EventKind int

const (
	// EventDigest is a learn_digest_t emitted by the learn action.
	EventDigest EventKind = iota + 1
	// EventPacketIn is a frame punted to the CPU port.
	EventPacketIn
	// EventDigestIP6 is a learn_ip6_digest_t emitted by the learn_ip6 action.
	EventDigestIP6
)

// Event is a digest or a packet-in coming up from the data plane.
type Event struct {
	Kind EventKind
	// Digest fields (learn_digest_t).
	SrcMAC MAC
	Port   uint16
	SrcIP  IPv4
	// SrcIP6 is the source of an EventDigestIP6 (with SrcMAC and Port).
	SrcIP6 IPv6
	// Packet-in fields.
	IngressPort uint16
	Reason      uint16
	Frame       []byte
}

// Dataplane is what the P4Runtime server needs from the switch. Set* methods
// insert or overwrite; Delete* methods of an absent key return ErrNotFound.
type Dataplane interface {
	// Ports returns the P4 port numbers this target was started with (-i N@iface).
	Ports() []uint16

	SetPortRole(port uint16, role uint8) error
	DeletePortRole(port uint16) error

	SetDispatchConfig(cfg DispatchConfig) error

	SetHostIP(ip IPv4, mac MAC) error
	DeleteHostIP(ip IPv4) error

	// SetNDConfig sets nd_settings' default action (set_nd_config or, with
	// Configured=false, mark_nd_unconfigured).
	SetNDConfig(cfg NDConfig) error
	SetHostIPv6(ip IPv6, mac MAC) error
	DeleteHostIPv6(ip IPv6) error
	SetLearnedIP6(ip IPv6, mac MAC) error
	DeleteLearnedIP6(ip IPv6, mac MAC) error
	LearnedIP6Idle(ip IPv6, mac MAC) (time.Duration, error)
	LearnedIP6IdleAll() (map[LearnedIP6Key]time.Duration, error)

	SetBucket(bucket uint16, port uint16, gatewayMAC MAC) error
	DeleteBucket(bucket uint16) error
	// BucketCounter reads the direct counter of one bucket entry (summed over CPUs).
	BucketCounter(bucket uint16) (Counter, error)
	SetBucketCounter(bucket uint16, c Counter) error

	// SetGatewayBackup installs gateway_backups' set_backup for the gateway on port gateway
	// (insert or modify); DeleteGatewayBackup removes it (no_backup).
	SetGatewayBackup(gateway uint16, b GatewayBackup) error
	DeleteGatewayBackup(gateway uint16) error
	// PortCounter reads one port's cell of a gateway_liveness counter (summed over CPUs).
	PortCounter(c PortCounter, port uint16) (Counter, error)
	SetPortCounter(c PortCounter, port uint16, v Counter) error

	// SetRAConfig sets ra_settings' default action (set_ra_config or, with
	// Configured=false, mark_ra_unconfigured).
	SetRAConfig(cfg RAConfig) error

	// SetDispatchEntry inserts or modifies an entry of a DispatchTable; an insert starts
	// its direct counter at zero, a modify keeps it. A key that breaks DispatchKey's rules
	// for the table is ErrBadKey.
	SetDispatchEntry(t DispatchTable, k DispatchKey, gw Gateway) error
	DeleteDispatchEntry(t DispatchTable, k DispatchKey) error
	// DispatchCounter reads the direct counter of one entry (summed over CPUs).
	DispatchCounter(t DispatchTable, k DispatchKey) (Counter, error)
	SetDispatchCounter(t DispatchTable, k DispatchKey, c Counter) error

	// SetL2 installs mac_table's set_output_port(port, role); role is the role the
	// controller gives port (anything but HOST makes a gateway's frame GATEWAY_TO_GATEWAY).
	SetL2(mac MAC, port uint16, role uint8) error
	DeleteL2(mac MAC) error

	SetLearned(mac MAC, port uint16) error
	DeleteLearned(mac MAC, port uint16) error
	// LearnedIdle reports how long ago (mac, port) last matched a frame.
	LearnedIdle(mac MAC, port uint16) (time.Duration, error)
	// LearnedIdleAll reports it for every learned entry, in one read of the table
	// (the idle-timeout scan reads them all every 100 ms).
	LearnedIdleAll() (map[LearnedKey]time.Duration, error)

	// SetFloodGroup sets the replicas of multicast group id (the program floods to
	// HOST_FLOOD_GROUP, GATEWAY_OUTSIDE_FLOOD_GROUP and UPLINK_FLOOD_GROUP); an empty list
	// deletes the group.
	SetFloodGroup(id uint16, ports []uint16) error

	// DropCounter reads one index of SupergwIngress.drop_counter.
	DropCounter(reason uint16) (Counter, error)
	SetDropCounter(reason uint16, c Counter) error
	// CountDrop adds one packet of n bytes to drop_counter[reason] (used for drops
	// decided in the server, such as a packet-out to a port that does not exist).
	CountDrop(reason uint16, n int) error

	// Transmit sends frame out of a port unchanged (packet-out).
	Transmit(port uint16, frame []byte) error

	// Events delivers digests and packet-ins until Close.
	Events() <-chan Event

	// Close detaches every program and removes every pinned map.
	Close() error
}

// Errors every Dataplane wraps (test with errors.Is), so that callers can map
// them to P4Runtime codes.
var (
	// ErrNotFound is returned when deleting or reading a key that is not installed.
	ErrNotFound = errors.New("entry not found")
	// ErrCapacity is returned when the data plane has no room left: a full map,
	// or more replicas than a flood group holds.
	ErrCapacity = errors.New("data plane capacity exhausted")
	// ErrOutOfRange is returned for an index the data plane has no slot for: a
	// bucket >= MAX_BUCKETS, a counter index or a group id beyond its array.
	ErrOutOfRange = errors.New("index out of range")
	// ErrBadKey is returned for a DispatchKey that does not fit its table: a value wider
	// than the key, bits outside a mask or below a prefix, a priority where none belongs.
	ErrBadKey = errors.New("key does not fit the table")
)
