package p4rt

import (
	"context"
	"strings"
	"testing"

	p4configv1 "github.com/p4lang/p4runtime/go/p4/config/v1"
	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

func TestCapabilities(t *testing.T) {
	h := newHarness(t)
	resp, err := h.client.Capabilities(context.Background(), &p4v1.CapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetP4RuntimeApiVersion() != "1.4.1" {
		t.Fatalf("api version %q", resp.GetP4RuntimeApiVersion())
	}
}

func TestGetPipelineBeforeSet(t *testing.T) {
	h := newHarness(t)
	_, err := h.client.GetForwardingPipelineConfig(context.Background(), &p4v1.GetForwardingPipelineConfigRequest{DeviceId: testDevice})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("want FAILED_PRECONDITION, got %v", err)
	}
	if _, err := h.read(&p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: &p4v1.TableEntry{}}}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("read before pipeline: want FAILED_PRECONDITION, got %v", err)
	}
	if err := h.write(nil, ins(h.portRole(1, 1))); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("write before pipeline: want FAILED_PRECONDITION, got %v", err)
	}
}

func TestSetPipelineAcceptsSupergwAndKeepsCookie(t *testing.T) {
	h := newHarness(t)
	h.openStream(5).arbitration()
	if err := h.setPipeline(eid(5), 0xfeed); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		rt                   p4v1.GetForwardingPipelineConfigRequest_ResponseType
		wantP4Info, wantBlob bool
	}{
		{p4v1.GetForwardingPipelineConfigRequest_ALL, true, true},
		{p4v1.GetForwardingPipelineConfigRequest_COOKIE_ONLY, false, false},
		{p4v1.GetForwardingPipelineConfigRequest_P4INFO_AND_COOKIE, true, false},
		{p4v1.GetForwardingPipelineConfigRequest_DEVICE_CONFIG_AND_COOKIE, false, true},
	} {
		resp, err := h.client.GetForwardingPipelineConfig(context.Background(), &p4v1.GetForwardingPipelineConfigRequest{DeviceId: testDevice, ResponseType: tc.rt})
		if err != nil {
			t.Fatalf("%v: %v", tc.rt, err)
		}
		cfg := resp.GetConfig()
		if cfg.GetCookie().GetCookie() != 0xfeed {
			t.Errorf("%v: cookie %v", tc.rt, cfg.GetCookie())
		}
		if (cfg.GetP4Info() != nil) != tc.wantP4Info || (tc.wantP4Info && !proto.Equal(cfg.GetP4Info(), h.info)) {
			t.Errorf("%v: p4info present=%v", tc.rt, cfg.GetP4Info() != nil)
		}
		if (string(cfg.GetP4DeviceConfig()) == "ignored") != tc.wantBlob {
			t.Errorf("%v: device config %q", tc.rt, cfg.GetP4DeviceConfig())
		}
	}
}

func TestSetPipelineActions(t *testing.T) {
	h := newHarness(t)
	set := func(a p4v1.SetForwardingPipelineConfigRequest_Action, cfg *p4v1.ForwardingPipelineConfig) error {
		_, err := h.client.SetForwardingPipelineConfig(context.Background(), &p4v1.SetForwardingPipelineConfigRequest{DeviceId: testDevice, Action: a, Config: cfg})
		return err
	}
	cfg := &p4v1.ForwardingPipelineConfig{P4Info: h.info, Cookie: &p4v1.ForwardingPipelineConfig_Cookie{Cookie: 1}}
	if err := set(p4v1.SetForwardingPipelineConfigRequest_VERIFY, cfg); err != nil {
		t.Fatal(err)
	}
	if err := set(p4v1.SetForwardingPipelineConfigRequest_COMMIT, nil); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("COMMIT without save: %v", err)
	}
	if h.srv.pipelineSet() {
		t.Fatal("VERIFY must not commit")
	}
	if err := set(p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_SAVE, cfg); err != nil {
		t.Fatal(err)
	}
	if err := set(p4v1.SetForwardingPipelineConfigRequest_COMMIT, nil); err != nil {
		t.Fatal(err)
	}
	h.mustWrite2(nil, ins(h.portRole(1, 1)))
	cfg.Cookie.Cookie = 2
	if err := set(p4v1.SetForwardingPipelineConfigRequest_RECONCILE_AND_COMMIT, cfg); err != nil {
		t.Fatal(err)
	}
	if len(h.fake.PortRoles()) != 1 {
		t.Fatal("RECONCILE_AND_COMMIT must keep entries")
	}
	if err := set(p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT, cfg); err != nil {
		t.Fatal(err)
	}
	if len(h.fake.PortRoles()) != 0 {
		t.Fatal("VERIFY_AND_COMMIT must clear entries")
	}
}

