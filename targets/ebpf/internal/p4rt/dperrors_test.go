package p4rt

import (
	"fmt"
	"testing"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"supergw/targets/ebpf/internal/dataplane"
	c "supergw/targets/ebpf/internal/p4constants"
)

// Data-plane limits reach the controller as OUT_OF_RANGE / RESOURCE_EXHAUSTED
// (from dataplane.ErrOutOfRange / ErrCapacity), not INTERNAL, and leave no trace.
func TestWriteDataplaneLimits(t *testing.T) {
	ports := make([]uint16, 40)
	for i := range ports {
		ports[i] = uint16(i + 1)
	}
	h := newHarness(t, ports...)
	h.primary()
	b := h.srv.bind

	// Bucket MAX_BUCKETS fits the 16-bit match field but not the data plane.
	te := &p4v1.TableEntry{TableId: b.buckets, Match: []*p4v1.FieldMatch{exact(b.bucketsBucket, fromUint(uint64(c.MaxBuckets))...)},
		Action: action(b.setGateway, param(b.gwPortParam, 2), param(b.gwMACParam, 2, 0, 0, 0, 0, 2))}
	if code, msg := h.writeCode(ins(te)); code != codes.OutOfRange || msg == "" {
		t.Errorf("bucket %d: %v %q, want OUT_OF_RANGE", c.MaxBuckets, code, msg)
	}
	if got := h.mustRead(tableEntity(&p4v1.TableEntry{TableId: b.buckets})); len(got) != 0 {
		t.Errorf("failed insert left entries: %v", got)
	}
	if len(h.fake.Buckets()) != 0 {
		t.Errorf("failed insert reached the data plane: %v", h.fake.Buckets())
	}

	// HOST_FLOOD_GROUP with more replicas than the data plane's flood group.
	g := &p4v1.MulticastGroupEntry{MulticastGroupId: c.HostFloodGroup}
	for _, p := range ports[:33] {
		g.Replicas = append(g.Replicas, &p4v1.Replica{PortKind: &p4v1.Replica_Port{Port: fromUint(uint64(p))}})
	}
	pre := &p4v1.Entity{Entity: &p4v1.Entity_PacketReplicationEngineEntry{PacketReplicationEngineEntry: &p4v1.PacketReplicationEngineEntry{
		Type: &p4v1.PacketReplicationEngineEntry_MulticastGroupEntry{MulticastGroupEntry: g}}}}
	if code, msg := h.writeCode(&p4v1.Update{Type: p4v1.Update_INSERT, Entity: pre}); code != codes.ResourceExhausted || msg == "" {
		t.Errorf("33 replicas: %v %q, want RESOURCE_EXHAUSTED", code, msg)
	}
	readAll := &p4v1.Entity{Entity: &p4v1.Entity_PacketReplicationEngineEntry{PacketReplicationEngineEntry: &p4v1.PacketReplicationEngineEntry{
		Type: &p4v1.PacketReplicationEngineEntry_MulticastGroupEntry{MulticastGroupEntry: &p4v1.MulticastGroupEntry{}}}}}
	if got := h.mustRead(readAll); len(got) != 0 {
		t.Errorf("failed group insert left groups: %v", got)
	}
}

func TestDPErrorMapping(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want codes.Code
	}{
		{fmt.Errorf("x: %w", dataplane.ErrNotFound), codes.NotFound},
		{fmt.Errorf("x: %w", dataplane.ErrCapacity), codes.ResourceExhausted},
		{fmt.Errorf("x: %w", dataplane.ErrOutOfRange), codes.OutOfRange},
		{fmt.Errorf("x: %w", errUnsupported), codes.Unimplemented},
		{fmt.Errorf("bpf: permission denied"), codes.Internal},
	} {
		if got := codeOf(dpError("op", tc.err)); got != tc.want {
			t.Errorf("dpError(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func codeOf(err error) codes.Code { return status.Code(err) }

// P4Runtime spec / p4lang/PI: time_since_last_hit may only be asked of tables
// that support idle timeout, and never of a default entry.
func TestReadTimeSinceLastHitScope(t *testing.T) {
	h := newHarness(t)
	h.primary()
	b := h.srv.bind
	h.mustWrite(ins(h.learnedEntry(1, 2, 0)), ins(h.portRole(1, 1)))
	tsl := &p4v1.TableEntry_IdleTimeout{}
	for _, tc := range []struct {
		name string
		te   *p4v1.TableEntry
		want codes.Code
	}{
		{"idle-timeout table", &p4v1.TableEntry{TableId: b.learned, TimeSinceLastHit: tsl}, codes.OK},
		{"table without idle timeout", &p4v1.TableEntry{TableId: b.portRoles, TimeSinceLastHit: tsl}, codes.InvalidArgument},
		{"wildcard over all tables", &p4v1.TableEntry{TimeSinceLastHit: tsl}, codes.InvalidArgument},
		{"default entry", &p4v1.TableEntry{TableId: b.learned, IsDefaultAction: true, TimeSinceLastHit: tsl}, codes.InvalidArgument},
		{"wildcard without time_since_last_hit", &p4v1.TableEntry{}, codes.OK},
	} {
		got, err := h.read(tableEntity(tc.te))
		if status.Code(err) != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
		if tc.want == codes.OK && len(got) == 0 {
			t.Errorf("%s: no entries", tc.name)
		}
	}
}
