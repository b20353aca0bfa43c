package p4rt

import (
	"strings"
	"testing"
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"

	"supergw/targets/ebpf/internal/dataplane"
)

// Gateway liveness through P4Runtime: gateway_backups' set_backup (timeout_us in
// microseconds), its refusal of timeout 0, delete, and the two per-port counters.

func (h *harness) backupEntry(gateway, backup byte, timeoutUs ...byte) *p4v1.TableEntry {
	b := h.srv.bind
	return &p4v1.TableEntry{TableId: b.gatewayBackups, Match: []*p4v1.FieldMatch{exact(b.gatewayBackupsPort, gateway)},
		Action: action(b.setBackup, param(b.backupPortParam, backup), param(b.backupMACParam, 2, 0, 0, 0, 0, backup),
			param(b.backupTimeoutParam, timeoutUs...))}
}

func TestGatewayBackupsReachDataplane(t *testing.T) {
	h := newHarness(t)
	h.primary()
	h.mustWrite(ins(h.backupEntry(5, 6, 0x75, 0x30))) // 30000 us
	want := dataplane.GatewayBackup{Port: 6, MAC: dataplane.MAC{2, 0, 0, 0, 0, 6}, Timeout: 30 * time.Millisecond}
	if got := h.fake.GatewayBackups(); len(got) != 1 || got[5] != want {
		t.Fatalf("gateway_backups: %+v, want port 5 -> %+v", got, want)
	}
	h.mustWrite(mod(h.backupEntry(5, 7, 0x27, 0x10))) // 10000 us
	if got := h.fake.GatewayBackups()[5]; got.Port != 7 || got.Timeout != 10*time.Millisecond {
		t.Errorf("after MODIFY: %+v", got)
	}
	code, msg := h.writeCode(ins(h.backupEntry(6, 5, 0)))
	if code != codes.InvalidArgument || !strings.Contains(msg, "timeout_us 0") {
		t.Errorf("timeout_us 0: %v %q, want INVALID_ARGUMENT naming it", code, msg)
	}
	if got := h.fake.GatewayBackups(); len(got) != 1 {
		t.Errorf("a refused entry left a trace: %+v", got)
	}
	h.mustWrite(del(&p4v1.TableEntry{TableId: h.srv.bind.gatewayBackups, Match: []*p4v1.FieldMatch{exact(h.srv.bind.gatewayBackupsPort, 5)}}))
	if got := h.fake.GatewayBackups(); len(got) != 0 {
		t.Errorf("after DELETE: %+v", got)
	}
}

func TestLivenessCountersReadAndReset(t *testing.T) {
	h := newHarness(t)
	h.primary()
	if err := h.fake.SetPortCounter(dataplane.LivenessFrames, 5, dataplane.Counter{Packets: 3, Bytes: 180}); err != nil {
		t.Fatal(err)
	}
	var live uint32
	for id, pc := range h.srv.bind.portCounters {
		if pc == dataplane.LivenessFrames {
			live = id
		}
	}
	ce := &p4v1.Entity{Entity: &p4v1.Entity_CounterEntry{CounterEntry: &p4v1.CounterEntry{CounterId: live, Index: &p4v1.Index{Index: 5}}}}
	got := h.mustRead(ce)
	if d := got[0].GetCounterEntry().GetData(); d.GetPacketCount() != 3 || d.GetByteCount() != 180 {
		t.Errorf("liveness_frames[5] = %v", d)
	}
	// A new pipeline (VERIFY_AND_COMMIT) starts every counter at zero, these too.
	if err := h.setPipeline(eid(1), 7); err != nil {
		t.Fatal(err)
	}
	if c, _ := h.fake.PortCounter(dataplane.LivenessFrames, 5); c != (dataplane.Counter{}) {
		t.Errorf("liveness_frames[5] after a new pipeline: %+v", c)
	}
}
