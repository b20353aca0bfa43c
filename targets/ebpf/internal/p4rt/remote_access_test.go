package p4rt

import (
	"strings"
	"testing"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"supergw/targets/ebpf/internal/dataplane"
	c "supergw/targets/ebpf/internal/p4constants"
)

// The remote-access tables through P4Runtime: ternary (with priority), LPM and exact
// keys reach the data plane as DispatchKeys, read back canonical, count in their direct
// counters; ra_settings and the outside flood groups are programmed.

func (h *harness) dispatchTable(name string) (uint32, dispatchBinding) {
	h.t.Helper()
	ti, err := h.srv.sch.tableByName(name)
	if err != nil {
		h.t.Fatal(err)
	}
	id := ti.t.GetPreamble().GetId()
	return id, h.srv.bind.dispatch[id]
}

// gatewayEntry is an entry of a dispatch table with the given match, priority and port.
func (h *harness) gatewayEntry(name string, match *p4v1.FieldMatch, priority int32, port byte) *p4v1.TableEntry {
	id, d := h.dispatchTable(name)
	te := &p4v1.TableEntry{TableId: id, Priority: priority,
		Action: action(d.action, param(d.portParam, port), param(d.macParam, 2, 0, 0, 0, 0, port))}
	if match != nil {
		match.FieldId = d.field
		te.Match = []*p4v1.FieldMatch{match}
	}
	return te
}

func gw(port byte) dataplane.Gateway {
	return dataplane.Gateway{Port: uint16(port), MAC: dataplane.MAC{2, 0, 0, 0, 0, port}}
}

func TestRemoteAccessTablesReachDataplane(t *testing.T) {
	h := newHarness(t)
	h.primary()
	b := h.srv.bind
	h.mustWrite(
		ins(h.gatewayEntry(c.TableIKESPILabels, ternary(0, []byte{1, 0, 0, 0, 0, 0, 0, 0}, []byte{0xff, 0, 0, 0, 0, 0, 0, 0}), 10, 5)),
		// The same value and mask at another priority is another entry.
		ins(h.gatewayEntry(c.TableIKESPILabels, ternary(0, []byte{1, 0, 0, 0, 0, 0, 0, 0}, []byte{0xff, 0, 0, 0, 0, 0, 0, 0}), 20, 6)),
		ins(h.gatewayEntry(c.TableESPSPIRanges, ternary(0, []byte{0xc1, 0, 0, 0}, []byte{0xff, 0, 0, 0}), 1, 6)),
		// A ternary entry with the field left out matches everything.
		ins(h.gatewayEntry(c.TableESPSPIRanges, nil, 1, 7)),
		ins(h.gatewayEntry(c.TableClientPins, exact(0, 198, 51, 100, 7), 0, 5)),
		ins(h.gatewayEntry(c.TableClientPools, lpm(0, 24, 10, 90, 1, 0), 0, 6)),
		// An LPM entry with the field left out is the /0 prefix.
		ins(h.gatewayEntry(c.TableClientPools, nil, 0, 7)),
		mod(&p4v1.TableEntry{TableId: b.raSettings, IsDefaultAction: true, Action: action(b.setRA,
			param(b.publicIPParam, 203, 0, 113, 1), param(b.publicMACParam, 2, 0x50, 0, 0, 0, 1))}),
	)
	want := map[dataplane.DispatchTable]map[dataplane.DispatchKey]dataplane.Gateway{
		dataplane.IKESPILabels: {
			{Value: 1 << 56, Mask: 0xff << 56, Priority: 10}: gw(5),
			{Value: 1 << 56, Mask: 0xff << 56, Priority: 20}: gw(6),
		},
		dataplane.ESPSPIRanges: {{Value: 0xc1000000, Mask: 0xff000000, Priority: 1}: gw(6), {Priority: 1}: gw(7)},
		dataplane.ClientPins:   {{Value: 0xc6336407}: gw(5)},
		dataplane.ClientPools:  {{Value: 0x0a5a0100, PrefixLen: 24}: gw(6), {}: gw(7)},
	}
	for table, entries := range want {
		got := h.fake.DispatchEntries(table)
		if len(got) != len(entries) {
			t.Errorf("%v: %v, want %v", table, got, entries)
		}
		for k, g := range entries {
			if got[k] != g {
				t.Errorf("%v[%+v] = %+v, want %+v", table, k, got[k], g)
			}
		}
	}
	if got := h.fake.RA(); got != (dataplane.RAConfig{Configured: true, PublicIP: dataplane.IPv4{203, 0, 113, 1}, PublicMAC: dataplane.MAC{2, 0x50, 0, 0, 0, 1}}) {
		t.Errorf("ra_settings = %+v", got)
	}
	// MODIFY moves the priority-10 entry; DELETE takes only the one with that priority.
	h.mustWrite(mod(h.gatewayEntry(c.TableIKESPILabels, ternary(0, []byte{1, 0, 0, 0, 0, 0, 0, 0}, []byte{0xff, 0, 0, 0, 0, 0, 0, 0}), 10, 7)))
	if got := h.fake.DispatchEntries(dataplane.IKESPILabels)[dataplane.DispatchKey{Value: 1 << 56, Mask: 0xff << 56, Priority: 10}]; got != gw(7) {
		t.Errorf("modified label = %+v", got)
	}
	h.mustWrite(del(h.gatewayEntry(c.TableIKESPILabels, ternary(0, []byte{1, 0, 0, 0, 0, 0, 0, 0}, []byte{0xff, 0, 0, 0, 0, 0, 0, 0}), 20, 0)))
	if got := h.fake.DispatchEntries(dataplane.IKESPILabels); len(got) != 1 {
		t.Errorf("after DELETE of priority 20: %v", got)
	}
	// Back to the initial default.
	h.mustWrite(mod(&p4v1.TableEntry{TableId: b.raSettings, IsDefaultAction: true}))
	if h.fake.RA().Configured {
		t.Error("ra_settings reset did not unconfigure")
	}
}

