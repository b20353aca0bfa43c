package sim

import (
	"bytes"
	"encoding/json"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// memLink records what the hosts send; nothing is received (tests call Handle directly).
type memLink struct {
	mu   sync.Mutex
	sent [][]byte
	at   []time.Time
}

func (l *memLink) Send(frames [][]byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	for _, f := range frames {
		l.sent = append(l.sent, bytes.Clone(f))
		l.at = append(l.at, now)
	}
	return len(frames), nil
}

func (l *memLink) Recv(bufs [][]byte, lens []int) (int, error) {
	time.Sleep(10 * time.Millisecond)
	return 0, nil
}
func (l *memLink) Close() error { return nil }

func (l *memLink) take() [][]byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.sent
	l.sent, l.at = nil, nil
	return out
}

var (
	gwIP   = netip.MustParseAddr("192.168.203.1")
	vmac   = net.HardwareAddr{0x02, 0x88, 0x88, 0x88, 0x00, 0x07}
	peer   = net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x01, 0x01}
	remote = netip.MustParseAddr("192.168.204.24")
)

func newSim(t testing.TB, count int) (*Sim, *memLink) {
	t.Helper()
	l := &memLink{}
	s, err := New(Config{GatewayIP: gwIP, FirstIP: netip.MustParseAddr("192.168.203.24"),
		FirstMAC: net.HardwareAddr{0, 0, 3, 0, 0, 0x18}, Count: count, PrefixLen: 24}, l)
	if err != nil {
		t.Fatal(err)
	}
	return s, l
}

func decode(t *testing.T, frame []byte) gopacket.Packet {
	t.Helper()
	p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	if el := p.ErrorLayer(); el != nil {
		t.Fatalf("frame does not decode: %v", el.Error())
	}
	return p
}

