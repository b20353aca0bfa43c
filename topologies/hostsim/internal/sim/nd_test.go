package sim

// The dual-stack hosts' IPv6: Neighbor Discovery for the gateway, answers to Neighbor
// Solicitations, ICMPv6 echo and IPv6 test flows. The frames the hosts send are checked with
// golang.org/x/net (its ipv6 header parser, its icmp message parser, and its own checksum over
// the IPv6 pseudo-header), and the frames the switch would send are built with it: an
// encoding mistake on one side does not hide behind the same mistake on the other.

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv6"
)

var (
	gwLL     = netip.MustParseAddr("fe80::1")
	remote6  = netip.MustParseAddr("fd00:61::64")
	firstIP6 = netip.MustParseAddr("fd00:60::64")
)

func newSim6(t testing.TB, count int) (*Sim, *memLink) {
	t.Helper()
	l := &memLink{}
	s, err := New(Config{GatewayIP: gwIP, FirstIP: netip.MustParseAddr("192.168.203.24"),
		FirstMAC: net.HardwareAddr{0, 0, 3, 0, 0, 0x18}, Count: count, PrefixLen: 24,
		GatewayIP6: gwLL, FirstIP6: firstIP6}, l)
	if err != nil {
		t.Fatal(err)
	}
	return s, l
}

func (s *Sim) resolvedV4() int {
	v4, _ := s.Resolved()
	return v4
}

// icmp6 is a frame's IPv6 header and ICMPv6 message as golang.org/x/net reads them, after
// checking the message's checksum against the one x/net computes over the pseudo-header.
func icmp6(t *testing.T, frame []byte) (net.HardwareAddr, net.HardwareAddr, *ipv6.Header, *icmp.Message, []byte) {
	t.Helper()
	if len(frame) < 14+ipv6.HeaderLen || binary.BigEndian.Uint16(frame[12:]) != 0x86dd {
		t.Fatalf("not an IPv6 frame: % x", frame)
	}
	hdr, err := ipv6.ParseHeader(frame[14:])
	if err != nil {
		t.Fatal(err)
	}
	if hdr.NextHeader != 58 || 14+ipv6.HeaderLen+hdr.PayloadLen > len(frame) {
		t.Fatalf("IPv6 header %+v: not ICMPv6, or longer than the frame", hdr)
	}
	raw := frame[14+ipv6.HeaderLen : 14+ipv6.HeaderLen+hdr.PayloadLen]
	msg, err := icmp.ParseMessage(58, raw)
	if err != nil {
		t.Fatal(err)
	}
	again, err := msg.Marshal(icmp.IPv6PseudoHeader(hdr.Src, hdr.Dst)) // x/net fills in the checksum
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, raw) {
		t.Fatalf("ICMPv6 checksum %04x, x/net computes %04x", raw[2:4], again[2:4])
	}
	return net.HardwareAddr(frame[6:12]), net.HardwareAddr(frame[0:6]), hdr, msg, raw
}

// ndBody is an NS or NA body: flags (NA) or reserved, target, one link-layer address option.
func ndBody(flags byte, target netip.Addr, optType byte, mac net.HardwareAddr) []byte {
	b := append([]byte{flags, 0, 0, 0}, target.AsSlice()...)
	if mac != nil {
		b = append(append(b, optType, 1), mac...)
	}
	return b
}

// x6Frame is an ICMPv6 frame built with x/net: its message and checksum, its IPv6 header's fields.
func x6Frame(t *testing.T, srcMAC, dstMAC net.HardwareAddr, src, dst netip.Addr, hopLimit int, typ ipv6.ICMPType,
	body icmp.MessageBody) []byte {
	t.Helper()
	msg, err := (&icmp.Message{Type: typ, Body: body}).Marshal(icmp.IPv6PseudoHeader(src.AsSlice(), dst.AsSlice()))
	if err != nil {
		t.Fatal(err)
	}
	ip := make([]byte, ipv6.HeaderLen)
	ip[0] = 6 << 4
	binary.BigEndian.PutUint16(ip[4:], uint16(len(msg)))
	ip[6], ip[7] = 58, byte(hopLimit)
	copy(ip[8:], src.AsSlice())
	copy(ip[24:], dst.AsSlice())
	f := append(append(append(append([]byte{}, dstMAC...), srcMAC...), 0x86, 0xdd), ip...)
	return append(f, msg...)
}

