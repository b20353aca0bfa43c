package p4rt

import (
	"context"
	"fmt"
	"io"
	"slices"
	"testing"

	p4configv1 "github.com/p4lang/p4runtime/go/p4/config/v1"
	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"supergw/targets/ebpf/internal/dataplane"
)

// FuzzWrite sends Write requests built from the P4Info by fuzz bytes (ids of
// real and unknown tables, fields, actions and params; values of the right,
// zero, too large and padded widths; every update type and entity kind) to the
// server over gRPC with the fake data plane, and checks:
//
//   - the server never panics (a panic in a handler kills the test binary);
//   - a failed Write is UNKNOWN with exactly one p4.v1.Error per update, in
//     order; a failed update has a code other than OK and a message;
//   - an update that failed changed nothing: the state read back over
//     P4Runtime (all entries, defaults, groups, digests, counters) and the
//     fake data plane's state are as before it.
//
// Each input is a sequence of single-update Writes, then the same updates as
// one batch (shape checks only). The seeds and testdata/fuzz/FuzzWrite run as
// a normal test; `go test -fuzz FuzzWrite ./internal/p4rt` explores.
func FuzzWrite(f *testing.F) {
	h := newHarness(f)
	h.primary()
	for _, seed := range [][]byte{
		{},
		{0, 1, 0, 0, 0, 0, 1, 1, 1, 1, 1},
		{1, 1, 0, 3, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2},
		{1, 1, 0, 3, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1, 0, 3, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2, 3, 1, 0, 3},
		{1, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0},
		{1, 0, 5, 0, 0, 0, 0, 255, 255, 255, 255, 255, 255, 255},
		{2, 3, 0, 0, 1, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4},
		{1, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
		{1, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
		{1, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
		{3, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7},
		{4, 0, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9},
	} {
		f.Add(seed)
	}
	// A valid INSERT into ike_spi_labels, client_pools and esp_spi_ranges (found by a
	// search over random inputs), each followed by the same update as MODIFY and DELETE
	// (the first byte picks the update type).
	for _, insert := range [][]byte{
		{0x0, 0x0, 0x1, 0x8a, 0x2, 0xe4, 0x1, 0x4e, 0x76, 0x0, 0x0, 0xe2, 0x1, 0x1, 0xd6, 0xa6, 0x2, 0x8b, 0xd, 0x0},
		{0x0, 0x0, 0x0, 0x55, 0xe2, 0x1, 0x2, 0x0, 0x1, 0x50, 0x58, 0xcc, 0x2, 0x2, 0x2, 0x9e, 0x1, 0x5, 0xf3, 0x44, 0x1, 0x2, 0x70, 0x1, 0x0},
		{0xc9, 0x0, 0x90, 0x7, 0x2, 0x0, 0x1, 0x43, 0x35, 0x0, 0x92, 0x57, 0x1, 0x26, 0xf, 0x2, 0x9b, 0x1, 0xc0, 0x62, 0x1, 0x8e, 0x1},
	} {
		seed := slices.Clone(insert)
		for _, typ := range []byte{1, 2} {
			seed = append(seed, typ)
			seed = append(seed, insert[1:]...)
		}
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		g := &updateGen{in: data, info: h.info}
		var updates []*p4v1.Update
		for len(g.in) > 0 && len(updates) < 16 {
			updates = append(updates, g.update())
		}
		for _, u := range updates {
			checkSingleWrite(t, h, u)
		}
		if len(updates) > 0 {
			checkBatchShape(t, h, updates)
		}
	})
}

func checkSingleWrite(t *testing.T, h *harness, u *p4v1.Update) {
	before := snapshotState(t, h)
	err := h.write(eid(1), u)
	if err == nil {
		return
	}
	desc := prototext.Format(u)
	if status.Code(err) != codes.Unknown {
		t.Fatalf("write of\n%s\nRPC status %v, want UNKNOWN with per-update errors", desc, err)
	}
	errs := perUpdate(err)
	if len(errs) != 1 {
		t.Fatalf("write of\n%s\n%d p4.v1.Error details, want 1", desc, len(errs))
	}
	if codes.Code(errs[0].GetCanonicalCode()) == codes.OK || errs[0].GetMessage() == "" {
		t.Fatalf("write of\n%s\nfailed update reported as %v %q", desc, codes.Code(errs[0].GetCanonicalCode()), errs[0].GetMessage())
	}
	if after := snapshotState(t, h); after != before {
		t.Fatalf("write of\n%s\nfailed (%v: %s) but changed the state:\nbefore %s\nafter  %s", desc,
			codes.Code(errs[0].GetCanonicalCode()), errs[0].GetMessage(), before, after)
	}
}

func checkBatchShape(t *testing.T, h *harness, updates []*p4v1.Update) {
	err := h.write(eid(1), updates...)
	if err == nil {
		return
	}
	if status.Code(err) != codes.Unknown {
		t.Fatalf("batch of %d: RPC status %v, want UNKNOWN", len(updates), err)
	}
	errs := perUpdate(err)
	if len(errs) != len(updates) {
		t.Fatalf("batch of %d: %d p4.v1.Error details", len(updates), len(errs))
	}
	failed := 0
	for i, e := range errs {
		if codes.Code(e.GetCanonicalCode()) != codes.OK {
			failed++
			if e.GetMessage() == "" {
				t.Fatalf("batch update %d: %v without a message", i, codes.Code(e.GetCanonicalCode()))
			}
		}
	}
	if failed == 0 {
		t.Fatalf("batch of %d failed with UNKNOWN but every update is OK", len(updates))
	}
}

// snapshotState is everything a controller can read back, plus the fake data
// plane's own state, as text.
func snapshotState(t *testing.T, h *harness) string {
	t.Helper()
	reads := []*p4v1.Entity{
		tableEntity(&p4v1.TableEntry{}),
		tableEntity(&p4v1.TableEntry{IsDefaultAction: true}),
		{Entity: &p4v1.Entity_PacketReplicationEngineEntry{PacketReplicationEngineEntry: &p4v1.PacketReplicationEngineEntry{
			Type: &p4v1.PacketReplicationEngineEntry_MulticastGroupEntry{MulticastGroupEntry: &p4v1.MulticastGroupEntry{}}}}},
		{Entity: &p4v1.Entity_DigestEntry{DigestEntry: &p4v1.DigestEntry{}}},
		{Entity: &p4v1.Entity_CounterEntry{CounterEntry: &p4v1.CounterEntry{}}},
		{Entity: &p4v1.Entity_DirectCounterEntry{DirectCounterEntry: &p4v1.DirectCounterEntry{TableEntry: &p4v1.TableEntry{}}}},
	}
	out := ""
	for _, r := range reads {
		stream, err := h.client.Read(context.Background(), &p4v1.ReadRequest{DeviceId: testDevice, Entities: []*p4v1.Entity{r}})
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		for {
			resp, err := stream.Recv()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("read %v: %v", r, err)
			}
			for _, e := range resp.GetEntities() {
				b, err := proto.MarshalOptions{Deterministic: true}.Marshal(e)
				if err != nil {
					t.Fatal(err)
				}
				out += fmt.Sprintf("%x;", b)
			}
		}
	}
	learned := h.fake.Learned()
	slices.SortFunc(learned, func(a, b dataplane.LearnedKey) int {
		if c := slices.Compare(a.MAC[:], b.MAC[:]); c != 0 {
			return c
		}
		return int(a.Port) - int(b.Port)
	})
	out += fmt.Sprintf("|%v|%+v|%v|%v|%v|%v|%v|%+v", h.fake.PortRoles(), h.fake.Dispatch(), h.fake.HostIPs(), h.fake.Buckets(),
		h.fake.L2(), learned, h.fake.FloodGroups(), h.fake.RA())
	for _, dt := range []dataplane.DispatchTable{dataplane.ClientPools, dataplane.ClientPins, dataplane.IKESPILabels, dataplane.ESPSPIRanges} {
		out += fmt.Sprintf("|%v", h.fake.DispatchEntries(dt))
	}
	return out
}

// updateGen turns fuzz bytes into updates; when the bytes run out every choice
// is 0 (the first, valid-looking option).
type updateGen struct {
	in   []byte
	info *p4configv1.P4Info
}

func (g *updateGen) byte() byte {
	if len(g.in) == 0 {
		return 0
	}
	b := g.in[0]
	g.in = g.in[1:]
	return b
}

func (g *updateGen) pick(n int) int { return int(g.byte()) % n }

func (g *updateGen) u32() uint32 {
	return uint32(g.byte())<<24 | uint32(g.byte())<<16 | uint32(g.byte())<<8 | uint32(g.byte())
}

// value is a bytestring for a field of bitwidth bits: mostly small values (so
// that updates collide and succeed), sometimes empty, padded or too wide.
func (g *updateGen) value(bitwidth int32) []byte {
	width := int((bitwidth + 7) / 8)
	switch g.pick(8) {
	case 0, 1, 2:
		return []byte{g.byte() % 4}
	case 3:
		return nil
	case 4: // zero-padded beyond the width
		return append(make([]byte, 1+g.pick(3)), g.byte())
	case 5: // one bit too many
		v := make([]byte, width)
		if bitwidth%8 == 0 {
			v = append([]byte{1}, v...)
		} else {
			v[0] = 1 << (bitwidth % 8)
		}
		return v
	case 6: // all ones of exactly the width
		v := make([]byte, width)
		for i := range v {
			v[i] = 0xff
		}
		if r := bitwidth % 8; r != 0 {
			v[0] = 1<<r - 1
		}
		return v
	default:
		v := make([]byte, g.pick(width+2))
		for i := range v {
			v[i] = g.byte()
		}
		return v
	}
}

func (g *updateGen) id(known []uint32) uint32 {
	switch g.pick(8) {
	case 6:
		return 0
	case 7:
		return g.u32()
	default:
		if len(known) == 0 {
			return g.u32()
		}
		return known[g.pick(len(known))]
	}
}

func (g *updateGen) update() *p4v1.Update {
	types := []p4v1.Update_Type{p4v1.Update_INSERT, p4v1.Update_MODIFY, p4v1.Update_DELETE, p4v1.Update_INSERT, p4v1.Update_UNSPECIFIED, 7}
	u := &p4v1.Update{Type: types[g.pick(len(types))]}
	switch g.pick(9) {
	case 0, 1, 2, 3:
		u.Entity = &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: g.tableEntry()}}
	case 4:
		u.Entity = &p4v1.Entity{Entity: &p4v1.Entity_CounterEntry{CounterEntry: g.counterEntry()}}
	case 5:
		u.Entity = &p4v1.Entity{Entity: &p4v1.Entity_DirectCounterEntry{DirectCounterEntry: &p4v1.DirectCounterEntry{
			TableEntry: g.tableEntry(), Data: g.counterData()}}}
	case 6:
		u.Entity = &p4v1.Entity{Entity: &p4v1.Entity_PacketReplicationEngineEntry{PacketReplicationEngineEntry: g.pre()}}
	case 7:
		u.Entity = &p4v1.Entity{Entity: &p4v1.Entity_DigestEntry{DigestEntry: g.digest()}}
	default:
		switch g.pick(3) {
		case 0:
			u.Entity = &p4v1.Entity{}
		case 1:
			u.Entity = &p4v1.Entity{Entity: &p4v1.Entity_RegisterEntry{RegisterEntry: &p4v1.RegisterEntry{RegisterId: g.u32()}}}
		default: // no entity at all
		}
	}
	return u
}

