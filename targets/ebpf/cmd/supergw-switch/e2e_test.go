package main

// End-to-end test of the real binary: supergw-switch started BMv2-style in a
// network namespace with the real eBPF data plane, driven over gRPC, with
// frames sent and captured on veth peers. Needs root; objects are named sgw-rt-*.

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	p4configv1 "github.com/p4lang/p4runtime/go/p4/config/v1"
	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	c "supergw/targets/ebpf/internal/p4constants"
	"supergw/targets/ebpf/internal/pipeline"
)

func sh(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// inNetns runs fn on a thread inside the named network namespace; sockets
// created by fn stay in that namespace.
func inNetns(name string, fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return err
	}
	defer orig.Close()
	target, err := os.Open("/run/netns/" + name)
	if err != nil {
		return err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return err
	}
	fnErr := fn()
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		panic(fmt.Sprintf("restore netns: %v", err)) // the thread is unusable
	}
	return fnErr
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// rawSocket opens an AF_PACKET socket bound to ifname inside the namespace.
func rawSocket(t *testing.T, ns, ifname string) int {
	t.Helper()
	var fd int
	err := inNetns(ns, func() error {
		ifi, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return err
		}
		tv := unix.Timeval{Usec: 100000}
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index})
	})
	if err != nil {
		t.Fatalf("raw socket on %s: %v", ifname, err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// waitFrame returns the first frame on fd that satisfies match.
func waitFrame(t *testing.T, fd int, match func([]byte) bool) []byte {
	t.Helper()
	buf := make([]byte, 2048)
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			continue
		}
		if match(buf[:n]) {
			return append([]byte(nil), buf[:n]...)
		}
	}
	t.Fatal("expected frame not seen")
	return nil
}

func arpFrame(dst, src []byte, op uint16, sha []byte, spa []byte, tha []byte, tpa []byte) []byte {
	f := append(append(append([]byte{}, dst...), src...), 0x08, 0x06)
	f = append(f, 0, 1, 8, 0, 6, 4)
	f = binary.BigEndian.AppendUint16(f, op)
	f = append(append(append(append(f, sha...), spa...), tha...), tpa...)
	return append(f, make([]byte, 60-len(f))...)
}