// switchNA is the Neighbor Advertisement the switch answers a host's solicitation for the
// gateway with (docs/pipeline-contract.md): from the target, R|S|O, the vmac as target link-layer address.
func switchNA(t *testing.T, h *Host, answer net.HardwareAddr) []byte {
	return x6Frame(t, answer, h.MAC, gwLL, h.IP6, 255, ipv6.ICMPTypeNeighborAdvertisement,
		&icmp.RawBody{Data: ndBody(NARouter|NASolicited|NAOverride, gwLL, 2, answer)})
}

func TestLinkLocalSolicitedNodeAndMulticastMAC(t *testing.T) {
	if got := LinkLocal(net.HardwareAddr{0, 0, 3, 0, 0, 0x18}); got != netip.MustParseAddr("fe80::200:3ff:fe00:18") {
		t.Errorf("LinkLocal = %s, want fe80::200:3ff:fe00:18 (modified EUI-64: universal/local bit flipped)", got)
	}
	if got := SolicitedNode(netip.MustParseAddr("fd00:60::1:2345:6789")); got != netip.MustParseAddr("ff02::1:ff45:6789") {
		t.Errorf("SolicitedNode = %s, want ff02::1:ff45:6789", got)
	}
	if got := MulticastMAC(netip.MustParseAddr("ff02::1:ff45:6789")).String(); got != "33:33:ff:45:67:89" {
		t.Errorf("MulticastMAC = %s", got)
	}
}

func TestDualStackHostsARPAndSolicitTheGateway(t *testing.T) {
	s, l := newSim6(t, 3)
	if n, err := s.Resolve(true); err != nil || n != 3 {
		t.Fatalf("Resolve = %d, %v", n, err)
	}
	frames := l.take()
	if len(frames) != 6 {
		t.Fatalf("%d frames, want an ARP request and a Neighbor Solicitation per host", len(frames))
	}
	for k, h := range s.Hosts() {
		if h.IP6.String() != []string{"fd00:60::64", "fd00:60::65", "fd00:60::66"}[k] {
			t.Fatalf("host %d has IPv6 %s", k, h.IP6)
		}
		src, dst, hdr, msg, raw := icmp6(t, frames[2*k+1])
		group := SolicitedNode(gwLL)
		if msg.Type != ipv6.ICMPTypeNeighborSolicitation || msg.Code != 0 || hdr.HopLimit != 255 ||
			!hdr.Src.Equal(h.IP6.AsSlice()) || !hdr.Dst.Equal(group.AsSlice()) || !bytes.Equal(src, h.MAC) ||
			dst.String() != "33:33:ff:00:00:01" {
			t.Fatalf("host %d: NS %s -> %s (%s -> %s), type %v code %d hop limit %d", k, hdr.Src, hdr.Dst, src, dst,
				msg.Type, msg.Code, hdr.HopLimit)
		}
		if want := ndBody(0, gwLL, 1, h.MAC); !bytes.Equal(raw[4:], want) {
			t.Fatalf("host %d: NS body % x, want target fe80::1 and the source link-layer option % x", k, raw[4:], want)
		}
	}
	if v4, v6 := s.Resolved(); v4 != 0 || v6 != 0 || s.Ready() {
		t.Fatal("resolved before any answer")
	}
}