func (g *updateGen) tableEntry() *p4v1.TableEntry {
	var ids []uint32
	for _, t := range g.info.GetTables() {
		ids = append(ids, t.GetPreamble().GetId())
	}
	te := &p4v1.TableEntry{TableId: g.id(ids)}
	var table *p4configv1.Table
	for _, t := range g.info.GetTables() {
		if t.GetPreamble().GetId() == te.GetTableId() {
			table = t
		}
	}
	te.IsDefaultAction = g.pick(6) == 0
	for _, mf := range table.GetMatchFields() {
		switch g.pick(12) {
		case 0: // leave the field out
			continue
		case 1:
			te.Match = append(te.Match, g.lpm(mf))
			continue
		case 2:
			te.Match = append(te.Match, &p4v1.FieldMatch{FieldId: g.u32()})
			continue
		case 3: // the same field twice
			te.Match = append(te.Match, g.fieldMatch(mf))
		case 4:
			te.Match = append(te.Match, g.ternary(mf))
			continue
		case 5:
			te.Match = append(te.Match, fieldExact(mf.GetId(), g.value(mf.GetBitwidth())))
			continue
		}
		te.Match = append(te.Match, g.fieldMatch(mf))
	}
	if table == nil && g.pick(2) == 0 {
		te.Match = append(te.Match, fieldExact(g.u32()%4, g.value(16)))
	}
	if g.pick(5) != 0 {
		te.Action = g.tableAction(table)
	}
	// Ternary tables need a priority: mostly a small positive one, so entries collide.
	if g.pick(4) != 0 && slices.ContainsFunc(table.GetMatchFields(), func(mf *p4configv1.MatchField) bool {
		return mf.GetMatchType() == p4configv1.MatchField_TERNARY
	}) {
		te.Priority = int32(1 + g.pick(3))
	}
	switch g.pick(12) {
	case 0:
		te.Priority = int32(int8(g.byte()))
	case 1:
		te.IdleTimeoutNs = int64(int8(g.byte())) * 1_000_000
	case 2:
		te.CounterData = g.counterData()
	case 3:
		te.ControllerMetadata = uint64(g.byte())
		te.Metadata = []byte{g.byte()}
	case 4:
		te.MeterConfig = &p4v1.MeterConfig{Cir: 1}
	}
	return te
}