func TestRemoteAccessMatchErrors(t *testing.T) {
	h := newHarness(t)
	h.primary()
	h.mustWrite(ins(h.gatewayEntry(c.TableIKESPILabels, ternary(0, []byte{1}, []byte{0xff}), 10, 5)))
	spi64 := []byte{0xff, 0, 0, 0, 0, 0, 0, 0}
	for _, tc := range []struct {
		name string
		u    *p4v1.Update
		code codes.Code
		msg  string
	}{
		{"ternary without priority", ins(h.gatewayEntry(c.TableESPSPIRanges, ternary(0, []byte{1}, []byte{1}), 0, 5)), codes.InvalidArgument, "priority must be > 0"},
		{"negative priority", ins(h.gatewayEntry(c.TableESPSPIRanges, ternary(0, []byte{1}, []byte{1}), -1, 5)), codes.InvalidArgument, "priority must be > 0"},
		{"priority on an lpm table", ins(h.gatewayEntry(c.TableClientPools, lpm(0, 8, 10, 0, 0, 0), 3, 5)), codes.InvalidArgument, "priority must be 0"},
		{"priority on an exact table", ins(h.gatewayEntry(c.TableClientPins, exact(0, 1, 2, 3, 4), 3, 5)), codes.InvalidArgument, "priority must be 0"},
		{"value outside the mask", ins(h.gatewayEntry(c.TableESPSPIRanges, ternary(0, []byte{0xc1, 0, 0, 1}, []byte{0xff, 0, 0, 0}), 1, 5)), codes.InvalidArgument, "outside mask"},
		{"zero mask", ins(h.gatewayEntry(c.TableESPSPIRanges, ternary(0, []byte{0}, []byte{0}), 1, 5)), codes.InvalidArgument, "mask is zero"},
		{"mask too wide", ins(h.gatewayEntry(c.TableESPSPIRanges, ternary(0, []byte{1}, []byte{1, 0, 0, 0, 0}), 1, 5)), codes.InvalidArgument, "mask 0x0100000000 does not fit in 32 bits"},
		{"value too wide", ins(h.gatewayEntry(c.TableIKESPILabels, ternary(0, append([]byte{1}, spi64...), []byte{1}), 1, 5)), codes.InvalidArgument, "does not fit in 64 bits"},
		{"empty mask", ins(h.gatewayEntry(c.TableIKESPILabels, ternary(0, []byte{1}, nil), 1, 5)), codes.InvalidArgument, "empty mask"},
		{"exact on a ternary field", ins(h.gatewayEntry(c.TableIKESPILabels, exact(0, 1), 1, 5)), codes.InvalidArgument, "is ternary"},
		{"lpm on a ternary field", ins(h.gatewayEntry(c.TableIKESPILabels, lpm(0, 8, 1), 1, 5)), codes.InvalidArgument, "is ternary"},
		{"ternary on an lpm field", ins(h.gatewayEntry(c.TableClientPools, ternary(0, []byte{1}, []byte{1}), 0, 5)), codes.InvalidArgument, "is lpm"},
		{"prefix 0", ins(h.gatewayEntry(c.TableClientPools, lpm(0, 0, 0), 0, 5)), codes.InvalidArgument, "prefix_len 0 not in [1, 32]"},
		{"prefix 33", ins(h.gatewayEntry(c.TableClientPools, lpm(0, 33, 10, 0, 0, 0), 0, 5)), codes.InvalidArgument, "prefix_len 33"},
		{"negative prefix", ins(h.gatewayEntry(c.TableClientPools, lpm(0, -1, 10, 0, 0, 0), 0, 5)), codes.InvalidArgument, "prefix_len -1"},
		{"host bits below the prefix", ins(h.gatewayEntry(c.TableClientPools, lpm(0, 24, 10, 90, 1, 1), 0, 5)), codes.InvalidArgument, "below its /24"},
		{"exact field missing", ins(h.gatewayEntry(c.TableClientPins, nil, 0, 5)), codes.InvalidArgument, "is missing"},
		{"duplicate ternary entry", ins(h.gatewayEntry(c.TableIKESPILabels, ternary(0, []byte{0, 1}, []byte{0, 0xff}), 10, 6)), codes.AlreadyExists, "already exists"},
		{"modify at another priority", mod(h.gatewayEntry(c.TableIKESPILabels, ternary(0, []byte{1}, []byte{0xff}), 11, 6)), codes.NotFound, "no entry"},
		{"drop action as entry", ins(&p4v1.TableEntry{TableId: h.srv.bind.raSettings, Action: action(h.srv.bind.setRA)}), codes.InvalidArgument, "keyless"},
	} {
		code, msg := h.writeCode(tc.u)
		if code != tc.code || !strings.Contains(msg, tc.msg) {
			t.Errorf("%s: got %v %q, want %v containing %q", tc.name, code, msg, tc.code, tc.msg)
		}
	}
	if got := h.fake.DispatchEntries(dataplane.ESPSPIRanges); len(got) != 0 {
		t.Errorf("failed writes reached the data plane: %v", got)
	}
}