func arpReply(t *testing.T, to *Host, from net.HardwareAddr, fromIP netip.Addr) []byte {
	f, err := ARPFrame(layers.ARPReply, from, fromIP, to.MAC, to.IP)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func resolveAll(t *testing.T, s *Sim) {
	p := NewParser()
	for _, h := range s.Hosts() {
		s.Handle(p, arpReply(t, h, vmac, gwIP), 1)
	}
}

func TestEveryHostARPsForTheGatewayAsALinuxHostDoes(t *testing.T) {
	s, l := newSim(t, 224)
	if n, err := s.Resolve(true); err != nil || n != 224 {
		t.Fatalf("Resolve = %d, %v", n, err)
	}
	frames := l.take()
	if len(frames) != 224 {
		t.Fatalf("%d ARP requests, want 224", len(frames))
	}
	for k, f := range frames {
		p := decode(t, f)
		eth := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
		arp := p.Layer(layers.LayerTypeARP).(*layers.ARP)
		h := s.Hosts()[k]
		if !bytes.Equal(eth.DstMAC, layers.EthernetBroadcast) || !bytes.Equal(eth.SrcMAC, h.MAC) || len(f) != 60 {
			t.Fatalf("host %d: eth %s -> %s, %d bytes", k, eth.SrcMAC, eth.DstMAC, len(f))
		}
		if arp.Operation != layers.ARPRequest || !bytes.Equal(arp.SourceHwAddress, h.MAC) ||
			netip.AddrFrom4([4]byte(arp.SourceProtAddress)) != h.IP || netip.AddrFrom4([4]byte(arp.DstProtAddress)) != gwIP {
			t.Fatalf("host %d: bad ARP request %+v", k, arp)
		}
	}
	if h := s.Hosts()[223]; h.IP.String() != "192.168.203.247" || h.MAC.String() != "00:00:03:00:00:f7" {
		t.Fatalf("host 223 is %s %s, want the paper's last host", h.IP, h.MAC)
	}
}

// The clustering paper's §4.3 hosts: 00:00:03:00:18:00, 00:00:03:00:19:00, ... 256 apart.
func TestMACStepGivesThePapersSection43Hosts(t *testing.T) {
	l := &memLink{}
	s, err := New(Config{GatewayIP: gwIP, FirstIP: netip.MustParseAddr("192.168.203.24"),
		FirstMAC: net.HardwareAddr{0, 0, 3, 0, 0x18, 0}, MACStep: 256, Count: 224, PrefixLen: 24}, l)
	if err != nil {
		t.Fatal(err)
	}
	hosts := s.Hosts()
	if hosts[1].MAC.String() != "00:00:03:00:19:00" || hosts[223].MAC.String() != "00:00:03:00:f7:00" {
		t.Fatalf("hosts 1 and 223 are %s and %s", hosts[1].MAC, hosts[223].MAC)
	}
	p := NewParser()
	s.Handle(p, arpReply(t, hosts[5], vmac, gwIP), 1)
	if hosts[5].GatewayMAC() == nil || hosts[4].GatewayMAC() != nil || hosts[6].GatewayMAC() != nil {
		t.Fatal("the ARP reply to host 5 did not resolve exactly host 5")
	}
	// A MAC between two hosts' is nobody's.
	for _, m := range []net.HardwareAddr{{0, 0, 3, 0, 0x18, 1}, {0, 0, 3, 0, 0x17, 0}, {0, 0, 3, 0, 0xf8, 0}} {
		if h := s.hostByMAC(m); h != nil {
			t.Errorf("hostByMAC(%s) = host %d", m, h.Index)
		}
	}
}

func TestARPReplyFromTheGatewayResolvesOnlyItsTarget(t *testing.T) {
	s, _ := newSim(t, 4)
	p := NewParser()
	h := s.Hosts()[1]
	s.Handle(p, arpReply(t, h, peer, netip.MustParseAddr("192.168.203.99")), 1) // not IP_G
	if h.GatewayMAC() != nil {
		t.Fatal("a reply from another IP resolved IP_G")
	}
	s.Handle(p, arpReply(t, h, vmac, gwIP), 1)
	if got := h.GatewayMAC(); !bytes.Equal(got, vmac) {
		t.Fatalf("gateway MAC %v, want %v", got, vmac)
	}
	if s.resolvedV4() != 1 || s.Hosts()[0].GatewayMAC() != nil {
		t.Fatalf("resolved %d hosts, want only host 1", s.resolvedV4())
	}
	if st := s.Snapshot(true, false); st.Hosts[1].RxPackets != 2 || st.Totals.RxPackets != 2 {
		t.Fatalf("rx counters %+v", st.Hosts[1])
	}
}

func TestAnswersARPForItsOwnIPOnly(t *testing.T) {
	s, l := newSim(t, 4)
	p := NewParser()
	target := s.Hosts()[2]
	req, _ := ARPFrame(layers.ARPRequest, peer, netip.MustParseAddr("192.168.203.252"), nil, target.IP)
	s.Handle(p, req, 1)
	frames := l.take()
	if len(frames) != 1 {
		t.Fatalf("%d answers, want 1", len(frames))
	}
	pk := decode(t, frames[0])
	eth := pk.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	arp := pk.Layer(layers.LayerTypeARP).(*layers.ARP)
	if arp.Operation != layers.ARPReply || !bytes.Equal(eth.SrcMAC, target.MAC) || !bytes.Equal(eth.DstMAC, peer) ||
		!bytes.Equal(arp.SourceHwAddress, target.MAC) || netip.AddrFrom4([4]byte(arp.SourceProtAddress)) != target.IP ||
		!bytes.Equal(arp.DstHwAddress, peer) {
		t.Fatalf("bad ARP reply %+v / %+v", eth, arp)
	}
	other, _ := ARPFrame(layers.ARPRequest, peer, netip.MustParseAddr("192.168.203.252"), nil, netip.MustParseAddr("192.168.203.5"))
	s.Handle(p, other, 1)
	if len(l.take()) != 0 || s.Snapshot(false, false).Totals.Ignored != 1 {
		t.Fatal("answered (or did not count) an ARP request for an address that is not ours")
	}
	st := s.Snapshot(true, false)
	if st.Hosts[2].TxPackets != 1 || st.Totals.ARPReplies != 1 || st.Hosts[2].RxPackets != 1 {
		t.Fatalf("counters %+v %+v", st.Hosts[2], st.Totals)
	}
}

func TestEchoRequestGetsAReply(t *testing.T) {
	s, l := newSim(t, 2)
	h := s.Hosts()[0]
	req, err := serialize(&layers.Ethernet{SrcMAC: peer, DstMAC: h.MAC, EthernetType: layers.EthernetTypeIPv4},
		&layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolICMPv4, SrcIP: remote.AsSlice(), DstIP: h.IP.AsSlice()},
		&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(layers.ICMPv4TypeEchoRequest, 0), Id: 7, Seq: 3},
		gopacket.Payload("ping"))
	if err != nil {
		t.Fatal(err)
	}
	s.Handle(NewParser(), req, 1)
	frames := l.take()
	if len(frames) != 1 {
		t.Fatalf("%d replies", len(frames))
	}
	pk := decode(t, frames[0])
	ip := pk.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	icmp := pk.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
	if icmp.TypeCode.Type() != layers.ICMPv4TypeEchoReply || icmp.Id != 7 || icmp.Seq != 3 || string(icmp.Payload[:4]) != "ping" ||
		!ip.SrcIP.Equal(h.IP.AsSlice()) || !ip.DstIP.Equal(remote.AsSlice()) || checksum(ip.Contents) != 0 {
		t.Fatalf("bad reply %v", pk)
	}
}