func TestTheSwitchsNAResolvesTheGatewayToTheAnsweredVMAC(t *testing.T) {
	s, _ := newSim6(t, 3)
	resolveAll(t, s)
	p := NewParser()
	h := s.Hosts()[1]
	other := net.HardwareAddr{0x02, 0x5e, 0x60, 0, 0, 0x42}
	bad := switchNA(t, h, vmac)
	bad[len(bad)-1] ^= 1 // the option's last byte: the checksum no longer holds
	lowHop := x6Frame(t, vmac, h.MAC, gwLL, h.IP6, 64, ipv6.ICMPTypeNeighborAdvertisement,
		&icmp.RawBody{Data: ndBody(NARouter|NASolicited|NAOverride, gwLL, 2, vmac)})
	noOption := x6Frame(t, vmac, h.MAC, gwLL, h.IP6, 255, ipv6.ICMPTypeNeighborAdvertisement,
		&icmp.RawBody{Data: ndBody(NASolicited, gwLL, 0, nil)})
	otherTarget := x6Frame(t, vmac, h.MAC, netip.MustParseAddr("fe80::2"), h.IP6, 255, ipv6.ICMPTypeNeighborAdvertisement,
		&icmp.RawBody{Data: ndBody(NASolicited|NAOverride, netip.MustParseAddr("fe80::2"), 2, vmac)})
	for _, f := range [][]byte{bad, lowHop, noOption, otherTarget} {
		s.Handle(p, f, 1)
	}
	if h.GatewayMAC6() != nil {
		t.Fatalf("resolved by a bad or foreign NA: %s", h.GatewayMAC6())
	}
	// The Ethernet source differs from the option: the host takes the advertised address.
	na := switchNA(t, h, vmac)
	copy(na[6:12], other)
	s.Handle(p, na, 1)
	if got := h.GatewayMAC6(); !bytes.Equal(got, vmac) {
		t.Fatalf("gateway IPv6 MAC %v, want the advertised %v", got, vmac)
	}
	if _, v6 := s.Resolved(); v6 != 1 || s.Ready() {
		t.Fatalf("resolved6 %d, ready %v: only host 1 has its NA", v6, s.Ready())
	}
	for _, x := range s.Hosts() {
		s.Handle(p, switchNA(t, x, vmac), 1)
	}
	if !s.Ready() {
		t.Fatal("every host has both answers, not ready")
	}
	st := s.Snapshot(true, false)
	if st.Totals.Malformed != 1 || st.Hosts[1].GatewayMAC6 == nil || *st.Hosts[1].GatewayMAC6 != vmac.String() ||
		st.Hosts[1].IP6 != "fd00:60::65" || st.Hosts[1].LinkLocal != "fe80::200:3ff:fe00:19" {
		t.Fatalf("totals %+v, host 1 %+v", st.Totals, st.Hosts[1])
	}
}

func TestHostsAnswerNeighborSolicitationsForTheirAddresses(t *testing.T) {
	s, l := newSim6(t, 4)
	p := NewParser()
	h := s.Hosts()[2]
	gwMAC := net.HardwareAddr{0x02, 0x60, 0, 0, 1, 1}
	solicit := func(src netip.Addr, dst netip.Addr, target netip.Addr, sll net.HardwareAddr) []byte {
		ethDst := MulticastMAC(dst)
		if !dst.IsMulticast() {
			ethDst = h.MAC
		}
		return x6Frame(t, gwMAC, ethDst, src, dst, 255, ipv6.ICMPTypeNeighborSolicitation,
			&icmp.RawBody{Data: ndBody(0, target, 1, sll)})
	}
	for _, c := range []struct {
		what      string
		ns        []byte
		target    netip.Addr
		dst       netip.Addr
		dstMAC    net.HardwareAddr
		solicited bool
	}{
		{"multicast for the global address", solicit(gwLL, SolicitedNode(h.IP6), h.IP6, gwMAC), h.IP6, gwLL, gwMAC, true},
		{"multicast for the link-local address", solicit(gwLL, SolicitedNode(h.LinkLocal), h.LinkLocal, gwMAC), h.LinkLocal, gwLL, gwMAC, true},
		{"unicast without a source option (NUD)", solicit(gwLL, h.IP6, h.IP6, nil), h.IP6, gwLL, gwMAC, true},
		{"duplicate address detection", solicit(netip.IPv6Unspecified(), SolicitedNode(h.IP6), h.IP6, nil), h.IP6,
			allNodes, MulticastMAC(allNodes), false},
	} {
		s.Handle(p, c.ns, 1)
		frames := l.take()
		if len(frames) != 1 {
			t.Fatalf("%s: %d answers", c.what, len(frames))
		}
		src, dst, hdr, msg, raw := icmp6(t, frames[0])
		flags := byte(NAOverride)
		if c.solicited {
			flags |= NASolicited
		}
		if msg.Type != ipv6.ICMPTypeNeighborAdvertisement || hdr.HopLimit != 255 || !hdr.Src.Equal(c.target.AsSlice()) ||
			!hdr.Dst.Equal(c.dst.AsSlice()) || !bytes.Equal(src, h.MAC) || !bytes.Equal(dst, c.dstMAC) ||
			!bytes.Equal(raw[4:], ndBody(flags, c.target, 2, h.MAC)) {
			t.Fatalf("%s: NA %s -> %s (%s -> %s), body % x", c.what, hdr.Src, hdr.Dst, src, dst, raw[4:])
		}
	}
	// Not ours, or not valid ND: no answer, counted as ignored.
	for _, ns := range [][]byte{
		solicit(gwLL, SolicitedNode(h.IP6), netip.MustParseAddr("fd00:60::1"), gwMAC), // another address
		solicit(gwLL, SolicitedNode(s.Hosts()[1].IP6), h.IP6, gwMAC),                  // the wrong group
		x6Frame(t, gwMAC, MulticastMAC(SolicitedNode(h.IP6)), gwLL, SolicitedNode(h.IP6), 64,
			ipv6.ICMPTypeNeighborSolicitation, &icmp.RawBody{Data: ndBody(0, h.IP6, 1, gwMAC)}), // hop limit 64
	} {
		s.Handle(p, ns, 1)
	}
	st := s.Snapshot(true, false)
	if n := len(l.take()); n != 0 || st.Totals.Ignored != 3 || st.Totals.NASent != 4 || st.Hosts[2].TxPackets != 4 {
		t.Fatalf("%d answers to foreign solicitations; totals %+v", n, st.Totals)
	}
}

