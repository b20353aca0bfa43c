package p4rt

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"

	"supergw/targets/ebpf/internal/dataplane"
	"supergw/targets/ebpf/internal/pipeline"
)

// BenchmarkWriteModifyBucket measures one Write with one MODIFY of a buckets
// entry (the controller's rebalancing operation), alternating between two
// gateways so that every write changes the entry:
//
//   - fake/grpc: over gRPC (bufconn) on the fake data plane: the server's cost;
//   - ebpf/server, ebpf/grpc (root only): on the real eBPF data plane (map
//     update of sgw_buckets), called directly and over gRPC. The data plane is
//     attached to one veth sgw-hd-b<pid> (no traffic), device id 950, pins in
//     /sys/fs/bpf/sgw-hd-bench-<pid>.
//
// go test -run '^$' -bench WriteModifyBucket ./internal/p4rt
func BenchmarkWriteModifyBucket(b *testing.B) {
	b.Run("fake/grpc", func(b *testing.B) {
		h := newHarness(b)
		h.primary()
		benchModify(b, func(u *p4v1.Update) error { return h.write(eid(1), u) }, h.srv)
	})
	b.Run("ebpf/server", func(b *testing.B) {
		srv := benchEBPFServer(b)
		benchModify(b, func(u *p4v1.Update) error {
			_, err := srv.Write(context.Background(), &p4v1.WriteRequest{DeviceId: benchDevice, Updates: []*p4v1.Update{u}})
			return err
		}, srv)
	})
	b.Run("ebpf/grpc", func(b *testing.B) {
		srv := benchEBPFServer(b)
		h := harnessFor(b, srv)
		benchModify(b, func(u *p4v1.Update) error {
			_, err := h.client.Write(context.Background(), &p4v1.WriteRequest{DeviceId: benchDevice, Updates: []*p4v1.Update{u}})
			return err
		}, srv)
	})
}

const benchDevice = 950

func benchModify(b *testing.B, write func(*p4v1.Update) error, srv *Server) {
	bd := srv.bind
	entry := func(port byte) *p4v1.TableEntry {
		return &p4v1.TableEntry{TableId: bd.buckets, Match: []*p4v1.FieldMatch{exact(bd.bucketsBucket, 7)},
			Action: action(bd.setGateway, param(bd.gwPortParam, port), param(bd.gwMACParam, 2, 0, 0, 0, 0, port))}
	}
	if err := write(ins(entry(1))); err != nil {
		b.Fatalf("insert: %v", err)
	}
	updates := []*p4v1.Update{mod(entry(2)), mod(entry(1))}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if err := write(updates[i&1]); err != nil {
			b.Fatalf("modify: %v", err)
		}
	}
}

// benchEBPFServer is a Server on the real data plane with the pipeline set.
func benchEBPFServer(b *testing.B) *Server {
	b.Helper()
	if os.Geteuid() != 0 {
		b.Skip("needs root (CAP_BPF, CAP_NET_ADMIN) for the eBPF data plane")
	}
	link := fmt.Sprintf("sgw-hd-b%d", os.Getpid())
	peer := fmt.Sprintf("sgw-hd-p%d", os.Getpid())
	if out, err := exec.Command("ip", "link", "add", link, "type", "veth", "peer", "name", peer).CombinedOutput(); err != nil {
		b.Fatalf("create veth %s: %v %s", link, err, out)
	}
	b.Cleanup(func() { _ = exec.Command("ip", "link", "del", link).Run() })
	dp, err := dataplane.New(dataplane.Config{
		DeviceID: benchDevice,
		Ports:    map[uint16]string{1: link},
		CPUPort:  255,
		PinDir:   filepath.Join("/sys/fs/bpf", fmt.Sprintf("sgw-hd-bench-%d", os.Getpid())),
	})
	if err != nil {
		b.Fatalf("data plane: %v", err)
	}
	b.Cleanup(func() {
		if err := dp.Close(); err != nil {
			b.Errorf("close data plane: %v", err)
		}
	})
	srv, err := New(Config{DeviceID: benchDevice, Dataplane: dp})
	if err != nil {
		b.Fatal(err)
	}
	info, err := pipeline.P4Info()
	if err != nil {
		b.Fatal(err)
	}
	_, err = srv.SetForwardingPipelineConfig(context.Background(), &p4v1.SetForwardingPipelineConfigRequest{
		DeviceId: benchDevice, Action: p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT,
		Config: &p4v1.ForwardingPipelineConfig{P4Info: info},
	})
	if err != nil {
		b.Fatalf("set pipeline: %v", err)
	}
	return srv
}
