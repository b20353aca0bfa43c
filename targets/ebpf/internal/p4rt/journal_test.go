package p4rt

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	p4configv1 "github.com/p4lang/p4runtime/go/p4/config/v1"
	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"supergw/targets/ebpf/internal/dataplane"
)

// The journal: a second server restored from the first one's journal serves the same
// pipeline, cookie and entries (read back equal), and puts them into its data plane; a
// torn last record, a journal of another pipeline and counter writes are handled.

func journaledHarness(t *testing.T, dir string) *harness {
	t.Helper()
	h := newHarness(t)
	j, err := OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.srv.UseJournal(j); err != nil {
		t.Fatal(err)
	}
	return h
}

func readAllState(t *testing.T, h *harness) []string {
	t.Helper()
	var out []string
	for _, e := range h.mustRead(
		&p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: &p4v1.TableEntry{}}},
		&p4v1.Entity{Entity: &p4v1.Entity_PacketReplicationEngineEntry{PacketReplicationEngineEntry: &p4v1.PacketReplicationEngineEntry{
			Type: &p4v1.PacketReplicationEngineEntry_MulticastGroupEntry{MulticastGroupEntry: &p4v1.MulticastGroupEntry{}}}}},
		&p4v1.Entity{Entity: &p4v1.Entity_DigestEntry{DigestEntry: &p4v1.DigestEntry{}}},
	) {
		out = append(out, prototext.Format(e))
	}
	return out
}

func restored(t *testing.T, dir string) (*harness, *RestoreReport) {
	t.Helper()
	fake := dataplane.NewFake(1, 2, 3, 4)
	srv, err := New(Config{DeviceID: testDevice, Dataplane: fake, IdleScanInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	j, err := OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := srv.Restore(j)
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	h := harnessFor(t, srv)
	h.fake = fake
	return h, rep
}

func TestJournalRestoresPipelineAndEntries(t *testing.T) {
	dir := t.TempDir()
	h := journaledHarness(t, dir)
	h.primary() // cookie 7
	b := h.srv.bind
	h.mustWrite(
		ins(h.portRole(1, 1)), ins(h.portRole(3, 2)),
		ins(h.bucket(5, 3)), ins(h.bucket(6, 3)),
		mod(&p4v1.TableEntry{TableId: b.settings, IsDefaultAction: true, Action: action(b.setDispatch,
			param(b.gwIPParam, 10, 0, 0, 1), param(b.vmacParam, 2, 0x53, 0x47, 0, 0, 0), param(b.maskParam, 15), param(b.hashParam, 0))}),
		ins(h.backupEntry(3, 4, 0x61, 0xa8)),
		digestUpdate(p4v1.Update_INSERT, b.learnDigest, &p4v1.DigestEntry_Config{MaxListSize: 3, AckTimeoutNs: 5}),
	)
	h.mustWrite(mod(h.bucket(6, 4)), del(h.bucket(5, 3)))
	want := readAllState(t, h)

	h2, rep := restored(t, dir)
	if rep.Cookie != 7 || len(rep.Failed) != 0 || rep.Torn {
		t.Fatalf("restore report %+v", rep)
	}
	cfg, err := h2.client.GetForwardingPipelineConfig(context.Background(), &p4v1.GetForwardingPipelineConfigRequest{DeviceId: testDevice})
	if err != nil || cfg.GetConfig().GetCookie().GetCookie() != 7 {
		t.Fatalf("restored pipeline: %v %v", cfg, err)
	}
	if got := readAllState(t, h2); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("restored state differs:\n got %v\nwant %v", got, want)
	}
	if got := h2.fake.Buckets(); len(got) != 1 || got[6].Port != 4 {
		t.Errorf("data plane after restore: buckets %v", got)
	}
	if got := h2.fake.GatewayBackups(); got[3].Port != 4 || got[3].Timeout != 25*time.Millisecond {
		t.Errorf("data plane after restore: gateway_backups %v", got)
	}
	// The restored server journals on: a third generation restores the second's writes too.
	h2.primary()
	h2.mustWrite(ins(h2.bucket(9, 1)))
	h3, _ := restored(t, dir)
	if got := h3.fake.Buckets(); len(got) != 1 || got[9].Port != 1 {
		t.Errorf("third generation: buckets %v (a new VERIFY_AND_COMMIT wiped the rest)", got)
	}
}

func TestJournalTornRecordAndCounters(t *testing.T) {
	dir := t.TempDir()
	h := journaledHarness(t, dir)
	h.primary()
	h.mustWrite(ins(h.bucket(5, 3)))
	b := h.srv.bind
	// A counter write is not journaled (counters live in the maps).
	h.mustWrite(&p4v1.Update{Type: p4v1.Update_MODIFY, Entity: &p4v1.Entity{Entity: &p4v1.Entity_CounterEntry{CounterEntry: &p4v1.CounterEntry{
		CounterId: b.dropCounter, Index: &p4v1.Index{Index: 1}, Data: &p4v1.CounterData{PacketCount: 3}}}}})
	f, err := os.OpenFile(h.srv.journal.Path(), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{kindUpdates, 0, 0, 1, 0, 0xde, 0xad}) // a crash in the middle of an append
	f.Close()
	h2, rep := restored(t, dir)
	if !rep.Torn || rep.Applied != 1 || len(rep.Failed) != 0 {
		t.Errorf("restore report %+v, want one update applied and the torn record noticed", rep)
	}
	if got := h2.fake.Buckets(); len(got) != 1 {
		t.Errorf("buckets %v", got)
	}
}

func TestJournalOfAnotherPipelineIsRefused(t *testing.T) {
	dir := t.TempDir()
	j, err := OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	other := proto.Clone(mustP4Info(t)).(*p4v1.ForwardingPipelineConfig)
	if err := j.Snapshot(other, nil); err != nil {
		t.Fatal(err)
	}
	j.Close()
	srv, err := New(Config{DeviceID: testDevice, Dataplane: dataplane.NewFake(1)})
	if err != nil {
		t.Fatal(err)
	}
	j, _ = OpenJournal(dir)
	if _, err := srv.Restore(j); err == nil || !strings.Contains(err.Error(), "another pipeline") {
		t.Errorf("restore of another pipeline's journal: %v", err)
	}
}

// mustP4Info is a config whose P4Info lacks a table of this build's.
func mustP4Info(t *testing.T) *p4v1.ForwardingPipelineConfig {
	t.Helper()
	h := newHarness(t)
	info := proto.Clone(h.info).(*p4configv1.P4Info)
	info.Tables = info.Tables[1:]
	return &p4v1.ForwardingPipelineConfig{P4Info: info, Cookie: &p4v1.ForwardingPipelineConfig_Cookie{Cookie: 9}}
}