// fieldMatch is a match of the field's own kind, with fuzzed values.
func (g *updateGen) fieldMatch(mf *p4configv1.MatchField) *p4v1.FieldMatch {
	switch mf.GetMatchType() {
	case p4configv1.MatchField_LPM:
		return g.lpm(mf)
	case p4configv1.MatchField_TERNARY:
		return g.ternary(mf)
	}
	return fieldExact(mf.GetId(), g.value(mf.GetBitwidth()))
}

// lpm is mostly a valid prefix (value masked to it), sometimes a bad length or host bits.
func (g *updateGen) lpm(mf *p4configv1.MatchField) *p4v1.FieldMatch {
	v := g.value(mf.GetBitwidth())
	plen := mf.GetBitwidth()
	switch g.pick(4) {
	case 0:
		plen = int32(int8(g.byte()))
	case 1:
		plen = mf.GetBitwidth() - int32(g.pick(int(mf.GetBitwidth())))
	}
	return &p4v1.FieldMatch{FieldId: mf.GetId(), FieldMatchType: &p4v1.FieldMatch_Lpm{Lpm: &p4v1.FieldMatch_LPM{Value: v, PrefixLen: plen}}}
}

// ternary is mostly a value under its mask, sometimes a zero mask or bits outside it.
func (g *updateGen) ternary(mf *p4configv1.MatchField) *p4v1.FieldMatch {
	m := g.value(mf.GetBitwidth())
	v := slices.Clone(m)
	if g.pick(3) == 0 {
		v = g.value(mf.GetBitwidth())
	} else if len(v) > 0 && g.pick(2) == 0 {
		v[len(v)-1] &= g.byte()
	}
	return &p4v1.FieldMatch{FieldId: mf.GetId(), FieldMatchType: &p4v1.FieldMatch_Ternary_{Ternary: &p4v1.FieldMatch_Ternary{Value: v, Mask: m}}}
}

