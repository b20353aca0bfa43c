package p4rt

import (
	"strings"
	"testing"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"supergw/targets/ebpf/internal/dataplane"
	c "supergw/targets/ebpf/internal/p4constants"
)

func TestWriteTablesReachDataplane(t *testing.T) {
	h := newHarness(t)
	h.primary()
	b := h.srv.bind
	h.mustWrite(
		ins(h.portRole(1, 1)),
		ins(h.bucket(5, 2)),
		ins(&p4v1.TableEntry{TableId: b.hostIPs, Match: []*p4v1.FieldMatch{exact(b.hostIPsTarget, 10, 0, 0, 7)},
			Action: action(b.replyHostMAC, param(b.hostMACParam, 0, 0, 0, 0, 0, 7))}),
		ins(&p4v1.TableEntry{TableId: b.macTable, Match: []*p4v1.FieldMatch{exact(b.macDst, 0, 0, 0, 0, 0, 7)},
			Action: action(b.setOutputPort, param(b.outPortParam, 0, 3), param(b.outRoleParam, 1))}),
		ins(h.learnedEntry(7, 3, 0)),
		mod(&p4v1.TableEntry{TableId: b.settings, IsDefaultAction: true, Action: action(b.setDispatch,
			param(b.gwIPParam, 10, 0, 0, 1), param(b.vmacParam, 2, 0, 0, 0, 0, 0), param(b.maskParam, 0, 255), param(b.hashParam, 1))}),
	)
	if got := h.fake.PortRoles(); got[1] != 1 {
		t.Errorf("port roles %v", got)
	}
	if got := h.fake.Buckets()[5]; got.Port != 2 || got.GatewayMAC != (dataplane.MAC{2, 0, 0, 0, 0, 2}) {
		t.Errorf("bucket 5 = %+v", got)
	}
	if got := h.fake.HostIPs()[dataplane.IPv4{10, 0, 0, 7}]; got != (dataplane.MAC{0, 0, 0, 0, 0, 7}) {
		t.Errorf("host ip = %v", got)
	}
	if got := h.fake.L2()[dataplane.MAC{0, 0, 0, 0, 0, 7}]; got != (dataplane.L2Entry{Port: 3, Role: 1}) {
		t.Errorf("l2 = %v", got)
	}
	if got := h.fake.Learned(); len(got) != 1 || got[0].Port != 3 {
		t.Errorf("learned = %v", got)
	}
	want := dataplane.DispatchConfig{Configured: true, GatewayIP: dataplane.IPv4{10, 0, 0, 1}, VMACBase: dataplane.MAC{2, 0, 0, 0, 0, 0}, BucketMask: 255,
		BucketHash: c.BucketHashIdentity}
	if got := h.fake.Dispatch(); got != want {
		t.Errorf("dispatch = %+v", got)
	}
	// The hash is a run-time setting: one MODIFY back to CRC-32.
	h.mustWrite(mod(&p4v1.TableEntry{TableId: b.settings, IsDefaultAction: true, Action: action(b.setDispatch,
		param(b.gwIPParam, 10, 0, 0, 1), param(b.vmacParam, 2, 0, 0, 0, 0, 0), param(b.maskParam, 0, 255), param(b.hashParam, 0))}))
	if got := h.fake.Dispatch().BucketHash; got != c.BucketHashCRC32 {
		t.Errorf("bucket hash after MODIFY = %v, want CRC32", got)
	}
	// MODIFY then DELETE.
	h.mustWrite(mod(h.bucket(5, 4)))
	if got := h.fake.Buckets()[5]; got.Port != 4 {
		t.Errorf("modified bucket = %+v", got)
	}
	h.mustWrite(del(h.bucket(5, 0)), del(h.portRole(1, 0)))
	if len(h.fake.Buckets()) != 0 || len(h.fake.PortRoles()) != 0 {
		t.Error("delete did not reach the data plane")
	}
	// Reset settings to its initial default (MODIFY without action).
	h.mustWrite(mod(&p4v1.TableEntry{TableId: b.settings, IsDefaultAction: true}))
	if h.fake.Dispatch().Configured {
		t.Error("default reset did not unconfigure")
	}
}