func TestTemplateFramesHaveTheSizeAndValidChecksums(t *testing.T) {
	src, dst := netip.MustParseAddr("192.168.203.24"), remote
	for _, size := range []int{64, 1408, 1518} {
		tm, err := NewTemplate(size, peer, vmac, src, dst, 10000, 5001, 3, 9)
		if err != nil {
			t.Fatal(err)
		}
		frame := tm.Stamp(nil, 0xdeadbeef, 0x0102030405060708)
		if len(frame) != size-FCSBytes {
			t.Fatalf("frame_bytes %d: %d bytes on the wire, want %d", size, len(frame), size-FCSBytes)
		}
		pk := decode(t, frame)
		ip := pk.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		udp := pk.Layer(layers.LayerTypeUDP).(*layers.UDP)
		// The same datagram serialised by gopacket from scratch has the checksum Stamp patched in.
		want := &layers.UDP{SrcPort: udp.SrcPort, DstPort: udp.DstPort}
		_ = want.SetNetworkLayerForChecksum(ip)
		ref, err := serialize(&layers.Ethernet{SrcMAC: peer, DstMAC: vmac, EthernetType: layers.EthernetTypeIPv4},
			&layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: ip.SrcIP, DstIP: ip.DstIP,
				Flags: layers.IPv4DontFragment}, want, gopacket.Payload(udp.Payload))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ref, frame) {
			t.Fatalf("frame_bytes %d: stamped frame differs from gopacket's (checksum %x)", size, udp.Checksum)
		}
		probe, ok := ParseProbe(udp.Payload)
		if !ok || probe != (Probe{Run: 3, Flow: 9, Seq: 0xdeadbeef, TS: 0x0102030405060708}) {
			t.Fatalf("probe %+v %v", probe, ok)
		}
	}
	for _, bad := range []int{63, 1519} {
		if _, err := NewTemplate(bad, peer, vmac, src, dst, 1, 2, 1, 1); err == nil {
			t.Fatalf("frame_bytes %d accepted", bad)
		}
	}
}

func TestReceiverCountsLossReorderingDuplicatesAndGaps(t *testing.T) {
	r := newReceiver()
	src, dst := remote, netip.MustParseAddr("192.168.203.24")
	now := uint64(1_000_000_000)
	for _, seq := range []uint32{0, 1, 3, 2, 2, 6, 7} {
		now += 1_000_000
		if seq == 6 {
			now += 50_000_000 // a 51 ms gap before seq 6
		}
		r.record(src, dst, Probe{Run: 1, Flow: 4, Seq: seq, TS: now - 20_000}, now)
	}
	st := r.snapshot()
	if len(st) != 1 {
		t.Fatalf("%d flows", len(st))
	}
	f := st[0]
	if f.Received != 7 || f.Lost != 2 || f.Reordered != 1 || f.Duplicates != 1 || f.LastSeq != 7 {
		t.Fatalf("flow %+v: want received 7, lost 2 (4, 5), reordered 1, duplicates 1", f)
	}
	if f.MaxGapMs < 50.9 || f.MaxGapMs > 51.1 || f.Latency.Min != 20 || f.Latency.Max != 20 {
		t.Fatalf("gap %.3f ms, latency %+v", f.MaxGapMs, f.Latency)
	}
	if f.FirstArrivalNs != 1_001_000_000 || f.LastArrivalNs != now {
		t.Fatalf("arrivals %d..%d, want 1001000000..%d", f.FirstArrivalNs, f.LastArrivalNs, now)
	}
}