func TestRemoteAccessReadBackCanonical(t *testing.T) {
	h := newHarness(t)
	h.primary()
	// Padded values and masks are stored and read back in their shortest form.
	h.mustWrite(
		ins(h.gatewayEntry(c.TableESPSPIRanges, ternary(0, []byte{0, 0, 0, 0xc1, 0, 0, 0}, []byte{0, 0, 0xff, 0, 0, 0}), 5, 6)),
		ins(h.gatewayEntry(c.TableClientPools, lpm(0, 16, 0, 0, 10, 90, 0, 0), 0, 6)),
	)
	espID, _ := h.dispatchTable(c.TableESPSPIRanges)
	got := h.mustRead(tableRead(&p4v1.TableEntry{TableId: espID}))
	if len(got) != 1 {
		t.Fatalf("esp_spi_ranges: %v", got)
	}
	te := got[0].GetTableEntry()
	tm := te.GetMatch()[0].GetTernary()
	if te.GetPriority() != 5 || string(tm.GetValue()) != "\xc1\x00\x00\x00" || string(tm.GetMask()) != "\xff\x00\x00\x00" {
		t.Errorf("read back %v", te)
	}
	// A read naming the match and priority finds it; another priority does not.
	if n := len(h.mustRead(tableRead(&p4v1.TableEntry{TableId: espID, Priority: 5, Match: []*p4v1.FieldMatch{ternary(te.GetMatch()[0].GetFieldId(), tm.GetValue(), tm.GetMask())}}))); n != 1 {
		t.Errorf("read by match and priority: %d entries", n)
	}
	if n := len(h.mustRead(tableRead(&p4v1.TableEntry{TableId: espID, Priority: 6}))); n != 0 {
		t.Errorf("read at another priority: %d entries", n)
	}
	poolID, _ := h.dispatchTable(c.TableClientPools)
	got = h.mustRead(tableRead(&p4v1.TableEntry{TableId: poolID}))
	if l := got[0].GetTableEntry().GetMatch()[0].GetLpm(); len(got) != 1 || string(l.GetValue()) != "\x0a\x5a\x00\x00" || l.GetPrefixLen() != 16 {
		t.Errorf("client_pools read back %v", got)
	}
}