func TestWriteErrorCodes(t *testing.T) {
	h := newHarness(t)
	h.primary()
	b := h.srv.bind
	h.mustWrite(ins(h.portRole(1, 1)))
	pr := func(f func(te *p4v1.TableEntry)) *p4v1.TableEntry {
		te := h.portRole(2, 1)
		f(te)
		return te
	}
	for _, tc := range []struct {
		name string
		u    *p4v1.Update
		code codes.Code
		msg  string
	}{
		{"unknown table", ins(pr(func(te *p4v1.TableEntry) { te.TableId = 0x02000099 })), codes.InvalidArgument, "table id"},
		{"unknown field id", ins(pr(func(te *p4v1.TableEntry) { te.Match[0].FieldId = 9 })), codes.InvalidArgument, "no match field id 9"},
		{"field too wide", ins(pr(func(te *p4v1.TableEntry) { te.Match = []*p4v1.FieldMatch{exact(b.portRolesPort, 1, 0, 0)} })), codes.InvalidArgument, "does not fit in 16 bits"},
		{"missing exact field", ins(pr(func(te *p4v1.TableEntry) { te.Match = nil })), codes.InvalidArgument, "is missing"},
		{"ternary on exact", ins(pr(func(te *p4v1.TableEntry) {
			te.Match[0].FieldMatchType = &p4v1.FieldMatch_Ternary_{Ternary: &p4v1.FieldMatch_Ternary{Value: []byte{1}, Mask: []byte{1}}}
		})), codes.InvalidArgument, "is exact"},
		{"unknown action", ins(pr(func(te *p4v1.TableEntry) { te.Action = action(0x01000099) })), codes.InvalidArgument, "action id"},
		{"action of other table", ins(pr(func(te *p4v1.TableEntry) { te.Action = action(b.markKnown) })), codes.InvalidArgument, "is not an action of table"},
		{"unknown param", ins(pr(func(te *p4v1.TableEntry) { te.Action = action(b.setPortRole, param(b.roleParam, 1), param(9, 1)) })), codes.InvalidArgument, "no param id 9"},
		{"param too wide", ins(pr(func(te *p4v1.TableEntry) { te.Action = action(b.setPortRole, param(b.roleParam, 1, 0)) })), codes.InvalidArgument, "does not fit in 8 bits"},
		{"missing param", ins(pr(func(te *p4v1.TableEntry) { te.Action = action(b.setPortRole) })), codes.InvalidArgument, "is missing"},
		{"no action", ins(pr(func(te *p4v1.TableEntry) { te.Action = nil })), codes.InvalidArgument, "no action"},
		{"already exists", ins(h.portRole(1, 2)), codes.AlreadyExists, "already exists"},
		{"modify missing", mod(h.portRole(9, 2)), codes.NotFound, "no entry"},
		{"delete missing", del(h.portRole(9, 2)), codes.NotFound, "no entry"},
		{"priority on exact table", ins(pr(func(te *p4v1.TableEntry) { te.Priority = 10 })), codes.InvalidArgument, "priority"},
		{"idle timeout on table without", ins(pr(func(te *p4v1.TableEntry) { te.IdleTimeoutNs = 1000 })), codes.InvalidArgument, "idle timeout"},
		{"insert into keyless", ins(&p4v1.TableEntry{TableId: b.settings, Action: action(b.unconfigured)}), codes.InvalidArgument, "keyless"},
		{"insert default", ins(&p4v1.TableEntry{TableId: b.settings, IsDefaultAction: true, Action: action(b.unconfigured)}), codes.InvalidArgument, "default entry"},
		{"delete default", del(&p4v1.TableEntry{TableId: b.settings, IsDefaultAction: true}), codes.InvalidArgument, "default entry"},
		{"no entity", &p4v1.Update{Type: p4v1.Update_INSERT}, codes.InvalidArgument, "no entity"},
		{"unsupported entity", &p4v1.Update{Type: p4v1.Update_INSERT, Entity: &p4v1.Entity{Entity: &p4v1.Entity_RegisterEntry{RegisterEntry: &p4v1.RegisterEntry{}}}}, codes.Unimplemented, "not supported"},
		{"unspecified type", update(p4v1.Update_UNSPECIFIED, h.portRole(3, 1)), codes.InvalidArgument, "update type"},
		{"undefined port role", ins(h.portRole(3, 5)), codes.InvalidArgument, "role 5 is not HOST"},
		{"unknown port role as entry", ins(h.portRole(3, 0)), codes.InvalidArgument, "role 0 is not HOST"},
		{"vmac_base with low bits", mod(&p4v1.TableEntry{TableId: b.settings, IsDefaultAction: true, Action: action(b.setDispatch,
			param(b.gwIPParam, 10, 0, 0, 1), param(b.vmacParam, 2, 0, 0, 0, 0, 1), param(b.maskParam, 0, 255), param(b.hashParam, 0))}), codes.InvalidArgument, "low 16 bits zero"},
		{"bucket_mask not K-1", mod(&p4v1.TableEntry{TableId: b.settings, IsDefaultAction: true, Action: action(b.setDispatch,
			param(b.gwIPParam, 10, 0, 0, 1), param(b.vmacParam, 2, 0, 0, 0, 0, 0), param(b.maskParam, 0, 254), param(b.hashParam, 0))}), codes.InvalidArgument, "power of two"},
		{"undefined bucket_hash", mod(&p4v1.TableEntry{TableId: b.settings, IsDefaultAction: true, Action: action(b.setDispatch,
			param(b.gwIPParam, 10, 0, 0, 1), param(b.vmacParam, 2, 0, 0, 0, 0, 0), param(b.maskParam, 0, 255), param(b.hashParam, 2))}), codes.InvalidArgument, "bucket_hash 2 is neither CRC32 (0) nor IDENTITY (1)"},
		{"bucket_hash 255", mod(&p4v1.TableEntry{TableId: b.settings, IsDefaultAction: true, Action: action(b.setDispatch,
			param(b.gwIPParam, 10, 0, 0, 1), param(b.vmacParam, 2, 0, 0, 0, 0, 0), param(b.maskParam, 0, 255), param(b.hashParam, 255))}), codes.InvalidArgument, "bucket_hash 255"},
		{"missing bucket_hash", mod(&p4v1.TableEntry{TableId: b.settings, IsDefaultAction: true, Action: action(b.setDispatch,
			param(b.gwIPParam, 10, 0, 0, 1), param(b.vmacParam, 2, 0, 0, 0, 0, 0), param(b.maskParam, 0, 255))}), codes.InvalidArgument, "is missing"},
	} {
		code, msg := h.writeCode(tc.u)
		if code != tc.code || !strings.Contains(msg, tc.msg) {
			t.Errorf("%s: got %v %q, want %v containing %q", tc.name, code, msg, tc.code, tc.msg)
		}
	}
}