// A flow that stops arriving for good leaves no gap between arrivals: only its last arrival,
// set against the sender's last send (bench/gaps.py), shows it.
func TestAFlowThatStopsForGoodShowsInItsLastArrivalNotInItsGap(t *testing.T) {
	r := newReceiver()
	src, dst := remote, netip.MustParseAddr("192.168.203.24")
	for seq := uint32(0); seq < 100; seq++ {
		now := 1_000_000_000 + uint64(seq)*10_000_000 // every 10 ms; the sender goes on for 4 s more
		r.record(src, dst, Probe{Run: 1, Flow: 0, Seq: seq, TS: now - 20_000}, now)
	}
	f := r.snapshot()[0]
	if f.MaxGapMs > 10.1 || f.Lost != 0 || f.LastArrivalNs != 1_990_000_000 {
		t.Fatalf("flow %+v: want a 10 ms gap, nothing lost, last arrival at 1.99 s", f)
	}
}

func udpFrame(t *testing.T, dstMAC net.HardwareAddr, dst netip.Addr) []byte {
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: remote.AsSlice(), DstIP: dst.AsSlice()}
	udp := &layers.UDP{SrcPort: 1, DstPort: 2}
	_ = udp.SetNetworkLayerForChecksum(ip)
	f, err := serialize(&layers.Ethernet{SrcMAC: peer, DstMAC: dstMAC, EthernetType: layers.EthernetTypeIPv4}, ip, udp)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestMalformedAndForeignFramesAreIgnoredAndCounted(t *testing.T) {
	s, l := newSim(t, 2)
	h := s.Hosts()[0]
	p := NewParser()
	good, _ := ARPFrame(layers.ARPRequest, peer, netip.MustParseAddr("192.168.203.252"), nil, h.IP)
	badIP := udpFrame(t, h.MAC, h.IP)
	badIP[14+10] ^= 0xff // IPv4 header checksum
	badARP := bytes.Clone(good)
	badARP[14+4] = 8 // hardware address size 8
	malformed := [][]byte{{}, {1, 2, 3}, good[:20], badIP, badARP, good[:14+10]}
	for _, f := range malformed {
		s.Handle(p, f, 1)
	}
	ipv6, _ := serialize(&layers.Ethernet{SrcMAC: peer, DstMAC: h.MAC, EthernetType: layers.EthernetTypeIPv6},
		gopacket.Payload(make([]byte, 40)))
	otherMAC, _ := ARPFrame(layers.ARPReply, vmac, gwIP, peer, h.IP) // unicast to another NIC
	notOurs := udpFrame(t, h.MAC, s.Hosts()[1].IP)
	for _, f := range [][]byte{ipv6, otherMAC, notOurs} {
		s.Handle(p, f, 1)
	}
	st := s.Snapshot(true, false)
	if st.Totals.Malformed != uint64(len(malformed)) || st.Totals.Ignored != 3 {
		t.Fatalf("malformed %d (want %d), ignored %d (want 3)", st.Totals.Malformed, len(malformed), st.Totals.Ignored)
	}
	if len(l.take()) != 0 || s.resolvedV4() != 0 || st.Totals.RxPackets != 0 {
		t.Fatalf("a bad frame changed state: rx %d, resolved %d", st.Totals.RxPackets, s.resolvedV4())
	}
}

// deliver hands the generator's frames to the receiving sim as the switches and gateways would:
// the destination MAC becomes the receiving host's; drop says which frames are lost on the way.
func deliver(t *testing.T, frames [][]byte, rx *Sim, drop func(i int) bool) int {
	p := NewParser()
	n := 0
	for i, f := range frames {
		if drop(i) {
			continue
		}
		pk := decode(t, f)
		ip := pk.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		h := rx.hostByIP(netip.AddrFrom4([4]byte(ip.DstIP.To4())))
		if h == nil {
			t.Fatalf("frame to %s: no such host", ip.DstIP)
		}
		copy(f[0:6], h.MAC)
		rx.Handle(p, f, rx.cfg.Clock())
		n++
	}
	return n
}