func fieldExact(id uint32, v []byte) *p4v1.FieldMatch {
	return &p4v1.FieldMatch{FieldId: id, FieldMatchType: &p4v1.FieldMatch_Exact_{Exact: &p4v1.FieldMatch_Exact{Value: v}}}
}

func (g *updateGen) tableAction(table *p4configv1.Table) *p4v1.TableAction {
	switch g.pick(10) {
	case 0:
		return &p4v1.TableAction{}
	case 1:
		return &p4v1.TableAction{Type: &p4v1.TableAction_ActionProfileMemberId{ActionProfileMemberId: g.u32()}}
	}
	var ids []uint32
	for _, r := range table.GetActionRefs() {
		ids = append(ids, r.GetId())
	}
	if g.pick(4) == 0 {
		ids = nil
		for _, a := range g.info.GetActions() {
			ids = append(ids, a.GetPreamble().GetId())
		}
	}
	a := &p4v1.Action{ActionId: g.id(ids)}
	var action *p4configv1.Action
	for _, x := range g.info.GetActions() {
		if x.GetPreamble().GetId() == a.GetActionId() {
			action = x
		}
	}
	for _, p := range action.GetParams() {
		switch g.pick(10) {
		case 0:
			continue
		case 1:
			a.Params = append(a.Params, &p4v1.Action_Param{ParamId: g.u32(), Value: g.value(8)})
		case 2:
			a.Params = append(a.Params, &p4v1.Action_Param{ParamId: p.GetId(), Value: g.value(p.GetBitwidth())})
		}
		a.Params = append(a.Params, &p4v1.Action_Param{ParamId: p.GetId(), Value: g.value(p.GetBitwidth())})
	}
	if action == nil && g.pick(2) == 0 {
		a.Params = append(a.Params, &p4v1.Action_Param{ParamId: 1, Value: g.value(8)})
	}
	return &p4v1.TableAction{Type: &p4v1.TableAction_Action{Action: a}}
}