func TestRemoteAccessDirectCounters(t *testing.T) {
	h := newHarness(t)
	h.primary()
	entry := h.gatewayEntry(c.TableIKESPILabels, ternary(0, []byte{2, 0, 0, 0, 0, 0, 0, 0}, []byte{0xff, 0, 0, 0, 0, 0, 0, 0}), 3, 5)
	h.mustWrite(ins(entry))
	key := dataplane.DispatchKey{Value: 2 << 56, Mask: 0xff << 56, Priority: 3}
	if err := h.fake.SetDispatchCounter(dataplane.IKESPILabels, key, dataplane.Counter{Packets: 4, Bytes: 400}); err != nil {
		t.Fatal(err)
	}
	read := proto.Clone(entry).(*p4v1.TableEntry)
	read.Action = nil
	got := h.mustRead(&p4v1.Entity{Entity: &p4v1.Entity_DirectCounterEntry{DirectCounterEntry: &p4v1.DirectCounterEntry{TableEntry: read}}})
	if len(got) != 1 || got[0].GetDirectCounterEntry().GetData().GetPacketCount() != 4 || got[0].GetDirectCounterEntry().GetTableEntry().GetPriority() != 3 {
		t.Fatalf("direct counter read: %v", got)
	}
	// A MODIFY of the counter through P4Runtime, then the table read with counter_data.
	h.mustWrite(&p4v1.Update{Type: p4v1.Update_MODIFY, Entity: &p4v1.Entity{Entity: &p4v1.Entity_DirectCounterEntry{DirectCounterEntry: &p4v1.DirectCounterEntry{
		TableEntry: read, Data: &p4v1.CounterData{PacketCount: 9, ByteCount: 900}}}}})
	read.CounterData = &p4v1.CounterData{}
	got = h.mustRead(tableRead(read))
	if len(got) != 1 || got[0].GetTableEntry().GetCounterData().GetByteCount() != 900 {
		t.Fatalf("table read with counter_data: %v", got)
	}
	// Re-inserting after DELETE starts the counter at zero.
	h.mustWrite(del(entry), ins(entry))
	if c, _ := h.fake.DispatchCounter(dataplane.IKESPILabels, key); c != (dataplane.Counter{}) {
		t.Errorf("counter after re-insert: %+v", c)
	}
}

func TestOutsideFloodGroupsReachDataplane(t *testing.T) {
	h := newHarness(t, 1, 2, 3)
	h.primary()
	for _, g := range []uint32{c.HostFloodGroup, c.GatewayOutsideFloodGroup, c.UplinkFloodGroup, 9} {
		h.mustWrite(&p4v1.Update{Type: p4v1.Update_INSERT, Entity: &p4v1.Entity{Entity: &p4v1.Entity_PacketReplicationEngineEntry{PacketReplicationEngineEntry: &p4v1.PacketReplicationEngineEntry{
			Type: &p4v1.PacketReplicationEngineEntry_MulticastGroupEntry{MulticastGroupEntry: &p4v1.MulticastGroupEntry{
				MulticastGroupId: g, Replicas: []*p4v1.Replica{{PortKind: &p4v1.Replica_Port{Port: []byte{2}}}}}}}}}})
	}
	groups := h.fake.FloodGroups()
	for _, g := range []uint16{c.HostFloodGroup, c.GatewayOutsideFloodGroup, c.UplinkFloodGroup} {
		if len(groups[g]) != 1 {
			t.Errorf("group %d not in the data plane: %v", g, groups)
		}
	}
	if _, ok := groups[9]; ok {
		t.Errorf("group 9, which the program never floods to, reached the data plane")
	}
}

func TestPortRolesOfTheOutsideSwitch(t *testing.T) {
	h := newHarness(t)
	h.primary()
	h.mustWrite(ins(h.portRole(1, byte(c.PortRoleUplink))), ins(h.portRole(2, byte(c.PortRoleGatewayOutside))))
	if got := h.fake.PortRoles(); got[1] != uint8(c.PortRoleUplink) || got[2] != uint8(c.PortRoleGatewayOutside) {
		t.Errorf("port roles %v", got)
	}
}