func TestWriteDefaultOnlyAndConstDefault(t *testing.T) {
	h := newHarness(t)
	h.primary()
	b := h.srv.bind
	for tid, ti := range h.srv.sch.tables {
		for aid, scope := range ti.scopes {
			if scope.String() != "DEFAULT_ONLY" || len(ti.t.GetMatchFields()) == 0 {
				continue
			}
			te := &p4v1.TableEntry{TableId: tid, Action: action(aid)}
			for _, f := range ti.t.GetMatchFields() {
				te.Match = append(te.Match, validMatch(f))
			}
			if ti.needsPriority() {
				te.Priority = 1
			}
			code, msg := h.writeCode(ins(te))
			if code != codes.PermissionDenied || !strings.Contains(msg, "@defaultonly") {
				t.Errorf("table %s: @defaultonly action as entry: %v %q", ti.name(), code, msg)
			}
			def := &p4v1.TableEntry{TableId: tid, IsDefaultAction: true, Action: action(aid)}
			code, _ = h.writeCode(mod(def))
			want := codes.OK
			if ti.t.GetConstDefaultActionId() != 0 {
				want = codes.PermissionDenied
			}
			if code != want {
				t.Errorf("table %s: default MODIFY to its own default-only action: %v, want %v", ti.name(), code, want)
			}
		}
	}
	// A table action cannot be a default if it is @tableonly; set_gateway as default is refused.
	code, _ := h.writeCode(mod(&p4v1.TableEntry{TableId: b.buckets, IsDefaultAction: true,
		Action: action(b.setGateway, param(b.gwPortParam, 1), param(b.gwMACParam, 1))}))
	if code == codes.OK {
		t.Error("set_gateway as default of buckets must fail")
	}
}

func TestWritePerUpdateErrorsInOrder(t *testing.T) {
	h := newHarness(t)
	h.primary()
	err := h.write(eid(1),
		ins(h.portRole(1, 1)),
		ins(h.portRole(1, 1)),
		ins(h.portRole(2, 2)),
		del(h.portRole(7, 0)),
	)
	if status.Code(err) != codes.Unknown {
		t.Fatalf("want UNKNOWN, got %v", err)
	}
	errs := perUpdate(err)
	want := []codes.Code{codes.OK, codes.AlreadyExists, codes.OK, codes.NotFound}
	if len(errs) != len(want) {
		t.Fatalf("want %d details, got %d", len(want), len(errs))
	}
	for i, e := range errs {
		if codes.Code(e.GetCanonicalCode()) != want[i] {
			t.Errorf("update %d: %v, want %v (%s)", i, codes.Code(e.GetCanonicalCode()), want[i], e.GetMessage())
		}
		if want[i] != codes.OK && e.GetMessage() == "" {
			t.Errorf("update %d: empty message", i)
		}
	}
	if got := h.fake.PortRoles(); len(got) != 2 {
		t.Errorf("CONTINUE_ON_ERROR must apply the good updates: %v", got)
	}
}

