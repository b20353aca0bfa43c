package p4rt

import (
	"testing"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"supergw/targets/ebpf/internal/dataplane"
)

func tableRead(te *p4v1.TableEntry) *p4v1.Entity {
	return &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: te}}
}

func TestReadWildcards(t *testing.T) {
	h := newHarness(t)
	h.primary()
	b := h.srv.bind
	h.mustWrite(ins(h.portRole(1, 1)), ins(h.portRole(2, 2)), ins(h.bucket(0, 1)), ins(h.learnedEntry(9, 1, 0)))

	if got := h.mustRead(tableRead(&p4v1.TableEntry{})); len(got) != 4 {
		t.Errorf("all tables: %d entries, want 4", len(got))
	}
	if got := h.mustRead(tableRead(&p4v1.TableEntry{TableId: b.portRoles})); len(got) != 2 {
		t.Errorf("port_roles: %d entries, want 2", len(got))
	}
	got := h.mustRead(tableRead(&p4v1.TableEntry{TableId: b.portRoles, Match: []*p4v1.FieldMatch{exact(b.portRolesPort, 2)}}))
	if len(got) != 1 || toUint(got[0].GetTableEntry().GetAction().GetAction().GetParams()[0].GetValue()) != 2 {
		t.Errorf("port_roles[2]: %v", got)
	}
	// Partial match on a two-field key filters.
	got = h.mustRead(tableRead(&p4v1.TableEntry{TableId: b.learned, Match: []*p4v1.FieldMatch{exact(b.learnedPort, 1)}}))
	if len(got) != 1 {
		t.Errorf("learned_sources port 1: %v", got)
	}
	// Several entities in one request.
	if got := h.mustRead(tableRead(&p4v1.TableEntry{TableId: b.portRoles}), tableRead(&p4v1.TableEntry{TableId: b.buckets})); len(got) != 3 {
		t.Errorf("two tables: %d", len(got))
	}
	if _, err := h.read(tableRead(&p4v1.TableEntry{TableId: 0x02000099})); status.Code(err) != codes.InvalidArgument {
		t.Errorf("unknown table read: %v", err)
	}
	if _, err := h.read(&p4v1.Entity{Entity: &p4v1.Entity_RegisterEntry{RegisterEntry: &p4v1.RegisterEntry{}}}); status.Code(err) != codes.Unimplemented {
		t.Errorf("register read: %v", err)
	}
}

func TestReadDefaultEntries(t *testing.T) {
	h := newHarness(t)
	h.primary()
	b := h.srv.bind
	got := h.mustRead(tableRead(&p4v1.TableEntry{TableId: b.settings, IsDefaultAction: true}))
	if len(got) != 1 || got[0].GetTableEntry().GetAction().GetAction().GetActionId() != b.unconfigured || !got[0].GetTableEntry().GetIsDefaultAction() {
		t.Fatalf("initial settings default: %v", got)
	}
	h.mustWrite(mod(&p4v1.TableEntry{TableId: b.settings, IsDefaultAction: true, Action: action(b.setDispatch,
		param(b.gwIPParam, 10, 0, 0, 1), param(b.vmacParam, 2, 0, 0, 0, 0, 0), param(b.maskParam, 0, 15), param(b.hashParam, 1))}))
	got = h.mustRead(tableRead(&p4v1.TableEntry{TableId: b.settings, IsDefaultAction: true}))
	a := got[0].GetTableEntry().GetAction().GetAction()
	if a.GetActionId() != b.setDispatch || toUint(a.GetParams()[2].GetValue()) != 15 || toUint(a.GetParams()[3].GetValue()) != 1 {
		t.Fatalf("modified settings default: %v", got)
	}
	if got := h.mustRead(tableRead(&p4v1.TableEntry{IsDefaultAction: true})); len(got) != len(h.srv.sch.tables) {
		t.Errorf("all default entries: %d, want %d", len(got), len(h.srv.sch.tables))
	}
	// A wildcard read does not return default entries.
	if got := h.mustRead(tableRead(&p4v1.TableEntry{TableId: b.settings})); len(got) != 0 {
		t.Errorf("settings wildcard: %v", got)
	}
}