func (h *harness) mustWrite2(e *p4v1.Uint128, u ...*p4v1.Update) {
	h.t.Helper()
	if err := h.write(e, u...); err != nil {
		h.t.Fatalf("write: %v %v", err, perUpdate(err))
	}
}

func TestSetPipelineRejectsOtherP4Info(t *testing.T) {
	h := newHarness(t)
	other := proto.Clone(h.info).(*p4configv1.P4Info)
	other.Tables = append(other.Tables, &p4configv1.Table{Preamble: &p4configv1.Preamble{Id: 0x02000099, Name: "Other.table"}})
	changed := proto.Clone(h.info).(*p4configv1.P4Info)
	changed.Tables[0].Size++
	missing := proto.Clone(h.info).(*p4configv1.P4Info)
	missing.Actions = missing.Actions[1:]
	cosmetic := proto.Clone(h.info).(*p4configv1.P4Info)
	cosmetic.PkgInfo = &p4configv1.PkgInfo{Name: "renamed", Arch: "v1model"}
	cosmetic.Tables[0].Preamble.Doc = &p4configv1.Documentation{Brief: "docs do not matter"}

	for _, tc := range []struct {
		name string
		info *p4configv1.P4Info
		want string
	}{
		{"extra table", other, "table 0x02000099 'Other.table' not in supergw P4Info"},
		{"changed table", changed, "differs from the supergw P4Info"},
		{"missing action", missing, "is missing"},
		{"no p4info", nil, "p4info is missing"},
	} {
		_, err := h.client.SetForwardingPipelineConfig(context.Background(), &p4v1.SetForwardingPipelineConfigRequest{
			DeviceId: testDevice, Action: p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT,
			Config: &p4v1.ForwardingPipelineConfig{P4Info: tc.info}})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "pipeline rejected") {
			t.Errorf("%s: want INVALID_ARGUMENT containing %q, got %v", tc.name, tc.want, err)
		}
	}
	_, err := h.client.SetForwardingPipelineConfig(context.Background(), &p4v1.SetForwardingPipelineConfigRequest{
		DeviceId: testDevice, Action: p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT,
		Config: &p4v1.ForwardingPipelineConfig{P4Info: cosmetic}})
	if err != nil {
		t.Fatalf("pkg_info and docs must not matter: %v", err)
	}
}

func TestSetPipelineOnlyPrimaryAndRightDevice(t *testing.T) {
	h := newHarness(t)
	h.openStream(10).arbitration()
	b := h.openStream(3)
	b.arbitration()
	if err := h.setPipeline(eid(3), 1); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("backup set pipeline: want PERMISSION_DENIED, got %v", err)
	}
	if err := h.setPipeline(nil, 1); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("no election id with streams open: want PERMISSION_DENIED, got %v", err)
	}
	_, err := h.client.SetForwardingPipelineConfig(context.Background(), &p4v1.SetForwardingPipelineConfigRequest{DeviceId: 1, ElectionId: eid(10), Config: &p4v1.ForwardingPipelineConfig{P4Info: h.info}})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("wrong device: want NOT_FOUND, got %v", err)
	}
	if err := h.setPipeline(eid(10), 1); err != nil {
		t.Fatal(err)
	}
}