func TestWriteRequestLevelErrors(t *testing.T) {
	h := newHarness(t)
	h.primary()
	backup := h.openStream(0)
	backup.arbitration()
	if err := h.write(eid(0), ins(h.portRole(1, 1))); status.Code(err) != codes.PermissionDenied {
		t.Errorf("backup write: want PERMISSION_DENIED, got %v", err)
	}
	if err := h.write(eid(42), ins(h.portRole(1, 1))); status.Code(err) != codes.PermissionDenied {
		t.Errorf("unknown election id: want PERMISSION_DENIED, got %v", err)
	}
	if err := h.write(nil, ins(h.portRole(1, 1))); status.Code(err) != codes.PermissionDenied {
		t.Errorf("no election id: want PERMISSION_DENIED, got %v", err)
	}
	_, err := h.client.Write(t.Context(), &p4v1.WriteRequest{DeviceId: 1, ElectionId: eid(1)})
	if status.Code(err) != codes.NotFound {
		t.Errorf("wrong device: want NOT_FOUND, got %v", err)
	}
	_, err = h.client.Write(t.Context(), &p4v1.WriteRequest{DeviceId: testDevice, ElectionId: eid(1), Atomicity: p4v1.WriteRequest_DATAPLANE_ATOMIC})
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("atomicity: want UNIMPLEMENTED, got %v", err)
	}
}

func TestWriteCanonicalStorage(t *testing.T) {
	h := newHarness(t)
	h.primary()
	b := h.srv.bind
	// Padded values are accepted and read back canonical.
	te := &p4v1.TableEntry{TableId: b.portRoles, Match: []*p4v1.FieldMatch{exact(b.portRolesPort, 0, 0, 0, 3)},
		Action: action(b.setPortRole, param(b.roleParam, 0, 2))}
	h.mustWrite(ins(te))
	got := h.mustRead(&p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: &p4v1.TableEntry{TableId: b.portRoles}}})
	want := &p4v1.TableEntry{TableId: b.portRoles, Match: []*p4v1.FieldMatch{exact(b.portRolesPort, 3)},
		Action: action(b.setPortRole, param(b.roleParam, 2))}
	if len(got) != 1 || !proto.Equal(got[0].GetTableEntry(), want) {
		t.Fatalf("read %v, want %v", got, want)
	}
	// The padded match addresses the same entry.
	code, _ := h.writeCode(ins(h.portRole(3, 1)))
	if code != codes.AlreadyExists {
		t.Errorf("canonical duplicate: %v", code)
	}
}

func TestWriteTableFull(t *testing.T) {
	h := newHarness(t)
	h.primary()
	ti := h.srv.sch.tables[h.srv.bind.portRoles]
	size := ti.t.GetSize()
	ti.t.Size = 2 // shrink the indexed copy only, to keep the test fast
	defer func() { ti.t.Size = size }()
	h.mustWrite(ins(h.portRole(1, 1)), ins(h.portRole(2, 1)))
	if code, _ := h.writeCode(ins(h.portRole(3, 1))); code != codes.ResourceExhausted {
		t.Fatalf("want RESOURCE_EXHAUSTED, got %v", code)
	}
}

func TestWriteDefaultEntries(t *testing.T) {
	h := newHarness(t)
	h.primary()
	b := h.srv.bind
	for _, ti := range h.srv.sch.tables {
		if ti.t.GetConstDefaultActionId() == 0 {
			continue
		}
		code, msg := h.writeCode(mod(&p4v1.TableEntry{TableId: ti.t.GetPreamble().GetId(), IsDefaultAction: true, Action: ti.initialDefault}))
		if code != codes.PermissionDenied || !strings.Contains(msg, "const default") {
			t.Errorf("const default of %s: %v %q", ti.name(), code, msg)
		}
	}
	// Re-setting a non-const default to its initial action is accepted;
	// anything the data plane cannot do is UNIMPLEMENTED, never a silent OK.
	for _, tid := range []uint32{b.hostIPs, b.buckets, b.macTable, b.learned} {
		ti := h.srv.sch.tables[tid]
		if ti.initialDefault == nil || ti.t.GetConstDefaultActionId() != 0 {
			continue
		}
		h.mustWrite(mod(&p4v1.TableEntry{TableId: tid, IsDefaultAction: true, Action: ti.initialDefault}))
		h.mustWrite(mod(&p4v1.TableEntry{TableId: tid, IsDefaultAction: true}))
	}
	code, _ := h.writeCode(mod(&p4v1.TableEntry{TableId: b.settings, IsDefaultAction: true, Match: []*p4v1.FieldMatch{exact(1, 1)}, Action: action(b.unconfigured)}))
	if code != codes.InvalidArgument {
		t.Errorf("default with match: %v", code)
	}
}