func TestEndToEndRealDataplane(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (CAP_BPF, CAP_NET_ADMIN) to run the real eBPF data plane")
	}
	for _, tool := range []string{"ip", "nsenter", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	bin := filepath.Join(t.TempDir(), "supergw-switch")
	sh(t, "go", "build", "-o", bin, ".")

	ns := fmt.Sprintf("sgw-rt-e2e-%d", os.Getpid()%100000)
	t.Logf("namespace %s", ns)
	sh(t, "ip", "netns", "add", ns)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			t.Errorf("delete namespace %s: %v: %s", ns, err, out)
		}
	})
	// No IPv6: the veths' own router/neighbour solicitations would be learned and
	// their digests would interleave with the messages this test waits for.
	for _, knob := range []string{"all", "default"} {
		sh(t, "ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf."+knob+".disable_ipv6=1")
	}
	for _, l := range []string{"sgw-rt-p1", "sgw-rt-p2"} {
		sh(t, "ip", "-n", ns, "link", "add", l, "type", "veth", "peer", "name", l+"p")
		sh(t, "ip", "-n", ns, "link", "set", l, "up")
		sh(t, "ip", "-n", ns, "link", "set", l+"p", "up")
	}
	sh(t, "ip", "-n", ns, "link", "set", "lo", "up")
	hostFd, gwFd := rawSocket(t, ns, "sgw-rt-p1p"), rawSocket(t, ns, "sgw-rt-p2p")

	pinRoot := "/sys/fs/bpf/" + ns
	stateRoot := t.TempDir()
	// Unique per run so concurrent test runs do not share a device id or port.
	dev := uint64(800 + os.Getpid()%100)
	addr := fmt.Sprintf("127.0.0.1:%d", 50800+os.Getpid()%100)
	sw := startSwitch(t, ns, bin, addr, dev, pinRoot, stateRoot)
	t.Cleanup(func() {
		exec.Command(bin, "--teardown", "--device-id", fmt.Sprint(dev), "--pin-dir", pinRoot, "--state-dir", stateRoot).Run()
		_ = os.RemoveAll(pinRoot)
	})
	logs := sw.logs
	cc := dial(t, ns, addr)
	defer cc.Close()
	client := p4v1.NewP4RuntimeClient(cc)
	var err error
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var caps *p4v1.CapabilitiesResponse
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if caps, err = client.Capabilities(ctx, &p4v1.CapabilitiesRequest{}, grpc.WaitForReady(true)); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("switch not serving: %v\n%s", err, logs.String())
	}
	if caps.GetP4RuntimeApiVersion() != "1.4.1" {
		t.Fatalf("caps %v", caps)
	}

	stream, err := client.StreamChannel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	eid := &p4v1.Uint128{Low: 1}
	if err := stream.Send(&p4v1.StreamMessageRequest{Update: &p4v1.StreamMessageRequest_Arbitration{Arbitration: &p4v1.MasterArbitrationUpdate{DeviceId: dev, ElectionId: eid}}}); err != nil {
		t.Fatal(err)
	}
	msgs := make(chan *p4v1.StreamMessageResponse, 100)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				close(msgs)
				return
			}
			msgs <- m
		}
	}()
	next := func(want string) *p4v1.StreamMessageResponse {
		t.Helper()
		for {
			select {
			case m, ok := <-msgs:
				if !ok {
					t.Fatalf("stream closed waiting for %s", want)
				}
				if m.GetArbitration() != nil && want != "arbitration" {
					continue
				}
				return m
			case <-time.After(5 * time.Second):
				t.Fatalf("no %s\n%s", want, logs.String())
			}
		}
	}
	if a := next("arbitration").GetArbitration(); a.GetStatus().GetCode() != 0 {
		t.Fatalf("not primary: %v", a)
	}

	info, err := pipeline.P4Info()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.SetForwardingPipelineConfig(ctx, &p4v1.SetForwardingPipelineConfigRequest{DeviceId: dev, ElectionId: eid,
		Action: p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT, Config: &p4v1.ForwardingPipelineConfig{P4Info: info,
			Cookie: &p4v1.ForwardingPipelineConfig_Cookie{Cookie: 42}}}); err != nil {
		t.Fatal(err)
	}
	ids, objects := idsByName(info)
	pktOut, pktIn := objects[c.CtrlHdrPacketOut].names, objects[c.CtrlHdrPacketIn].names
	port := func(p uint16) []byte { return binary.BigEndian.AppendUint16(nil, p) }
	// Match values and params are given in P4Info declaration order.
	te := func(table string, match [][]byte, act string, params ...[]byte) *p4v1.Update {
		e := &p4v1.TableEntry{TableId: ids[table]}
		for i, m := range match {
			e.Match = append(e.Match, &p4v1.FieldMatch{FieldId: objects[table].fields[i], FieldMatchType: &p4v1.FieldMatch_Exact_{Exact: &p4v1.FieldMatch_Exact{Value: m}}})
		}
		a := &p4v1.Action{ActionId: ids[act]}
		for i, p := range params {
			a.Params = append(a.Params, &p4v1.Action_Param{ParamId: objects[act].fields[i], Value: p})
		}
		e.Action = &p4v1.TableAction{Type: &p4v1.TableAction_Action{Action: a}}
		typ := p4v1.Update_INSERT
		if match == nil {
			e.IsDefaultAction, typ = true, p4v1.Update_MODIFY
		}
		return &p4v1.Update{Type: typ, Entity: &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: e}}}
	}
	gwIP := []byte{10, 0, 0, 1}
	_, err = client.Write(ctx, &p4v1.WriteRequest{DeviceId: dev, ElectionId: eid, Updates: []*p4v1.Update{
		te(c.TablePortRoles, [][]byte{port(1)}, c.ActionSetPortRole, []byte{byte(c.PortRoleHost)}),
		te(c.TablePortRoles, [][]byte{port(2)}, c.ActionSetPortRole, []byte{byte(c.PortRoleGateway)}),
		te(c.TableSettings, nil, c.ActionSetDispatchConfig, gwIP, []byte{2, 0, 0, 0, 0, 0}, port(15), []byte{byte(c.BucketHashCRC32)}),
		{Type: p4v1.Update_INSERT, Entity: &p4v1.Entity{Entity: &p4v1.Entity_DigestEntry{DigestEntry: &p4v1.DigestEntry{
			DigestId: ids[c.DigestLearnDigest], Config: &p4v1.DigestEntry_Config{MaxListSize: 1, AckTimeoutNs: int64(time.Second)}}}}},
	}})
	if err != nil {
		t.Fatalf("write: %v", err)
	}

	// Packet-out to the host port leaves its veth unchanged.
	payload := arpFrame([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, []byte{2, 0, 0, 0, 0xee, 1}, 1, []byte{2, 0, 0, 0, 0xee, 1}, gwIP, make([]byte, 6), []byte{10, 0, 0, 9})
	if err := stream.Send(&p4v1.StreamMessageRequest{Update: &p4v1.StreamMessageRequest_Packet{Packet: &p4v1.PacketOut{
		Payload: payload, Metadata: []*p4v1.PacketMetadata{{MetadataId: pktOut[c.CtrlHdrPacketOutEgressPort], Value: port(1)}}}}}); err != nil {
		t.Fatal(err)
	}
	waitFrame(t, hostFd, func(f []byte) bool { return bytes.Equal(f, payload) })

	// An ARP reply from the gateway port is punted as GATEWAY_ARP_REPLY.
	gwMAC := []byte{2, 0, 0, 0, 0x99, 2}
	reply := arpFrame([]byte{2, 0, 0, 0, 0, 5}, gwMAC, 2, gwMAC, []byte{10, 0, 0, 2}, []byte{2, 0, 0, 0, 0, 5}, gwIP)
	if _, err := unix.Write(gwFd, reply); err != nil {
		t.Fatal(err)
	}
	pi := next("packet-in").GetPacket()
	md := map[uint32]uint64{}
	for _, m := range pi.GetMetadata() {
		md[m.GetMetadataId()] = uint64(binary.BigEndian.Uint16(append(make([]byte, 2-min(2, len(m.GetValue()))), m.GetValue()...)))
	}
	if !bytes.HasPrefix(pi.GetPayload(), reply[:42]) || md[pktIn[c.CtrlHdrPacketInIngressPort]] != 2 || md[pktIn[c.CtrlHdrPacketInReason]] != uint64(c.PuntReasonGatewayARPReply) {
		t.Fatalf("packet-in %v", pi)
	}

	// A frame from an unknown host source is learned: one digest list.
	hostFrame := append([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0x11, 0x22, 0x88, 0xb5}, make([]byte, 46)...)
	if _, err := unix.Write(hostFd, hostFrame); err != nil {
		t.Fatal(err)
	}
	dl := next("digest").GetDigest()
	if dl == nil || len(dl.GetData()) != 1 {
		t.Fatalf("digest %v", dl)
	}
	members := dl.GetData()[0].GetStruct().GetMembers()
	if len(members) != 3 || !bytes.Equal(members[0].GetBitstring(), []byte{2, 0, 0, 0, 0x11, 0x22}) || !bytes.Equal(members[1].GetBitstring(), []byte{1}) {
		t.Fatalf("digest members %v", members)
	}

	// A packet-out to a port without a port_roles entry is refused and counted
	// in the real drop_counter.
	if err := stream.Send(&p4v1.StreamMessageRequest{Update: &p4v1.StreamMessageRequest_Packet{Packet: &p4v1.PacketOut{
		Payload: payload, Metadata: []*p4v1.PacketMetadata{{MetadataId: pktOut[c.CtrlHdrPacketOutEgressPort], Value: port(9)}}}}}); err != nil {
		t.Fatal(err)
	}
	if se := next("stream error").GetError(); se.GetPacketOut() == nil {
		t.Fatalf("want PacketOutError, got %v", se)
	}
	rc, err := client.Read(ctx, &p4v1.ReadRequest{DeviceId: dev, Entities: []*p4v1.Entity{{Entity: &p4v1.Entity_CounterEntry{CounterEntry: &p4v1.CounterEntry{
		CounterId: ids[c.CounterDropCounter], Index: &p4v1.Index{Index: int64(c.DropReasonPacketOutBadPort)}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rc.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if d := resp.GetEntities()[0].GetCounterEntry().GetData(); d.GetPacketCount() != 1 || d.GetByteCount() != int64(2+len(payload)) {
		t.Fatalf("drop_counter[PACKET_OUT_BAD_PORT] = %v", d)
	}

	// A learned source that sees no traffic is reported idle.
	learned := te(c.TableLearnedSources, [][]byte{{2, 0, 0, 0, 0x11, 0x22}, port(1)}, c.ActionMarkKnown)
	learned.GetEntity().GetTableEntry().IdleTimeoutNs = int64(300 * time.Millisecond)
	if _, err := client.Write(ctx, &p4v1.WriteRequest{DeviceId: dev, ElectionId: eid, Updates: []*p4v1.Update{learned}}); err != nil {
		t.Fatal(err)
	}
	idle := next("idle timeout notification").GetIdleTimeoutNotification()
	if len(idle.GetTableEntry()) != 1 || idle.GetTableEntry()[0].GetTableId() != ids[c.TableLearnedSources] {
		t.Fatalf("idle notification %v", idle)
	}

	// SIGTERM hands the data plane over: exit 0, the pins stay, and the program keeps
	// answering ARP for IP_G with nobody in user space.
	sw.stop(t, syscall.SIGTERM)
	if entries, _ := os.ReadDir(filepath.Join(pinRoot, fmt.Sprint(dev))); len(entries) == 0 {
		t.Fatalf("no pins left after SIGTERM: the data plane went with the process\n%s", logs.String())
	}
	arpForG := arpFrame([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, []byte{2, 0, 0, 0, 0x11, 0x22}, 1, []byte{2, 0, 0, 0, 0x11, 0x22},
		[]byte{10, 0, 0, 7}, make([]byte, 6), gwIP)
	answered := func() bool {
		if _, err := unix.Write(hostFd, arpForG); err != nil {
			t.Fatal(err)
		}
		return tryFrame(hostFd, func(f []byte) bool { return len(f) >= 42 && f[12] == 8 && f[13] == 6 && f[21] == 2 }, time.Second) != nil
	}
	if !answered() {
		t.Fatal("no ARP answer with the switch stopped: the program did not stay on the port")
	}

	// A new instance adopts it and restores the P4Runtime state: same cookie, same entries.
	sw2 := startSwitch(t, ns, bin, addr, dev, pinRoot, stateRoot)
	cc2 := dial(t, ns, addr)
	client2 := p4v1.NewP4RuntimeClient(cc2)
	got, err := client2.GetForwardingPipelineConfig(ctx, &p4v1.GetForwardingPipelineConfigRequest{DeviceId: dev,
		ResponseType: p4v1.GetForwardingPipelineConfigRequest_COOKIE_ONLY}, grpc.WaitForReady(true))
	if err != nil || got.GetConfig().GetCookie().GetCookie() != 42 {
		t.Fatalf("pipeline after the restart: %v %v\n%s", got, err, sw2.logs.String())
	}
	roles := readAll(t, ctx, client2, dev, &p4v1.TableEntry{TableId: ids[c.TablePortRoles]})
	if len(roles) != 2 {
		t.Fatalf("port_roles after the restart: %d entries, want 2", len(roles))
	}
	for _, want := range []string{"adopted the running data plane", "P4Runtime state restored"} {
		if !strings.Contains(sw2.logs.String(), want) {
			t.Errorf("log of the second instance lacks %q:\n%s", want, sw2.logs.String())
		}
	}
	if !answered() {
		t.Fatal("no ARP answer after the restart")
	}
	cc2.Close()

	// A crash (SIGKILL) leaves it running too, and --teardown takes it down.
	sw2.stop(t, syscall.SIGKILL)
	if !answered() {
		t.Fatal("no ARP answer after a crash of the switch")
	}
	if out, err := exec.Command(bin, "--teardown", "--device-id", fmt.Sprint(dev), "--pin-dir", pinRoot, "--state-dir", stateRoot).CombinedOutput(); err != nil {
		t.Fatalf("--teardown: %v: %s", err, out)
	}
	if _, err := os.Stat(filepath.Join(pinRoot, fmt.Sprint(dev))); !os.IsNotExist(err) {
		t.Errorf("pin directory after --teardown: %v", err)
	}
	if answered() {
		t.Error("ARP still answered after --teardown: the program is still on the port")
	}
}

// runningSwitch is one supergw-switch process of the end-to-end test.
type runningSwitch struct {
	cmd    *exec.Cmd
	logs   *bytes.Buffer
	exited chan error
}

func startSwitch(t *testing.T, ns, bin, addr string, dev uint64, pinRoot, stateRoot string) *runningSwitch {
	t.Helper()
	sw := &runningSwitch{logs: &bytes.Buffer{}, exited: make(chan error, 1)}
	sw.cmd = exec.Command("nsenter", "--net=/run/netns/"+ns, bin,
		"-i", "1@sgw-rt-p1", "-i", "2@sgw-rt-p2", "--log-level", "info", "--no-p4", "--pin-dir", pinRoot, "--state-dir", stateRoot,
		"--", "--device-id", fmt.Sprint(dev), "--grpc-server-addr", addr, "--cpu-port", "255")
	sw.cmd.Stdout, sw.cmd.Stderr = sw.logs, sw.logs
	if err := sw.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { sw.exited <- sw.cmd.Wait() }()
	t.Cleanup(func() {
		_ = sw.cmd.Process.Signal(syscall.SIGKILL)
		<-sw.exited
	})
	return sw
}

// stop signals the switch and waits for it; after SIGTERM it must exit 0.
func (sw *runningSwitch) stop(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := sw.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-sw.exited:
		sw.exited <- err
		if sig == syscall.SIGTERM && err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, sw.logs.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("switch did not stop on %v", sig)
	}
}

func dial(t *testing.T, ns, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			var conn net.Conn
			err := inNetns(ns, func() error {
				var err error
				conn, err = (&net.Dialer{}).DialContext(ctx, "tcp", a)
				return err
			})
			return conn, err
		}))
	if err != nil {
		t.Fatal(err)
	}
	return cc
}

func readAll(t *testing.T, ctx context.Context, client p4v1.P4RuntimeClient, dev uint64, te *p4v1.TableEntry) []*p4v1.Entity {
	t.Helper()
	rc, err := client.Read(ctx, &p4v1.ReadRequest{DeviceId: dev, Entities: []*p4v1.Entity{{Entity: &p4v1.Entity_TableEntry{TableEntry: te}}}})
	if err != nil {
		t.Fatal(err)
	}
	var out []*p4v1.Entity
	for {
		resp, err := rc.Recv()
		if err != nil {
			return out
		}
		out = append(out, resp.GetEntities()...)
	}
}

// tryFrame returns the first frame on fd that satisfies match within d, or nil.
func tryFrame(fd int, match func([]byte) bool, d time.Duration) []byte {
	buf := make([]byte, 2048)
	for deadline := time.Now().Add(d); time.Now().Before(deadline); {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err == nil && match(buf[:n]) {
			return append([]byte(nil), buf[:n]...)
		}
	}
	return nil
}

// p4object lists the ids of a P4Info object's fields, params or metadata, in
// declaration order and by name.
type p4object struct {
	fields []uint32
	names  map[string]uint32
}

func idsByName(info *p4configv1.P4Info) (map[string]uint32, map[string]*p4object) {
	ids, objs := map[string]uint32{}, map[string]*p4object{}
	add := func(name string, id uint32) *p4object {
		ids[name] = id
		objs[name] = &p4object{names: map[string]uint32{}}
		return objs[name]
	}
	for _, t := range info.GetTables() {
		o := add(t.GetPreamble().GetName(), t.GetPreamble().GetId())
		for _, f := range t.GetMatchFields() {
			o.fields, o.names[f.GetName()] = append(o.fields, f.GetId()), f.GetId()
		}
	}
	for _, a := range info.GetActions() {
		o := add(a.GetPreamble().GetName(), a.GetPreamble().GetId())
		for _, p := range a.GetParams() {
			o.fields, o.names[p.GetName()] = append(o.fields, p.GetId()), p.GetId()
		}
	}
	for _, m := range info.GetControllerPacketMetadata() {
		o := add(m.GetPreamble().GetName(), m.GetPreamble().GetId())
		for _, md := range m.GetMetadata() {
			o.fields, o.names[md.GetName()] = append(o.fields, md.GetId()), md.GetId()
		}
	}
	for _, d := range info.GetDigests() {
		add(d.GetPreamble().GetName(), d.GetPreamble().GetId())
	}
	for _, ctr := range info.GetCounters() {
		add(ctr.GetPreamble().GetName(), ctr.GetPreamble().GetId())
	}
	return ids, objs
}
