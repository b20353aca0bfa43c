package p4rt

import (
	"context"
	"net"
	"testing"
	"time"

	p4configv1 "github.com/p4lang/p4runtime/go/p4/config/v1"
	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"supergw/targets/ebpf/internal/dataplane"
	"supergw/targets/ebpf/internal/pipeline"
)

const testDevice = 800

// harness runs a Server on a fake data plane behind an in-process gRPC server.
type harness struct {
	t      testing.TB
	srv    *Server
	fake   *dataplane.Fake
	client p4v1.P4RuntimeClient
	info   *p4configv1.P4Info
}

func newHarness(t testing.TB, ports ...uint16) *harness {
	t.Helper()
	if len(ports) == 0 {
		ports = []uint16{1, 2, 3, 4}
	}
	fake := dataplane.NewFake(ports...)
	srv, err := New(Config{DeviceID: testDevice, Dataplane: fake, IdleScanInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h := harnessFor(t, srv)
	h.fake = fake
	return h
}

// harnessFor serves srv over an in-process gRPC connection.
func harnessFor(t testing.TB, srv *Server) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	go srv.Run(ctx)
	lis := bufconn.Listen(1 << 20)
	gs := grpc.NewServer()
	p4v1.RegisterP4RuntimeServer(gs, srv)
	go func() { _ = gs.Serve(lis) }()
	cc, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(context.Context, string) (net.Conn, error) { return lis.Dial() }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() {
		cc.Close()
		gs.Stop()
		cancel()
	})
	info, err := pipeline.P4Info()
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, srv: srv, client: p4v1.NewP4RuntimeClient(cc), info: info}
}

func eid(low uint64) *p4v1.Uint128 { return &p4v1.Uint128{Low: low} }

func (h *harness) setPipeline(election *p4v1.Uint128, cookie uint64) error {
	_, err := h.client.SetForwardingPipelineConfig(context.Background(), &p4v1.SetForwardingPipelineConfigRequest{
		DeviceId:   testDevice,
		ElectionId: election,
		Action:     p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT,
		Config:     &p4v1.ForwardingPipelineConfig{P4Info: h.info, P4DeviceConfig: []byte("ignored"), Cookie: &p4v1.ForwardingPipelineConfig_Cookie{Cookie: cookie}},
	})
	return err
}

// primary opens a stream with election id 1, sets the pipeline and returns it.
func (h *harness) primary() *streamClient {
	h.t.Helper()
	sc := h.openStream(1)
	if got := sc.arbitration(); got.GetStatus().GetCode() != int32(codes.OK) {
		h.t.Fatalf("expected primary, got %v", got)
	}
	if err := h.setPipeline(eid(1), 7); err != nil {
		h.t.Fatalf("set pipeline: %v", err)
	}
	return sc
}

func (h *harness) write(election *p4v1.Uint128, updates ...*p4v1.Update) error {
	_, err := h.client.Write(context.Background(), &p4v1.WriteRequest{DeviceId: testDevice, ElectionId: election, Updates: updates})
	return err
}

func (h *harness) mustWrite(updates ...*p4v1.Update) {
	h.t.Helper()
	if err := h.write(eid(1), updates...); err != nil {
		h.t.Fatalf("write: %v (details %v)", err, perUpdate(err))
	}
}

func (h *harness) read(entities ...*p4v1.Entity) ([]*p4v1.Entity, error) {
	stream, err := h.client.Read(context.Background(), &p4v1.ReadRequest{DeviceId: testDevice, Entities: entities})
	if err != nil {
		return nil, err
	}
	var out []*p4v1.Entity
	for {
		resp, err := stream.Recv()
		if err != nil {
			if status.Code(err) == codes.OK || err.Error() == "EOF" {
				return out, nil
			}
			return out, err
		}
		out = append(out, resp.GetEntities()...)
	}
}

func (h *harness) mustRead(entities ...*p4v1.Entity) []*p4v1.Entity {
	h.t.Helper()
	out, err := h.read(entities...)
	if err != nil {
		h.t.Fatalf("read: %v", err)
	}
	return out
}

// perUpdate extracts the p4.v1.Error details of a failed Write.
func perUpdate(err error) []*p4v1.Error {
	var out []*p4v1.Error
	for _, d := range status.Convert(err).Details() {
		if e, ok := d.(*p4v1.Error); ok {
			out = append(out, e)
		}
	}
	return out
}

// writeCode runs a one-update write and returns that update's code.
func (h *harness) writeCode(u *p4v1.Update) (codes.Code, string) {
	h.t.Helper()
	err := h.write(eid(1), u)
	if err == nil {
		return codes.OK, ""
	}
	if status.Code(err) != codes.Unknown {
		h.t.Fatalf("write RPC status %v, want UNKNOWN with details: %v", status.Code(err), err)
	}
	errs := perUpdate(err)
	if len(errs) != 1 {
		h.t.Fatalf("want 1 per-update error, got %d", len(errs))
	}
	return codes.Code(errs[0].GetCanonicalCode()), errs[0].GetMessage()
}

func exact(id uint32, v ...byte) *p4v1.FieldMatch {
	return &p4v1.FieldMatch{FieldId: id, FieldMatchType: &p4v1.FieldMatch_Exact_{Exact: &p4v1.FieldMatch_Exact{Value: v}}}
}

func ternary(id uint32, value, mask []byte) *p4v1.FieldMatch {
	return &p4v1.FieldMatch{FieldId: id, FieldMatchType: &p4v1.FieldMatch_Ternary_{Ternary: &p4v1.FieldMatch_Ternary{Value: value, Mask: mask}}}
}