func TestDirectCounters(t *testing.T) {
	h := newHarness(t)
	h.primary()
	b := h.srv.bind
	h.mustWrite(ins(h.bucket(3, 1)), ins(h.bucket(4, 2)))
	if err := h.fake.SetBucketCounter(3, dataplane.Counter{Packets: 5, Bytes: 500}); err != nil {
		t.Fatal(err)
	}
	// counter_data on a table read.
	got := h.mustRead(tableRead(&p4v1.TableEntry{TableId: b.buckets, Match: []*p4v1.FieldMatch{exact(b.bucketsBucket, 3)}, CounterData: &p4v1.CounterData{}}))
	if cd := got[0].GetTableEntry().GetCounterData(); cd.GetPacketCount() != 5 || cd.GetByteCount() != 500 {
		t.Errorf("counter_data %v", cd)
	}
	got = h.mustRead(tableRead(&p4v1.TableEntry{TableId: b.buckets, Match: []*p4v1.FieldMatch{exact(b.bucketsBucket, 3)}}))
	if got[0].GetTableEntry().GetCounterData() != nil {
		t.Error("counter_data returned without being asked")
	}
	// DirectCounterEntry read: wildcard and one entry.
	dce := func(te *p4v1.TableEntry) *p4v1.Entity {
		return &p4v1.Entity{Entity: &p4v1.Entity_DirectCounterEntry{DirectCounterEntry: &p4v1.DirectCounterEntry{TableEntry: te}}}
	}
	if got := h.mustRead(dce(&p4v1.TableEntry{TableId: b.buckets})); len(got) != 2 {
		t.Errorf("direct counter wildcard: %v", got)
	}
	// Write resets one.
	h.mustWrite(&p4v1.Update{Type: p4v1.Update_MODIFY, Entity: &p4v1.Entity{Entity: &p4v1.Entity_DirectCounterEntry{DirectCounterEntry: &p4v1.DirectCounterEntry{
		TableEntry: &p4v1.TableEntry{TableId: b.buckets, Match: []*p4v1.FieldMatch{exact(b.bucketsBucket, 3)}},
		Data:       &p4v1.CounterData{PacketCount: 1, ByteCount: 2}}}}})
	got = h.mustRead(dce(&p4v1.TableEntry{TableId: b.buckets, Match: []*p4v1.FieldMatch{exact(b.bucketsBucket, 3)}}))
	if d := got[0].GetDirectCounterEntry().GetData(); len(got) != 1 || d.GetPacketCount() != 1 || d.GetByteCount() != 2 {
		t.Errorf("after write: %v", got)
	}
	// Direct counter of a missing entry, or on a table without one.
	code, _ := h.writeCode(&p4v1.Update{Type: p4v1.Update_MODIFY, Entity: &p4v1.Entity{Entity: &p4v1.Entity_DirectCounterEntry{DirectCounterEntry: &p4v1.DirectCounterEntry{
		TableEntry: &p4v1.TableEntry{TableId: b.buckets, Match: []*p4v1.FieldMatch{exact(b.bucketsBucket, 9)}}}}}})
	if code != codes.NotFound {
		t.Errorf("missing entry: %v", code)
	}
	code, _ = h.writeCode(&p4v1.Update{Type: p4v1.Update_MODIFY, Entity: &p4v1.Entity{Entity: &p4v1.Entity_DirectCounterEntry{DirectCounterEntry: &p4v1.DirectCounterEntry{
		TableEntry: &p4v1.TableEntry{TableId: b.portRoles, Match: []*p4v1.FieldMatch{exact(b.portRolesPort, 1)}}}}}})
	if code != codes.InvalidArgument {
		t.Errorf("table without direct counter: %v", code)
	}
	// A new entry starts at zero.
	h.mustWrite(del(h.bucket(3, 0)), ins(h.bucket(3, 1)))
	got = h.mustRead(dce(&p4v1.TableEntry{TableId: b.buckets, Match: []*p4v1.FieldMatch{exact(b.bucketsBucket, 3)}}))
	if d := got[0].GetDirectCounterEntry().GetData(); d.GetPacketCount() != 0 {
		t.Errorf("re-inserted entry counter %v", d)
	}
}

