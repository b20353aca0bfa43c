package p4rt

import (
	"bytes"
	"testing"
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"supergw/targets/ebpf/internal/dataplane"
)

func TestArbitrationFailover(t *testing.T) {
	h := newHarness(t)
	a := h.openStream(10)
	if got := a.arbitration(); got.GetStatus().GetCode() != int32(codes.OK) || got.GetElectionId().GetLow() != 10 {
		t.Fatalf("first client: %v", got)
	}
	b := h.openStream(5)
	if got := b.arbitration(); got.GetStatus().GetCode() != int32(codes.AlreadyExists) || got.GetElectionId().GetLow() != 10 {
		t.Fatalf("backup: %v", got)
	}
	a.none(50 * time.Millisecond) // no change for the primary: no message

	// A higher election id takes over; everybody is told.
	c := h.openStream(20)
	if got := c.arbitration(); got.GetStatus().GetCode() != int32(codes.OK) {
		t.Fatalf("new primary: %v", got)
	}
	for _, s := range []*streamClient{a, b} {
		if got := s.arbitration(); got.GetStatus().GetCode() != int32(codes.AlreadyExists) || got.GetElectionId().GetLow() != 20 {
			t.Fatalf("after takeover: %v", got)
		}
	}
	// The primary leaves: the next-highest (10) becomes primary.
	c.close()
	if got := a.arbitration(); got.GetStatus().GetCode() != int32(codes.OK) || got.GetElectionId().GetLow() != 10 {
		t.Fatalf("failover to 10: %v", got)
	}
	if got := b.arbitration(); got.GetStatus().GetCode() != int32(codes.AlreadyExists) || got.GetElectionId().GetLow() != 10 {
		t.Fatalf("backup after failover: %v", got)
	}
	if err := h.setPipeline(eid(10), 1); err != nil {
		t.Fatalf("new primary writes: %v", err)
	}
	// A backup may raise its own id and become primary.
	b.sendArbitration(eid(30))
	if got := b.arbitration(); got.GetStatus().GetCode() != int32(codes.OK) {
		t.Fatalf("raised id: %v", got)
	}
	if got := a.arbitration(); got.GetStatus().GetCode() != int32(codes.AlreadyExists) {
		t.Fatalf("demoted: %v", got)
	}
}

func TestArbitrationErrors(t *testing.T) {
	h := newHarness(t)
	h.openStream(10).arbitration()
	dup := h.openStream(10)
	select {
	case err := <-dup.closed:
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("duplicate election id: %v", err)
		}
	case m := <-dup.msgs:
		t.Fatalf("duplicate election id got %v", m)
	case <-time.After(2 * time.Second):
		t.Fatal("duplicate election id: stream not closed")
	}
	wrong := h.openStreamRaw()
	if err := wrong.s.Send(&p4v1.StreamMessageRequest{Update: &p4v1.StreamMessageRequest_Arbitration{Arbitration: &p4v1.MasterArbitrationUpdate{DeviceId: 1, ElectionId: eid(3)}}}); err != nil {
		t.Fatal(err)
	}
	if err := <-wrong.closed; status.Code(err) != codes.NotFound {
		t.Fatalf("wrong device: %v", err)
	}
	// Without election id: a backup that never becomes primary.
	n := h.openStreamRaw()
	n.sendArbitration(nil)
	if got := n.arbitration(); got.GetStatus().GetCode() != int32(codes.AlreadyExists) {
		t.Fatalf("no election id: %v", got)
	}
}