func lpm(id uint32, prefixLen int32, v ...byte) *p4v1.FieldMatch {
	return &p4v1.FieldMatch{FieldId: id, FieldMatchType: &p4v1.FieldMatch_Lpm{Lpm: &p4v1.FieldMatch_LPM{Value: v, PrefixLen: prefixLen}}}
}

// validMatch is a well-formed match of field f for its match kind (value 1, full mask or prefix).
func validMatch(f *p4configv1.MatchField) *p4v1.FieldMatch {
	switch f.GetMatchType() {
	case p4configv1.MatchField_TERNARY:
		return ternary(f.GetId(), []byte{1}, []byte{0xff})
	case p4configv1.MatchField_LPM:
		return lpm(f.GetId(), f.GetBitwidth(), 1)
	}
	return exact(f.GetId(), 1)
}

func param(id uint32, v ...byte) *p4v1.Action_Param {
	return &p4v1.Action_Param{ParamId: id, Value: v}
}

func action(id uint32, params ...*p4v1.Action_Param) *p4v1.TableAction {
	return &p4v1.TableAction{Type: &p4v1.TableAction_Action{Action: &p4v1.Action{ActionId: id, Params: params}}}
}

func update(typ p4v1.Update_Type, te *p4v1.TableEntry) *p4v1.Update {
	return &p4v1.Update{Type: typ, Entity: &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: te}}}
}

func ins(te *p4v1.TableEntry) *p4v1.Update { return update(p4v1.Update_INSERT, te) }
func mod(te *p4v1.TableEntry) *p4v1.Update { return update(p4v1.Update_MODIFY, te) }
func del(te *p4v1.TableEntry) *p4v1.Update { return update(p4v1.Update_DELETE, te) }

// portRole builds a port_roles entry.
func (h *harness) portRole(port, role byte) *p4v1.TableEntry {
	b := h.srv.bind
	return &p4v1.TableEntry{TableId: b.portRoles, Match: []*p4v1.FieldMatch{exact(b.portRolesPort, 0, port)},
		Action: action(b.setPortRole, param(b.roleParam, role))}
}

func (h *harness) bucket(bucket, port byte) *p4v1.TableEntry {
	b := h.srv.bind
	return &p4v1.TableEntry{TableId: b.buckets, Match: []*p4v1.FieldMatch{exact(b.bucketsBucket, bucket)},
		Action: action(b.setGateway, param(b.gwPortParam, port), param(b.gwMACParam, 2, 0, 0, 0, 0, port))}
}

func (h *harness) learnedEntry(macLast, port byte, timeout time.Duration) *p4v1.TableEntry {
	b := h.srv.bind
	return &p4v1.TableEntry{TableId: b.learned,
		Match:         []*p4v1.FieldMatch{exact(b.learnedMAC, 0, 0, 0, 0, 0, macLast), exact(b.learnedPort, port)},
		Action:        action(b.markKnown),
		IdleTimeoutNs: timeout.Nanoseconds()}
}

// streamClient is one StreamChannel with its responses collected.
type streamClient struct {
	t      testing.TB
	s      p4v1.P4Runtime_StreamChannelClient
	msgs   chan *p4v1.StreamMessageResponse
	closed chan error
	cancel context.CancelFunc
}

func (h *harness) openStreamRaw() *streamClient {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := h.client.StreamChannel(ctx)
	if err != nil {
		h.t.Fatalf("open stream: %v", err)
	}
	sc := &streamClient{t: h.t, s: s, msgs: make(chan *p4v1.StreamMessageResponse, 1024), closed: make(chan error, 1), cancel: cancel}
	go func() {
		for {
			m, err := s.Recv()
			if err != nil {
				sc.closed <- err
				return
			}
			sc.msgs <- m
		}
	}()
	h.t.Cleanup(cancel)
	return sc
}

func (h *harness) openStream(election uint64) *streamClient {
	h.t.Helper()
	sc := h.openStreamRaw()
	sc.sendArbitration(eid(election))
	return sc
}

func (sc *streamClient) sendArbitration(e *p4v1.Uint128) {
	sc.t.Helper()
	err := sc.s.Send(&p4v1.StreamMessageRequest{Update: &p4v1.StreamMessageRequest_Arbitration{
		Arbitration: &p4v1.MasterArbitrationUpdate{DeviceId: testDevice, ElectionId: e}}})
	if err != nil {
		sc.t.Fatalf("send arbitration: %v", err)
	}
}

func (sc *streamClient) next(timeout time.Duration) *p4v1.StreamMessageResponse {
	sc.t.Helper()
	select {
	case m := <-sc.msgs:
		return m
	case err := <-sc.closed:
		sc.t.Fatalf("stream closed: %v", err)
	case <-time.After(timeout):
		sc.t.Fatalf("no stream message within %v", timeout)
	}
	return nil
}

func (sc *streamClient) arbitration() *p4v1.MasterArbitrationUpdate {
	sc.t.Helper()
	m := sc.next(2 * time.Second)
	a := m.GetArbitration()
	if a == nil {
		sc.t.Fatalf("want arbitration update, got %v", m)
	}
	return a
}

// none asserts that no message arrives within d.
func (sc *streamClient) none(d time.Duration) {
	sc.t.Helper()
	select {
	case m := <-sc.msgs:
		sc.t.Fatalf("unexpected stream message %v", m)
	case <-time.After(d):
	}
}

func (sc *streamClient) close() {
	_ = sc.s.CloseSend()
	sc.cancel()
}