func TestGeneratorPacesAndTheReceiverCountsLossPerFlow(t *testing.T) {
	a, la := newSim(t, 8)
	lb := &memLink{}
	b, err := New(Config{GatewayIP: netip.MustParseAddr("192.168.204.1"), FirstIP: remote,
		FirstMAC: net.HardwareAddr{0, 0, 4, 0, 0, 0x18}, Count: 8, PrefixLen: 24}, lb)
	if err != nil {
		t.Fatal(err)
	}
	var dsts []string
	for _, h := range b.Hosts() {
		dsts = append(dsts, h.IP.String())
	}
	if _, err := a.Start(RunSpec{RatePPS: 2000, FrameBytes: 64, DurationS: 0.5, Destinations: dsts}); err == nil ||
		!strings.Contains(err.Error(), "has not resolved IP_G") {
		t.Fatalf("a run from unresolved hosts was not refused: %v", err)
	}
	resolveAll(t, a)
	la.take()
	start := time.Now()
	run, err := a.Start(RunSpec{RatePPS: 2000, FrameBytes: 1408, DurationS: 0.5, Destinations: dsts})
	if err != nil {
		t.Fatal(err)
	}
	if run.Flows != 8 {
		t.Fatalf("%d flows in pairs mode, want 8", run.Flows)
	}
	if _, err := a.Start(RunSpec{RatePPS: 1, FrameBytes: 64, DurationS: 1, Destinations: dsts}); err == nil {
		t.Fatal("a second run started during the first")
	}
	for a.CurrentRun().State == "running" {
		time.Sleep(5 * time.Millisecond)
	}
	elapsed := time.Since(start)
	la.mu.Lock()
	frames := la.sent
	la.mu.Unlock()
	// A loaded machine may deschedule the sender (a slip skips ahead): never more than the
	// schedule, and most of it.
	if len(frames) < 850 || len(frames) > 1002 || elapsed > 2*time.Second {
		t.Fatalf("sent %d frames in %v at 2000 pps for 0.5 s (want ~1000)", len(frames), elapsed)
	}
	if span := la.at[len(la.at)-1].Sub(la.at[0]); span < 400*time.Millisecond {
		t.Fatalf("the run's frames went out within %v: a burst, not paced over 0.5 s", span)
	}
	for _, f := range frames {
		if len(f) != 1404 || !bytes.Equal(f[0:6], vmac) {
			t.Fatalf("frame of %d bytes to %x", len(f), f[0:6])
		}
	}
	// every flow's first and last send stamp are those of its first and last frame
	stamps := map[uint16][2]uint64{}
	for _, f := range frames {
		probe, ok := ParseProbe(decode(t, f).Layer(layers.LayerTypeUDP).(*layers.UDP).Payload)
		if !ok {
			t.Fatal("a generator frame without a probe payload")
		}
		st, seen := stamps[probe.Flow]
		if !seen {
			st[0] = probe.TS
		}
		st[1] = probe.TS
		stamps[probe.Flow] = st
	}
	for _, f := range a.TxFlows() {
		if st := stamps[f.Flow]; f.FirstSentNs != st[0] || f.LastSentNs != st[1] || st[1]-st[0] < 400_000_000 {
			t.Fatalf("flow %d: sent stamps %d..%d, its frames %d..%d (want the same, >= 400 ms apart)",
				f.Flow, f.FirstSentNs, f.LastSentNs, st[0], st[1])
		}
	}
	got := deliver(t, frames, b, func(i int) bool { return i%100 == 7 })
	sa, sb := a.Snapshot(true, true), b.Snapshot(true, true)
	var sent, received, lost uint64
	for _, f := range sa.FlowsTx {
		sent += f.Sent
	}
	for _, f := range sb.FlowsRx {
		received += f.Received
		lost += f.Lost
	}
	dropped := uint64(len(frames) - got)
	if sent != uint64(len(frames)) || received != uint64(got) || sent-received != dropped {
		t.Fatalf("sent %d received %d, dropped %d", sent, received, dropped)
	}
	// Holes are seen when a later frame of the flow arrives: the tail may hide one per flow.
	if lost > dropped || lost+8 < dropped || sb.Totals.Lost != lost {
		t.Fatalf("receiver counted %d lost of %d dropped", lost, dropped)
	}
	var hostTx uint64
	for _, h := range sa.Hosts {
		hostTx += h.TxPackets
		if h.TxPackets < 100 { // round robin over the 8 flows
			t.Fatalf("host %d sent only %d", h.Index, h.TxPackets)
		}
	}
	if hostTx != sa.Totals.TxPackets || sa.Totals.TestTx != sent {
		t.Fatalf("per-host tx %d != total %d (test %d)", hostTx, sa.Totals.TxPackets, sa.Totals.TestTx)
	}
}