func TestICMPv6EchoRequestGetsAReply(t *testing.T) {
	s, l := newSim6(t, 2)
	h := s.Hosts()[1]
	req := x6Frame(t, vmac, h.MAC, remote6, h.IP6, 62, ipv6.ICMPTypeEchoRequest,
		&icmp.Echo{ID: 7, Seq: 3, Data: []byte("ping6")})
	s.Handle(NewParser(), req, 1)
	frames := l.take()
	if len(frames) != 1 {
		t.Fatalf("%d replies", len(frames))
	}
	src, dst, hdr, msg, _ := icmp6(t, frames[0])
	echo, ok := msg.Body.(*icmp.Echo)
	if msg.Type != ipv6.ICMPTypeEchoReply || !ok || echo.ID != 7 || echo.Seq != 3 || string(echo.Data) != "ping6" ||
		!hdr.Src.Equal(h.IP6.AsSlice()) || !hdr.Dst.Equal(remote6.AsSlice()) || !bytes.Equal(src, h.MAC) || !bytes.Equal(dst, vmac) {
		t.Fatalf("bad reply %+v %+v", hdr, msg)
	}
	if st := s.Snapshot(false, false); st.Totals.ICMP6Replies != 1 {
		t.Fatalf("totals %+v", st.Totals)
	}
}