func TestIndirectCounter(t *testing.T) {
	h := newHarness(t)
	h.primary()
	b := h.srv.bind
	if err := h.fake.CountDrop(4, 60); err != nil {
		t.Fatal(err)
	}
	ce := func(id uint32, idx *p4v1.Index) *p4v1.Entity {
		return &p4v1.Entity{Entity: &p4v1.Entity_CounterEntry{CounterEntry: &p4v1.CounterEntry{CounterId: id, Index: idx}}}
	}
	got := h.mustRead(ce(b.dropCounter, &p4v1.Index{Index: 4}))
	if d := got[0].GetCounterEntry().GetData(); len(got) != 1 || d.GetPacketCount() != 1 || d.GetByteCount() != 60 {
		t.Errorf("drop_counter[4] = %v", got)
	}
	if got := h.mustRead(ce(b.dropCounter, nil)); int64(len(got)) != b.dropCounterSize {
		t.Errorf("wildcard index: %d entries, want %d", len(got), b.dropCounterSize)
	}
	var all int64
	for _, c := range h.srv.sch.counters {
		all += c.GetSize()
	}
	if got := h.mustRead(ce(0, nil)); int64(len(got)) != all || all <= b.dropCounterSize {
		t.Errorf("all counters: %d entries, want %d (drop_counter and gateway_liveness's two)", len(got), all)
	}
	if _, err := h.read(ce(b.dropCounter, &p4v1.Index{Index: b.dropCounterSize})); status.Code(err) != codes.OutOfRange {
		t.Errorf("index out of range: %v", err)
	}
	if _, err := h.read(ce(0x12000099, nil)); status.Code(err) != codes.InvalidArgument {
		t.Errorf("unknown counter: %v", err)
	}
	// Reset by write.
	h.mustWrite(&p4v1.Update{Type: p4v1.Update_MODIFY, Entity: &p4v1.Entity{Entity: &p4v1.Entity_CounterEntry{CounterEntry: &p4v1.CounterEntry{
		CounterId: b.dropCounter, Index: &p4v1.Index{Index: 4}, Data: &p4v1.CounterData{}}}}})
	got = h.mustRead(ce(b.dropCounter, &p4v1.Index{Index: 4}))
	if got[0].GetCounterEntry().GetData().GetPacketCount() != 0 {
		t.Errorf("after reset: %v", got)
	}
	code, _ := h.writeCode(&p4v1.Update{Type: p4v1.Update_INSERT, Entity: &p4v1.Entity{Entity: &p4v1.Entity_CounterEntry{CounterEntry: &p4v1.CounterEntry{CounterId: b.dropCounter}}}})
	if code != codes.InvalidArgument {
		t.Errorf("counter INSERT: %v", code)
	}
}

func mcastUpdate(typ p4v1.Update_Type, id uint32, replicas ...*p4v1.Replica) *p4v1.Update {
	return &p4v1.Update{Type: typ, Entity: &p4v1.Entity{Entity: &p4v1.Entity_PacketReplicationEngineEntry{PacketReplicationEngineEntry: &p4v1.PacketReplicationEngineEntry{
		Type: &p4v1.PacketReplicationEngineEntry_MulticastGroupEntry{MulticastGroupEntry: &p4v1.MulticastGroupEntry{MulticastGroupId: id, Replicas: replicas}}}}}}
}