func (g *updateGen) counterData() *p4v1.CounterData {
	if g.pick(3) == 0 {
		return nil
	}
	return &p4v1.CounterData{PacketCount: int64(int8(g.byte())), ByteCount: int64(int8(g.byte())) * 100}
}

func (g *updateGen) counterEntry() *p4v1.CounterEntry {
	var ids []uint32
	for _, c := range g.info.GetCounters() {
		ids = append(ids, c.GetPreamble().GetId())
	}
	ce := &p4v1.CounterEntry{CounterId: g.id(ids), Data: g.counterData()}
	if g.pick(3) != 0 {
		ce.Index = &p4v1.Index{Index: int64(int8(g.byte()))}
	}
	return ce
}

func (g *updateGen) pre() *p4v1.PacketReplicationEngineEntry {
	if g.pick(6) == 0 {
		return &p4v1.PacketReplicationEngineEntry{Type: &p4v1.PacketReplicationEngineEntry_CloneSessionEntry{CloneSessionEntry: &p4v1.CloneSessionEntry{SessionId: 1}}}
	}
	mg := &p4v1.MulticastGroupEntry{MulticastGroupId: uint32(g.pick(4))}
	if g.pick(8) == 0 {
		mg.MulticastGroupId = g.u32()
	}
	for n := g.pick(6); n > 0; n-- {
		r := &p4v1.Replica{Instance: uint32(g.pick(2))}
		switch g.pick(4) {
		case 0:
			r.PortKind = &p4v1.Replica_EgressPort{EgressPort: uint32(g.pick(6))}
		case 1:
		default:
			r.PortKind = &p4v1.Replica_Port{Port: g.value(16)}
		}
		mg.Replicas = append(mg.Replicas, r)
	}
	return &p4v1.PacketReplicationEngineEntry{Type: &p4v1.PacketReplicationEngineEntry_MulticastGroupEntry{MulticastGroupEntry: mg}}
}

func (g *updateGen) digest() *p4v1.DigestEntry {
	var ids []uint32
	for _, d := range g.info.GetDigests() {
		ids = append(ids, d.GetPreamble().GetId())
	}
	de := &p4v1.DigestEntry{DigestId: g.id(ids)}
	if g.pick(4) != 0 {
		de.Config = &p4v1.DigestEntry_Config{
			MaxTimeoutNs: int64(int8(g.byte())),
			MaxListSize:  int32(int8(g.byte())),
			AckTimeoutNs: int64(int8(g.byte())),
		}
	}
	return de
}