func TestIPv6TestFlowsGoThroughTheAdvertisedVMACAndAreReceived(t *testing.T) {
	a, la := newSim6(t, 2)
	resolveAll(t, a)
	p := NewParser()
	if _, err := a.Start(RunSpec{RatePPS: 1000, FrameBytes: 128, DurationS: 1, Destinations: []string{remote6.String()}}); err == nil ||
		!strings.Contains(err.Error(), "has not resolved the gateway's IPv6 address fe80::1") {
		t.Fatalf("started without the gateway's IPv6 MAC: %v", err)
	}
	for _, h := range a.Hosts() {
		a.Handle(p, switchNA(t, h, vmac), 1)
	}
	la.take()
	if _, err := a.Start(RunSpec{RatePPS: 2000, FrameBytes: 128, DurationS: 0.05,
		Destinations: []string{remote6.String(), remote.String()}}); err != nil {
		t.Fatal(err)
	}
	for a.CurrentRun().State == "running" {
		time.Sleep(5 * time.Millisecond)
	}
	frames := la.take()
	if len(frames) < 10 {
		t.Fatalf("%d test frames", len(frames))
	}
	// The receiving side: host 0 of a dual-stack LAN with remote6's address.
	l := &memLink{}
	b, err := New(Config{GatewayIP: netip.MustParseAddr("192.168.204.1"), FirstIP: remote,
		FirstMAC: net.HardwareAddr{0, 0, 4, 0, 0, 0x18}, Count: 1, PrefixLen: 24,
		GatewayIP6: gwLL, FirstIP6: remote6}, l)
	if err != nil {
		t.Fatal(err)
	}
	var six int
	for _, f := range frames {
		pk := decode(t, f)
		ip6, ok := pk.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
		if !ok {
			continue // host 1's IPv4 flow
		}
		six++
		udp := pk.Layer(layers.LayerTypeUDP).(*layers.UDP)
		if len(f) != 124 || !bytes.Equal(f[0:6], vmac) || !ip6.SrcIP.Equal(a.Hosts()[0].IP6.AsSlice()) || ip6.HopLimit != 64 {
			t.Fatalf("IPv6 test frame: %d bytes to %s from %s", len(f), net.HardwareAddr(f[0:6]), ip6.SrcIP)
		}
		want := &layers.UDP{SrcPort: udp.SrcPort, DstPort: udp.DstPort}
		_ = want.SetNetworkLayerForChecksum(ip6)
		ref, _ := serialize(&layers.Ethernet{SrcMAC: f[6:12], DstMAC: vmac, EthernetType: layers.EthernetTypeIPv6},
			&layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolUDP, SrcIP: ip6.SrcIP, DstIP: ip6.DstIP},
			want, gopacket.Payload(udp.Payload))
		if !bytes.Equal(ref, f) {
			t.Fatalf("stamped IPv6 frame differs from gopacket's (UDP checksum %04x)", udp.Checksum)
		}
		copy(f[0:6], b.Hosts()[0].MAC) // the remote gateway's delivery
		b.Handle(p, f, a.cfg.Clock())
	}
	st := b.Snapshot(true, true)
	if six == 0 || st.Totals.TestRx != uint64(six) || len(st.FlowsRx) != 1 || st.FlowsRx[0].Src != a.Hosts()[0].IP6.String() ||
		st.FlowsRx[0].Dst != remote6.String() || st.FlowsRx[0].Lost != 0 {
		t.Fatalf("%d IPv6 frames sent; receiver totals %+v flows %+v", six, st.Totals, st.FlowsRx)
	}
	tx := a.TxFlows()
	if tx[0].Src != a.Hosts()[0].IP6.String() || tx[1].Src != a.Hosts()[1].IP.String() {
		t.Fatalf("flows %+v", tx)
	}
}

func TestIPv6ConfigAndRunsAreChecked(t *testing.T) {
	base := Config{GatewayIP: gwIP, FirstIP: netip.MustParseAddr("192.168.203.24"),
		FirstMAC: net.HardwareAddr{0, 0, 3, 0, 0, 0x18}, Count: 2, PrefixLen: 24}
	for _, c := range []struct {
		gw, first, want string
	}{
		{"fe80::1", "", "needs both"},
		{"", "fd00:60::64", "needs both"},
		{"fe80::1", "fe80::64", "not a global unicast"},
		{"fe80::1", "ff02::1", "not a global unicast"},
		{"fd00:99::1", "fd00:60::64", "neither link-local"},
		{"192.168.203.1", "fd00:60::64", "neither link-local"},
		{"fe80::1", "fd00:60::ffff:ffff:ffff:ffff", "not a host address"},
		{"fd00:60::65", "fd00:60::64", "not a host address"},
	} {
		cfg := base
		if c.gw != "" {
			cfg.GatewayIP6 = netip.MustParseAddr(c.gw)
		}
		if c.first != "" {
			cfg.FirstIP6 = netip.MustParseAddr(c.first)
		}
		if _, err := New(cfg, &memLink{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("gateway %q first %q: error %v, want %q", c.gw, c.first, err, c.want)
		}
	}
	v4only, _ := newSim(t, 2)
	resolveAll(t, v4only)
	dual, _ := newSim6(t, 2)
	resolveAll(t, dual)
	p := NewParser()
	for _, h := range dual.Hosts() {
		dual.Handle(p, switchNA(t, h, vmac), 1)
	}
	for _, c := range []struct {
		s    *Sim
		spec RunSpec
		want string
	}{
		{v4only, RunSpec{RatePPS: 10, FrameBytes: 128, Destinations: []string{"fd00:61::1"}}, "speak IPv4 only"},
		{dual, RunSpec{RatePPS: 10, FrameBytes: 128, Destinations: []string{"fd00:60::99"}}, "off this LAN"},
		{dual, RunSpec{RatePPS: 10, FrameBytes: 128, Destinations: []string{"ff0e::1"}}, "off this LAN"},
		{dual, RunSpec{RatePPS: 10, FrameBytes: 128, Destinations: []string{"fe80::9%eth0"}}, "not an IPv4 or IPv6"},
		{dual, RunSpec{RatePPS: 10, FrameBytes: 64, Destinations: []string{"fd00:61::1"}}, "outside 84-1518"},
	} {
		if _, err := c.s.Start(c.spec); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.spec.Destinations, err, c.want)
		}
	}
}