func replica(port byte) *p4v1.Replica {
	return &p4v1.Replica{PortKind: &p4v1.Replica_Port{Port: []byte{0, port}}}
}

func TestMulticastGroups(t *testing.T) {
	h := newHarness(t, 1, 2, 3)
	h.primary()
	h.mustWrite(mcastUpdate(p4v1.Update_INSERT, 1, replica(1), replica(2), &p4v1.Replica{PortKind: &p4v1.Replica_EgressPort{EgressPort: 3}}))
	if got := h.fake.FloodGroups()[1]; len(got) != 3 {
		t.Fatalf("group 1 = %v", got)
	}
	read := func(id uint32) []*p4v1.Entity {
		return h.mustRead(&p4v1.Entity{Entity: &p4v1.Entity_PacketReplicationEngineEntry{PacketReplicationEngineEntry: &p4v1.PacketReplicationEngineEntry{
			Type: &p4v1.PacketReplicationEngineEntry_MulticastGroupEntry{MulticastGroupEntry: &p4v1.MulticastGroupEntry{MulticastGroupId: id}}}}})
	}
	got := read(1)
	if len(got) != 1 || len(got[0].GetPacketReplicationEngineEntry().GetMulticastGroupEntry().GetReplicas()) != 3 {
		t.Fatalf("read group 1: %v", got)
	}
	if r := got[0].GetPacketReplicationEngineEntry().GetMulticastGroupEntry().GetReplicas()[2]; string(r.GetPort()) != "\x03" {
		t.Errorf("replica port not canonical: %v", r)
	}
	h.mustWrite(mcastUpdate(p4v1.Update_INSERT, 7, replica(1)))
	if got := read(0); len(got) != 2 {
		t.Errorf("wildcard read: %v", got)
	}
	if _, ok := h.fake.FloodGroups()[7]; ok {
		t.Error("group 7 is not used by the program and must stay out of the data plane")
	}
	h.mustWrite(mcastUpdate(p4v1.Update_MODIFY, 1, replica(2)))
	if got := h.fake.FloodGroups()[1]; len(got) != 1 || got[0] != 2 {
		t.Errorf("after modify: %v", got)
	}
	for _, tc := range []struct {
		name string
		u    *p4v1.Update
		code codes.Code
	}{
		{"insert existing", mcastUpdate(p4v1.Update_INSERT, 1), codes.AlreadyExists},
		{"modify missing", mcastUpdate(p4v1.Update_MODIFY, 5), codes.NotFound},
		{"delete missing", mcastUpdate(p4v1.Update_DELETE, 5), codes.NotFound},
		{"unknown port", mcastUpdate(p4v1.Update_INSERT, 2, replica(9)), codes.InvalidArgument},
		{"duplicate replica", mcastUpdate(p4v1.Update_INSERT, 2, replica(1), replica(1)), codes.InvalidArgument},
		{"group 0", mcastUpdate(p4v1.Update_INSERT, 0), codes.InvalidArgument},
		{"group too big", mcastUpdate(p4v1.Update_INSERT, 70000), codes.InvalidArgument},
		{"clone session", &p4v1.Update{Type: p4v1.Update_INSERT, Entity: &p4v1.Entity{Entity: &p4v1.Entity_PacketReplicationEngineEntry{PacketReplicationEngineEntry: &p4v1.PacketReplicationEngineEntry{
			Type: &p4v1.PacketReplicationEngineEntry_CloneSessionEntry{CloneSessionEntry: &p4v1.CloneSessionEntry{SessionId: 1}}}}}}, codes.Unimplemented},
	} {
		if code, msg := h.writeCode(tc.u); code != tc.code {
			t.Errorf("%s: %v %q, want %v", tc.name, code, msg, tc.code)
		}
	}
	h.mustWrite(mcastUpdate(p4v1.Update_DELETE, 1))
	if _, ok := h.fake.FloodGroups()[1]; ok {
		t.Error("group 1 not deleted")
	}
}
