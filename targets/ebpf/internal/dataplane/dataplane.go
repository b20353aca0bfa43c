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

// LearnedKey identifies a learned_sources entry.
type LearnedKey struct {
	MAC  MAC
	Port uint16
}

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
)

// Event is a digest or a packet-in coming up from the data plane.
type Event struct {
	Kind EventKind
	// Digest fields (learn_digest_t).
	SrcMAC MAC
	Port   uint16
	SrcIP  IPv4
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

	SetBucket(bucket uint16, port uint16, gatewayMAC MAC) error
	DeleteBucket(bucket uint16) error
	// BucketCounter reads the direct counter of one bucket entry (summed over CPUs).
	BucketCounter(bucket uint16) (Counter, error)
	SetBucketCounter(bucket uint16, c Counter) error

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

	// SetFloodGroup sets the replicas of multicast group id (only HOST_FLOOD_GROUP is
	// used by the program); an empty list deletes the group.
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
)