// IPv6 reaching IPv4-only hosts is ignored (their stacks would have IPv6 off), never answered.
func TestIPv4OnlyHostsIgnoreIPv6(t *testing.T) {
	s, l := newSim(t, 2)
	h := s.Hosts()[0]
	ns := x6Frame(t, vmac, MulticastMAC(SolicitedNode(firstIP6)), gwLL, SolicitedNode(firstIP6), 255,
		ipv6.ICMPTypeNeighborSolicitation, &icmp.RawBody{Data: ndBody(0, LinkLocal(h.MAC), 1, vmac)})
	s.Handle(NewParser(), ns, 1)
	if len(l.take()) != 0 || s.Snapshot(false, false).Totals.Ignored != 1 {
		t.Fatal("an IPv4-only host answered (or did not count) IPv6")
	}
}

func TestControlAPIShowsTheIPv6Side(t *testing.T) {
	s, _ := newSim6(t, 2)
	srv := &Server{sim: s, Quit: make(chan struct{})}
	if hello := srv.Handle([]byte(`{"cmd": "hello"}`)); hello["gateway_ip6"] != "fe80::1" {
		t.Fatalf("hello %v", hello)
	}
	resolveAll(t, s)
	st := srv.Handle([]byte(`{"cmd": "status"}`))
	if st["resolved"] != 2 || st["resolved6"] != 0 || st["ready"] != false {
		t.Fatalf("status before the NAs: %v", st)
	}
	for _, h := range s.Hosts() {
		s.Handle(NewParser(), switchNA(t, h, vmac), 1)
	}
	if st := srv.Handle([]byte(`{"cmd": "status"}`)); st["resolved6"] != 2 || st["ready"] != true {
		t.Fatalf("status after the NAs: %v", st)
	}
	if m := s.Prometheus(); !strings.Contains(m, `supergw_hostsim_host_resolved6{host="192.168.203.25",mac="00:00:03:00:00:19"} 1`) {
		t.Fatalf("metrics without the IPv6 resolution:\n%s", m)
	}
	v4, _ := newSim(t, 1)
	if hello := (&Server{sim: v4, Quit: make(chan struct{})}).Handle([]byte(`{"cmd": "hello"}`)); hello["gateway_ip6"] != nil {
		t.Fatalf("IPv4-only hello %v", hello)
	}
}

// What else reaches the hosts' port on a dual-stack LAN (bytes made by scapy): a namespace
// host's MLDv2 report behind a hop-by-hop header, and the controller's Router Advertisement.
// Neither is for a simulated host: ignored, not malformed, not answered.
func TestMLDReportsAndRouterAdvertisementsAreIgnored(t *testing.T) {
	s, l := newSim6(t, 2)
	for _, h := range []string{
		"33330000001602600000000b86dd6000000000240001fe80000000000000006000fffe00000bff0200000000000000000000000000163a000502000001008f0071930000000104000000ff0200000000000000000001ff00000b",
		"333300000001025e6000000086dd6000000000303afffe800000000000000000000000000001ff020000000000000000000000000001860033da000807080000000000000000030440c0ffffffffffffffff00000000fd000060000000000000000000000000",
	} {
		f, err := hex.DecodeString(h)
		if err != nil {
			t.Fatal(err)
		}
		s.Handle(NewParser(), f, 1)
	}
	st := s.Snapshot(false, false)
	if n := len(l.take()); n != 0 || st.Totals.Malformed != 0 || st.Totals.Ignored != 2 {
		t.Fatalf("%d answers; malformed %d, ignored %d (want 0, 2)", n, st.Totals.Malformed, st.Totals.Ignored)
	}
}