func (h *harness) packetOut(sc *streamClient, port byte, payload []byte) {
	h.t.Helper()
	err := sc.s.Send(&p4v1.StreamMessageRequest{Update: &p4v1.StreamMessageRequest_Packet{Packet: &p4v1.PacketOut{
		Payload: payload, Metadata: []*p4v1.PacketMetadata{{MetadataId: h.srv.bind.pktOutEgressPort, Value: []byte{0, port}}}}}})
	if err != nil {
		h.t.Fatal(err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestPacketOut(t *testing.T) {
	h := newHarness(t, 1, 2)
	sc := h.primary()
	h.mustWrite(ins(h.portRole(1, 1)))
	frame := bytes.Repeat([]byte{0xab}, 60)
	h.packetOut(sc, 1, frame)
	waitFor(t, "transmit", func() bool { return len(h.fake.Sent()) == 1 })
	if s := h.fake.Sent()[0]; s.Port != 1 || !bytes.Equal(s.Frame, frame) {
		t.Fatalf("sent %+v", s)
	}
	// Port 2 exists but has no port_roles entry; port 9 does not exist.
	for _, port := range []byte{2, 9} {
		h.packetOut(sc, port, frame)
		m := sc.next(2 * time.Second)
		se := m.GetError()
		if se == nil || se.GetCanonicalCode() != int32(codes.InvalidArgument) || se.GetPacketOut().GetPacketOut() == nil {
			t.Fatalf("port %d: want StreamError with PacketOutError, got %v", port, m)
		}
	}
	c, _ := h.fake.DropCounter(dropPacketOutBadPort)
	if c.Packets != 2 || c.Bytes != 2*(60+2) { // frame + 2-byte packet_out header, as BMv2 counts it
		t.Errorf("PACKET_OUT_BAD_PORT counter %+v", c)
	}
	if len(h.fake.Sent()) != 1 {
		t.Error("bad packet-out was transmitted")
	}
	// Missing metadata.
	if err := sc.s.Send(&p4v1.StreamMessageRequest{Update: &p4v1.StreamMessageRequest_Packet{Packet: &p4v1.PacketOut{Payload: frame}}}); err != nil {
		t.Fatal(err)
	}
	if se := sc.next(2 * time.Second).GetError(); se.GetCanonicalCode() != int32(codes.InvalidArgument) {
		t.Errorf("missing metadata: %v", se)
	}
	// A backup may not send.
	backup := h.openStream(0)
	backup.arbitration()
	h.packetOut(backup, 1, frame)
	if se := backup.next(2 * time.Second).GetError(); se.GetCanonicalCode() != int32(codes.PermissionDenied) {
		t.Errorf("backup packet-out: %v", se)
	}
}

func TestPacketInGoesToPrimaryOnly(t *testing.T) {
	h := newHarness(t)
	primary := h.primary()
	backup := h.openStream(0)
	backup.arbitration()
	h.fake.Emit(dataplane.Event{Kind: dataplane.EventPacketIn, IngressPort: 3, Reason: 2, Frame: []byte{1, 2, 3}})
	m := primary.next(2 * time.Second)
	pi := m.GetPacket()
	if pi == nil || !bytes.Equal(pi.GetPayload(), []byte{1, 2, 3}) {
		t.Fatalf("packet-in: %v", m)
	}
	md := map[uint32]uint64{}
	for _, x := range pi.GetMetadata() {
		md[x.GetMetadataId()] = toUint(x.GetValue())
	}
	if md[h.srv.bind.pktInIngressPort] != 3 || md[h.srv.bind.pktInReason] != 2 {
		t.Errorf("metadata %v", md)
	}
	backup.none(50 * time.Millisecond)
}

func digestUpdate(typ p4v1.Update_Type, id uint32, cfg *p4v1.DigestEntry_Config) *p4v1.Update {
	return &p4v1.Update{Type: typ, Entity: &p4v1.Entity{Entity: &p4v1.Entity_DigestEntry{DigestEntry: &p4v1.DigestEntry{DigestId: id, Config: cfg}}}}
}

func learnEvent(last byte) dataplane.Event {
	return dataplane.Event{Kind: dataplane.EventDigest, SrcMAC: dataplane.MAC{0, 0, 0, 0, 0, last}, Port: 2, SrcIP: dataplane.IPv4{10, 0, 0, last}}
}

func TestDigestBatchingAndAck(t *testing.T) {
	h := newHarness(t)
	sc := h.primary()
	d := h.srv.bind.learnDigest
	// Not configured: digests are dropped.
	h.fake.Emit(learnEvent(1))
	sc.none(50 * time.Millisecond)

	h.mustWrite(digestUpdate(p4v1.Update_INSERT, d, &p4v1.DigestEntry_Config{MaxTimeoutNs: int64(time.Hour), MaxListSize: 3, AckTimeoutNs: int64(time.Hour)}))
	got := h.mustRead(&p4v1.Entity{Entity: &p4v1.Entity_DigestEntry{DigestEntry: &p4v1.DigestEntry{}}})
	if len(got) != 1 || got[0].GetDigestEntry().GetConfig().GetMaxListSize() != 3 {
		t.Fatalf("digest config read: %v", got)
	}
	h.fake.Emit(learnEvent(1))
	h.fake.Emit(learnEvent(1)) // duplicate while pending: suppressed
	h.fake.Emit(learnEvent(2))
	sc.none(50 * time.Millisecond)
	h.fake.Emit(learnEvent(3))
	m := sc.next(2 * time.Second)
	list := m.GetDigest()
	if list == nil || len(list.GetData()) != 3 || list.GetDigestId() != d {
		t.Fatalf("digest list: %v", m)
	}
	first := list.GetData()[0].GetStruct().GetMembers()
	if len(first) != 3 {
		t.Fatalf("learn_digest_t members: %v", first)
	}
	// Unacked data is not re-sent; after the ack it is.
	h.fake.Emit(learnEvent(1))
	h.fake.Emit(learnEvent(2))
	h.fake.Emit(learnEvent(3))
	sc.none(50 * time.Millisecond)
	if err := sc.s.Send(&p4v1.StreamMessageRequest{Update: &p4v1.StreamMessageRequest_DigestAck{DigestAck: &p4v1.DigestListAck{DigestId: d, ListId: list.GetListId()}}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "ack processed", func() bool {
		h.srv.digests.mu.Lock()
		defer h.srv.digests.mu.Unlock()
		return len(h.srv.digests.states[d].outstanding) == 0
	})
	h.mustWrite(digestUpdate(p4v1.Update_MODIFY, d, &p4v1.DigestEntry_Config{MaxTimeoutNs: int64(30 * time.Millisecond), MaxListSize: 100, AckTimeoutNs: int64(time.Hour)}))
	h.fake.Emit(learnEvent(1))
	m = sc.next(2 * time.Second) // flushed by max_timeout_ns
	if m.GetDigest() == nil || len(m.GetDigest().GetData()) != 1 || m.GetDigest().GetListId() == list.GetListId() {
		t.Fatalf("re-sent after ack: %v", m)
	}

	// Errors: unknown id, INSERT twice, MODIFY/DELETE missing, no config.
	for _, tc := range []struct {
		name string
		u    *p4v1.Update
		code codes.Code
	}{
		{"unknown digest", digestUpdate(p4v1.Update_INSERT, 0x17000099, &p4v1.DigestEntry_Config{}), codes.InvalidArgument},
		{"insert twice", digestUpdate(p4v1.Update_INSERT, d, &p4v1.DigestEntry_Config{}), codes.AlreadyExists},
		{"negative", digestUpdate(p4v1.Update_MODIFY, d, &p4v1.DigestEntry_Config{MaxListSize: -1}), codes.InvalidArgument},
		{"no config", digestUpdate(p4v1.Update_MODIFY, d, nil), codes.InvalidArgument},
	} {
		if code, msg := h.writeCode(tc.u); code != tc.code {
			t.Errorf("%s: %v %q", tc.name, code, msg)
		}
	}
	h.mustWrite(digestUpdate(p4v1.Update_DELETE, d, nil))
	if code, _ := h.writeCode(digestUpdate(p4v1.Update_DELETE, d, nil)); code != codes.NotFound {
		t.Errorf("delete missing: %v", code)
	}
}

func TestDigestAckTimeout(t *testing.T) {
	h := newHarness(t)
	sc := h.primary()
	d := h.srv.bind.learnDigest
	h.mustWrite(digestUpdate(p4v1.Update_INSERT, d, &p4v1.DigestEntry_Config{MaxTimeoutNs: 0, MaxListSize: 1, AckTimeoutNs: int64(40 * time.Millisecond)}))
	h.fake.Emit(learnEvent(1))
	if sc.next(2*time.Second).GetDigest() == nil {
		t.Fatal("no digest")
	}
	h.fake.Emit(learnEvent(1))
	sc.none(20 * time.Millisecond)
	waitFor(t, "ack timeout", func() bool {
		h.srv.digests.mu.Lock()
		defer h.srv.digests.mu.Unlock()
		return len(h.srv.digests.states[d].outstanding) == 0
	})
	h.fake.Emit(learnEvent(1))
	if sc.next(2*time.Second).GetDigest() == nil {
		t.Fatal("not re-sent after ack timeout")
	}
}

func TestIdleTimeoutNotification(t *testing.T) {
	h := newHarness(t)
	sc := h.primary()
	timeout := 200 * time.Millisecond
	h.mustWrite(ins(h.learnedEntry(1, 2, timeout)), ins(h.learnedEntry(2, 2, 0)))
	sc.none(50 * time.Millisecond)
	mac := dataplane.MAC{0, 0, 0, 0, 0, 1}
	h.fake.Touch(mac, 2, time.Second)
	h.fake.Touch(dataplane.MAC{0, 0, 0, 0, 0, 2}, 2, time.Hour) // no timeout set: never reported
	m := sc.next(2 * time.Second)
	n := m.GetIdleTimeoutNotification()
	if n == nil || len(n.GetTableEntry()) != 1 {
		t.Fatalf("want idle notification, got %v", m)
	}
	te := n.GetTableEntry()[0]
	if te.GetTableId() != h.srv.bind.learned || te.GetIdleTimeoutNs() != timeout.Nanoseconds() || len(te.GetMatch()) != 2 {
		t.Errorf("notified entry %v", te)
	}
	sc.none(100 * time.Millisecond) // once per expiry
	// Hit again, then idle again: a second notification.
	h.fake.Touch(mac, 2, 0)
	waitFor(t, "entry re-armed", func() bool {
		h.srv.mu.Lock()
		defer h.srv.mu.Unlock()
		for _, se := range h.srv.tables[h.srv.bind.learned] {
			if se.te.GetIdleTimeoutNs() > 0 && se.notified {
				return false
			}
		}
		return true
	})
	h.fake.Touch(mac, 2, time.Second)
	if sc.next(2*time.Second).GetIdleTimeoutNotification() == nil {
		t.Fatal("no second notification")
	}
	// time_since_last_hit on read.
	got := h.mustRead(tableRead(&p4v1.TableEntry{TableId: h.srv.bind.learned, Match: []*p4v1.FieldMatch{exact(h.srv.bind.learnedMAC, 1)}, TimeSinceLastHit: &p4v1.TableEntry_IdleTimeout{}}))
	if len(got) != 1 || got[0].GetTableEntry().GetTimeSinceLastHit().GetElapsedNs() < int64(time.Second) {
		t.Errorf("time_since_last_hit: %v", got)
	}
}

// A batched digest list goes out max_timeout_ns after its first entry, not at
// the next idle scan (here an hour away): a lone host waits the timeout only.
func TestDigestMaxTimeoutWithoutTick(t *testing.T) {
	fake := dataplane.NewFake(1, 2, 3, 4)
	srv, err := New(Config{DeviceID: testDevice, Dataplane: fake, IdleScanInterval: time.Hour})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h := harnessFor(t, srv)
	h.fake = fake
	sc := h.primary()
	d := h.srv.bind.learnDigest
	timeout := 20 * time.Millisecond
	h.mustWrite(digestUpdate(p4v1.Update_INSERT, d, &p4v1.DigestEntry_Config{MaxTimeoutNs: int64(timeout), MaxListSize: 64, AckTimeoutNs: int64(time.Hour)}))
	start := time.Now()
	h.fake.Emit(learnEvent(1))
	h.fake.Emit(learnEvent(2))
	m := sc.next(2 * time.Second)
	waited := time.Since(start)
	if m.GetDigest() == nil || len(m.GetDigest().GetData()) != 2 {
		t.Fatalf("want one list of 2 after the timeout, got %v", m)
	}
	if waited < timeout || waited > timeout+500*time.Millisecond {
		t.Errorf("list sent %v after its first entry, want about %v", waited, timeout)
	}
	// Full lists go at once; the timer of the first then finds a younger list and waits for it.
	h.mustWrite(digestUpdate(p4v1.Update_MODIFY, d, &p4v1.DigestEntry_Config{MaxTimeoutNs: int64(200 * time.Millisecond), MaxListSize: 2, AckTimeoutNs: int64(time.Hour)}))
	h.fake.Emit(learnEvent(3))
	h.fake.Emit(learnEvent(4))
	if got := sc.next(2 * time.Second).GetDigest(); got == nil || len(got.GetData()) != 2 {
		t.Fatalf("full list: %v", got)
	}
	h.fake.Emit(learnEvent(5))
	sc.none(100 * time.Millisecond)
	if got := sc.next(2 * time.Second).GetDigest(); got == nil || len(got.GetData()) != 1 {
		t.Fatalf("lone entry after its timeout: %v", got)
	}
}