func TestStopEndsAnOpenEndedRun(t *testing.T) {
	s, _ := newSim(t, 2)
	resolveAll(t, s)
	if _, err := s.Start(RunSpec{RatePPS: 1000, FrameBytes: 64, Destinations: []string{remote.String()}, Mode: "mesh"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	run := s.Stop()
	if run.State != "done" || run.Sent < 50 || run.Flows != 2 {
		t.Fatalf("run %+v", run)
	}
	if err := s.Reset(); err != nil {
		t.Fatal(err)
	}
	if st := s.Snapshot(false, false); st.Totals.TxPackets != 0 || st.Totals.TestTx != 0 {
		t.Fatalf("reset left %+v", st.Totals)
	}
}

func TestControlAPIRefusesBadRequestsWithAReason(t *testing.T) {
	s, _ := newSim(t, 2)
	srv := &Server{sim: s, Quit: make(chan struct{})}
	cases := map[string]string{
		`not json`:                  "not a JSON object",
		`{}`:                        `no "cmd"`,
		`{"cmd": "fly"}`:            "unknown cmd",
		`{"cmd": "status", "x": 1}`: "unknown field",
		`{"cmd": "start", "rate_pps": 100, "frame_bytes": 64, "duration_s": 1, "destinations": ["192.168.204.24"]}`: "has not resolved",
		`{"cmd": "stats", "hosts": 3}`: "hosts must be true or false",
	}
	for req, want := range cases {
		ans := srv.Handle([]byte(req))
		if ans["ok"] != false || !strings.Contains(ans["error"].(string), want) {
			t.Errorf("%s: answer %v, want an error with %q", req, ans, want)
		}
	}
	resolveAll(t, s)
	bad := map[string]string{
		`{"cmd": "start", "rate_pps": 0, "frame_bytes": 64, "duration_s": 1, "destinations": ["192.168.204.24"]}`:                "rate_pps",
		`{"cmd": "start", "rate_pps": 10, "frame_bytes": 9000, "duration_s": 1, "destinations": ["192.168.204.24"]}`:             "frame_bytes",
		`{"cmd": "start", "rate_pps": 10, "frame_bytes": 64, "duration_s": 1, "destinations": []}`:                               "destinations",
		`{"cmd": "start", "rate_pps": 10, "frame_bytes": 64, "duration_s": 1, "destinations": ["nope"]}`:                         "not an IPv4",
		`{"cmd": "start", "rate_pps": 10, "frame_bytes": 64, "duration_s": 1, "destinations": ["192.168.203.30"]}`:               "on this LAN",
		`{"cmd": "start", "rate_pps": 10, "frame_bytes": 64, "duration_s": 1, "destinations": ["192.168.204.24"], "mode": "x"}`:  "mode",
		`{"cmd": "start", "rate_pps": 10, "frame_bytes": 64, "duration_s": 1, "destinations": ["192.168.204.24"], "hosts": [5]}`: "outside",
	}
	for req, want := range bad {
		ans := srv.Handle([]byte(req))
		if ans["ok"] != false || !strings.Contains(ans["error"].(string), want) {
			t.Errorf("%s: answer %v, want an error with %q", req, ans, want)
		}
	}
	if s.CurrentRun().State != "idle" {
		t.Fatal("a refused start left a run behind")
	}
	ans := srv.Handle([]byte(`{"cmd": "stats", "hosts": true, "flows": true}`))
	raw, _ := json.Marshal(ans)
	for _, key := range []string{`"totals"`, `"hosts"`, `"flows_tx"`, `"flows_rx"`, `"gateway_mac":"02:88:88:88:00:07"`, `"max_gap_ms"`} {
		if !strings.Contains(string(raw), key) {
			t.Fatalf("stats answer lacks %s: %s", key, raw)
		}
	}
}

func TestPrometheusTextHasEveryHost(t *testing.T) {
	s, _ := newSim(t, 3)
	resolveAll(t, s)
	text := s.Prometheus()
	for _, want := range []string{
		"# TYPE supergw_hostsim_host_rx_packets_total counter",
		`supergw_hostsim_host_rx_packets_total{host="192.168.203.26",mac="00:00:03:00:00:1a"} 1`,
		`supergw_hostsim_host_resolved{host="192.168.203.24",mac="00:00:03:00:00:18"} 1`,
		"# TYPE supergw_hostsim_max_gap_seconds gauge",
	} {
		if !strings.Contains(text, want) {
			t.Fatalf("metrics lack %q:\n%s", want, text)
		}
	}
}

func TestATooLongSocketPathIsRefusedWithTheReason(t *testing.T) {
	s, _ := newSim(t, 1)
	_, err := Listen(s, "/tmp/"+strings.Repeat("x", 120))
	if err == nil || !strings.Contains(err.Error(), "longer than a unix socket address holds") {
		t.Fatalf("err = %v", err)
	}
}

func TestConfigIsChecked(t *testing.T) {
	base := Config{GatewayIP: gwIP, FirstIP: netip.MustParseAddr("192.168.203.24"), FirstMAC: net.HardwareAddr{0, 0, 3, 0, 0, 0x18},
		Count: 224, PrefixLen: 24}
	for name, mod := range map[string]func(c *Config){
		"too many":        func(c *Config) { c.Count = 240 },
		"zero":            func(c *Config) { c.Count = 0 },
		"multicast MAC":   func(c *Config) { c.FirstMAC = net.HardwareAddr{1, 0, 3, 0, 0, 0x18} },
		"gateway outside": func(c *Config) { c.GatewayIP = netip.MustParseAddr("10.0.0.1") },
		"covers IP_G":     func(c *Config) { c.FirstIP = netip.MustParseAddr("192.168.203.1"); c.Count = 2 },
		"MACs overflow":   func(c *Config) { c.MACStep = 1 << 41 },
		"step too wide":   func(c *Config) { c.MACStep = 1 << 48 },
	} {
		c := base
		mod(&c)
		if _, err := New(c, &memLink{}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := New(base, &memLink{}); err != nil {
		t.Fatal(err)
	}
}

// Each host's first frame is stamped once, on the sim's clock: where a switch's learning of it starts.
func TestFirstFrameIsStampedOncePerHost(t *testing.T) {
	l := &memLink{}
	now := uint64(1000)
	s, err := New(Config{GatewayIP: gwIP, FirstIP: netip.MustParseAddr("192.168.203.24"),
		FirstMAC: net.HardwareAddr{0, 0, 3, 0, 0, 0x18}, Count: 3, PrefixLen: 24, Clock: func() uint64 { return now }}, l)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Snapshot(true, false).Hosts[0].FirstTxNs; got != 0 {
		t.Fatalf("first_tx_ns %d before any frame, want 0", got)
	}
	resolveAll(t, s) // hosts 0..2 know the gateway; only host 1 asks again below
	if _, err := s.Resolve(true); err != nil {
		t.Fatal(err)
	}
	now = 5000
	if _, err := s.Resolve(true); err != nil {
		t.Fatal(err)
	}
	for _, h := range s.Snapshot(true, false).Hosts {
		if h.FirstTxNs != 1000 {
			t.Errorf("host %d: first_tx_ns %d, want 1000 (its first frame, not its last)", h.Index, h.FirstTxNs)
		}
	}
}

// A whole site on one port: as many hosts as the switch's host tables hold, and no more.
func TestASiteOfMaxHosts(t *testing.T) {
	c := Config{GatewayIP: netip.MustParseAddr("10.64.0.1"), FirstIP: netip.MustParseAddr("10.64.0.10"),
		FirstMAC: net.HardwareAddr{2, 0x64, 0, 0, 0, 0}, Count: MaxHosts, PrefixLen: 15}
	s, err := New(c, &memLink{})
	if err != nil || len(s.Hosts()) != 65536 {
		t.Fatalf("New(%d hosts): %v", c.Count, err)
	}
	if h := s.hostByIP(netip.MustParseAddr("10.65.0.9")); h == nil || h.Index != 65535 {
		t.Fatalf("the last host is not found by its IP: %v", h)
	}
	c.Count++
	if _, err := New(c, &memLink{}); err == nil || !strings.Contains(err.Error(), "outside 1-65536") {
		t.Fatalf("%d hosts accepted: %v", c.Count, err)
	}
}
