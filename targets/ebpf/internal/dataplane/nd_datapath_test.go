package dataplane

import (
	"testing"

	"supergw/targets/ebpf/internal/p4constants"
)

// BPF_PROG_RUN tests of IPv6 Neighbor Discovery (bpf/supergw_nd.h): one row per line of
// "IPv6 Neighbor Discovery on the LAN" in docs/pipeline-contract.md. Every NA the switch
// must send is built with golang.org/x/net/icmp (nd_frames_test.go), so the rows compare
// the program's ICMPv6 checksum with an independent implementation byte for byte.

var (
	llG   = ip6("fe80::1")
	guaG  = ip6("2001:db8::1")
	llH1  = ip6("fe80::200:3ff:fe00:19")
	guaH1 = ip6("2001:db8::11")
	llH2  = ip6("fe80::200:3ff:fe00:1a")
	llH3  = ip6("fe80::200:3ff:fe00:1b")
	llGW1 = ip6("fe80::aa:ff:fe00:1")
	ipR   = ip6("2001:db8:ffff::1") // a remote host behind the gateways
)

// ndBase is the ND state every row starts from on top of the rig's: both gateway
// addresses set, h1's link-local address learned, h1's global address in host_ip6s.
func ndBase(e *EBPF) error {
	if err := e.SetNDConfig(NDConfig{Configured: true, LinkLocal: llG, Global: guaG}); err != nil {
		return err
	}
	if err := e.SetLearnedIP6(llH1, macH1); err != nil {
		return err
	}
	if err := e.SetLearnedIP6(llH2, macH2); err != nil {
		return err
	}
	return e.SetHostIPv6(guaH1, macH1)
}

func withND(more func(*EBPF) error) func(*EBPF) error {
	return func(e *EBPF) error {
		if err := ndBase(e); err != nil {
			return err
		}
		return more(e)
	}
}

func digest6(m MAC, port uint16, ip IPv6) Event {
	return Event{Kind: EventDigestIP6, SrcMAC: m, Port: port, SrcIP6: ip}
}

// udp6 is a minimal IPv6/UDP frame (no ND).
func udp6(dstMAC, srcMAC MAC, src, dst IPv6) []byte {
	h := make([]byte, 48)
	h[0] = 0x60
	h[5] = 8
	h[6] = 17
	h[7] = 64
	copy(h[8:], src[:])
	copy(h[24:], dst[:])
	h[40], h[41], h[42], h[43], h[45] = 0x30, 0x39, 0x30, 0x39, 8
	return ethFrame(dstMAC, srcMAC, 0x86dd, h)
}

func TestNDDatapath(t *testing.T) {
	r := newRig(t)
	vH1 := vmacOf(t, macH1, kBuckets, crcHash)
	vH2 := vmacOf(t, macH2, kBuckets, crcHash)
	vH3 := vmacOf(t, macH3, kBuckets, crcHash)
	idH1 := vmacOf(t, macH1, kBuckets, p4constants.BucketHashIdentity)
	nothing := func(*EBPF) error { return nil }
	base := withND(nothing)

	nsLL := multicastNS(macH1, llH1, llG).frame()
	nsGUA := ns(mac("33:33:ff:00:00:01"), macH1, guaH1, ip6("ff02::1:ff00:1"), guaG).frame() // no option: 78 bytes
	nud := ns(vH1, macH1, llH1, llG, llG).frame()
	dad := dadNS(macH1, llG).frame()
	tcFlow := multicastNS(macH1, llH1, llG).frame()
	tcFlow[14], tcFlow[15], tcFlow[16], tcFlow[17] = 0x6b, 0x81, 0x23, 0x45 // traffic class 0xb8, flow 0x12345
	wantTCFlow := expectedNA(macH1, llH1, vH1, llG, naRouter|naSolicited|naOverride)
	copy(wantTCFlow[14:18], tcFlow[14:18])
	wantTCFlow = fixChecksum(t, wantTCFlow)
	hop64 := multicastNS(macH1, llH1, llG)
	hop64.hopLimit = 64
	code1 := multicastNS(macH1, llH1, llG)
	code1.code = 1
	twoOpts := ns(mac("33:33:ff:00:00:01"), macH1, llH1, ip6("ff02::1:ff00:1"), llG, llOpt(optSourceLL, macH1), nonceOpt())
	zeroLenOpt := ns(mac("33:33:ff:00:00:01"), macH1, llH1, ip6("ff02::1:ff00:1"), llG, []byte{optSourceLL, 0, 0, 0, 0, 0, 0, 0})
	cut := ns(vH1, macH1, llH1, llG, llG)
	cut.payloadLen = 32 // claims an option the frame does not hold
	trailer := multicastNS(macH1, llH1, llG)
	trailer.trailer = []byte{0xde, 0xad, 0xbe, 0xef}
	naH1 := func(dstMAC MAC, dst IPv6) []byte {
		return expectedNA(dstMAC, dst, vH1, llG, naRouter|naSolicited|naOverride)
	}

	gwNSForH1 := multicastNS(macGW1, llGW1, guaH1).frame()
	gwNSForH3 := multicastNS(macGW1, llGW1, ip6("2001:db8::13")).frame()
	gwNUD := ns(macH1, macGW1, llGW1, guaH1, guaH1).frame()
	gwDADForG := dadNS(macGW1, llG).frame()
	gwDADForH1 := dadNS(macGW1, guaH1).frame()
	gwNSForGUA := ns(vH1, macGW1, llGW1, guaG, guaG).frame()
	gwNAToH1 := na(macH1, macGW1, llG, llH1, naRouter|naSolicited|naOverride, llG, llOpt(optTargetLL, macGW1)).frame()
	gwUnsolicitedNA := na(allNodesMAC, macGW1, llG, allNodes, naRouter|naOverride, llG, llOpt(optTargetLL, macGW1)).frame()
	gwHop64 := multicastNS(macGW1, llGW1, guaH1)
	gwHop64.hopLimit = 64
	mldReport := ndMsg{dstMAC: multicastMAC(ip6("ff02::16")), srcMAC: macGW1, src: llGW1, dst: ip6("ff02::16"), hopLimit: 1, typ: 143,
		body: make([]byte, 4)}.frame()
	down6 := udp6(macH1, macGW1, ipR, guaH1)

	cases := []dpCase{
		// Host port: NS for a gateway address → NA from the ingress port.
		{name: "multicast NS for LL_G with source link-layer option: NA R|S|O with the vmac", setup: base, port: portH1, frame: nsLL,
			verdict: tcActRedirect, out: naH1(macH1, llH1), tx: []uint16{portH1}},
		{name: "multicast NS for GUA_G without option (24 bytes): NA grown to 32", setup: base, port: portH1, frame: nsGUA,
			verdict: tcActRedirect, out: expectedNA(macH1, guaH1, vH1, guaG, naRouter|naSolicited|naOverride), tx: []uint16{portH1},
			events: []Event{digest6(macH1, portH1, guaH1)}},
		{name: "unicast NS to the vmac (NUD) is answered, never dispatched to a gateway", setup: base, port: portH1, frame: nud,
			verdict: tcActRedirect, out: naH1(macH1, llH1), tx: []uint16{portH1}},
		{name: "DAD probe for LL_G: NA R|O to all nodes (the address is defended)", setup: base, port: portH1, frame: dad,
			verdict: tcActRedirect, out: expectedNA(allNodesMAC, allNodes, vH1, llG, naRouter|naOverride), tx: []uint16{portH1}},
		{name: "NA keeps the NS's traffic class and flow label", setup: base, port: portH1, frame: tcFlow,
			verdict: tcActRedirect, out: wantTCFlow, tx: []uint16{portH1}},
		{name: "bytes behind the NS's payload are cut from the NA", setup: base, port: portH1, frame: trailer.frame(),
			verdict: tcActRedirect, out: naH1(macH1, llH1), tx: []uint16{portH1}},
		{name: "identity hash: NA with vmac(mac & mask)", setup: withND(func(e *EBPF) error {
			return e.SetDispatchConfig(DispatchConfig{Configured: true, GatewayIP: ipG, VMACBase: vmacBase, BucketMask: kBuckets - 1,
				BucketHash: p4constants.BucketHashIdentity})
		}), port: portH1, frame: nsLL, verdict: tcActRedirect,
			out: expectedNA(macH1, llH1, idH1, llG, naRouter|naSolicited|naOverride), tx: []uint16{portH1}},
		{name: "NS for LL_G from an unlearned host: learned, then answered with its own vmac", setup: base, port: portH2,
			frame: multicastNS(macH3, llH3, llG).frame(), verdict: tcActRedirect,
			out: expectedNA(macH3, llH3, vH3, llG, naRouter|naSolicited|naOverride), tx: []uint16{portH2},
			events: []Event{digest(macH3, portH2, IPv4{}), digest6(macH3, portH2, llH3)}},
		// Host port: NS for a gateway address the switch cannot build an NA from.
		{name: "NS for LL_G with hop limit 64: ND_UNSUPPORTED", setup: base, port: portH1, frame: hop64.frame(), verdict: tcActShot, drop: "ND_UNSUPPORTED"},
		{name: "NS for LL_G with code 1: ND_UNSUPPORTED", setup: base, port: portH1, frame: code1.frame(), verdict: tcActShot, drop: "ND_UNSUPPORTED"},
		{name: "NS for LL_G with two options: ND_UNSUPPORTED", setup: base, port: portH1, frame: twoOpts.frame(), verdict: tcActShot, drop: "ND_UNSUPPORTED"},
		{name: "NS for LL_G whose option has length 0: ND_UNSUPPORTED", setup: base, port: portH1, frame: zeroLenOpt.frame(), verdict: tcActShot, drop: "ND_UNSUPPORTED"},
		{name: "NS for LL_G claiming an option the frame does not hold: ND_UNSUPPORTED", setup: base, port: portH1, frame: cut.frame(), verdict: tcActShot, drop: "ND_UNSUPPORTED"},
		// Host port: the spoof guard, before learning.
		{name: "NS from GUA_G by an unlearned host: ND_SPOOF_GATEWAY_IP, no digest", setup: base, port: portH1,
			frame: multicastNS(macH3, guaG, llH2).frame(), verdict: tcActShot, drop: "ND_SPOOF_GATEWAY_IP"},
		{name: "NA for LL_G from a host: ND_SPOOF_GATEWAY_IP", setup: base, port: portH1,
			frame: na(allNodesMAC, macH1, llH1, allNodes, naOverride, llG, llOpt(optTargetLL, macH1)).frame(), verdict: tcActShot, drop: "ND_SPOOF_GATEWAY_IP"},
		{name: "NA for GUA_G with hop limit 64 to the vmac: still ND_SPOOF_GATEWAY_IP", setup: base, port: portH1, frame: func() []byte {
			m := na(vH1, macH1, llH1, llG, naSolicited, guaG)
			m.hopLimit = 64
			return m.frame()
		}(), verdict: tcActShot, drop: "ND_SPOOF_GATEWAY_IP"},
		// Host port: router solicitation and the rest.
		{name: "RS: packet-in ROUTER_SOLICITATION, not forwarded", setup: base, port: portH1, frame: routerSolicit(macH1, llH1).frame(),
			verdict: tcActShot, events: []Event{packetIn(portH1, punt(t, "ROUTER_SOLICITATION"), routerSolicit(macH1, llH1).frame())}},
		{name: "RS with hop limit 1 is punted as well", setup: base, port: portH1, frame: func() []byte {
			m := routerSolicit(macH1, llH1)
			m.hopLimit = 1
			return m.frame()
		}(), verdict: tcActShot, events: []Event{packetIn(portH1, punt(t, "ROUTER_SOLICITATION"), func() []byte {
			m := routerSolicit(macH1, llH1)
			m.hopLimit = 1
			return m.frame()
		}())}},
		{name: "NS for another host floods to hosts", setup: base, port: portH1, frame: multicastNS(macH1, llH1, llH2).frame(), verdict: tcActShot, tx: []uint16{portH2}},
		{name: "host NA to another host is L2", setup: base, port: portH2, frame: na(macH1, macH2, llH2, llH1, naSolicited|naOverride, llH2, llOpt(optTargetLL, macH2)).frame(),
			verdict: tcActRedirect, tx: []uint16{portH1}},
		{name: "host NA to a vmac goes to the bucket's gateway", setup: base, port: portH1, frame: na(vH1, macH1, llH1, llG, naSolicited|naOverride, llH1, llOpt(optTargetLL, macH1)).frame(),
			verdict: tcActRedirect, out: withMACs(na(vH1, macH1, llH1, llG, naSolicited|naOverride, llH1, llOpt(optTargetLL, macH1)).frame(), &macGW1, nil), tx: []uint16{portG1}, bucketHit: true},
		{name: "ND config unset: NS for fe80::1 is L2", port: portH1, setup: func(e *EBPF) error { return e.SetLearnedIP6(llH1, macH1) },
			frame: nsLL, verdict: tcActShot, tx: []uint16{portH2}},
		{name: "mark_nd_unconfigured again: NS for fe80::1 is L2", port: portH1, setup: withND(func(e *EBPF) error { return e.SetNDConfig(NDConfig{}) }),
			frame: nsLL, verdict: tcActShot, tx: []uint16{portH2}},
		{name: "an unset global address (::) matches no NS for ::", port: portH1, setup: withND(func(e *EBPF) error {
			return e.SetNDConfig(NDConfig{Configured: true, LinkLocal: llG})
		}), frame: multicastNS(macH1, llH1, IPv6{}).frame(), verdict: tcActShot, tx: []uint16{portH2}},
		{name: "ND behind a hop-by-hop header is plain IPv6", setup: base, port: portH1, frame: func() []byte {
			f := multicastNS(macH1, llH1, llG).frame()
			f[20] = 0 // next header: hop-by-hop options
			return f
		}(), verdict: tcActShot, tx: []uint16{portH2}},
		// Host port: learning IPv6 addresses.
		{name: "IPv6 to a vmac: dispatched, new source address reported", setup: base, port: portH1, frame: udp6(vH1, macH1, guaH1, ipR),
			verdict: tcActRedirect, out: withMACs(udp6(vH1, macH1, guaH1, ipR), &macGW1, nil), tx: []uint16{portG1}, bucketHit: true,
			events: []Event{digest6(macH1, portH1, guaH1)}},
		{name: "IPv6 from a learned (address, MAC): no digest", setup: base, port: portH1, frame: udp6(macH2, macH1, llH1, llH2),
			verdict: tcActRedirect, tx: []uint16{portH2}},
		{name: "the same address from another MAC is a new pair", setup: base, port: portH2, frame: udp6(macH1, macH2, llH1, llH1),
			verdict: tcActRedirect, tx: []uint16{portH1}, events: []Event{digest6(macH2, portH2, llH1)}},
		{name: "IPv6 from an unlearned host: both digests, src_ip 0 in the first", setup: base, port: portH2, frame: udp6(macH1, macH3, llH3, llH1),
			verdict: tcActRedirect, tx: []uint16{portH1}, events: []Event{digest(macH3, portH2, IPv4{}), digest6(macH3, portH2, llH3)}},
		{name: "IPv6 from a gateway address is not learned", setup: base, port: portH1, frame: udp6(macH2, macH1, guaG, llH2),
			verdict: tcActRedirect, tx: []uint16{portH2}},
		{name: "IPv6 from a multicast source is not learned", setup: base, port: portH1, frame: udp6(macH2, macH1, ip6("ff02::1"), llH2),
			verdict: tcActRedirect, tx: []uint16{portH2}},
		{name: "IPv6 without ND config: learned all the same", port: portH1, frame: udp6(macH2, macH1, guaH1, llH2),
			verdict: tcActRedirect, tx: []uint16{portH2}, events: []Event{digest6(macH1, portH1, guaH1)}},
		// Gateway port.
		{name: "gateway NS for a known host: NA S|O with the host's MAC", setup: base, port: portG1, frame: gwNSForH1,
			verdict: tcActRedirect, out: expectedNA(macGW1, llGW1, macH1, guaH1, naSolicited|naOverride), tx: []uint16{portG1}},
		{name: "gateway unicast NS (NUD) for a known host: answered, never reaches the host", setup: base, port: portG1, frame: gwNUD,
			verdict: tcActRedirect, out: expectedNA(macGW1, llGW1, macH1, guaH1, naSolicited|naOverride), tx: []uint16{portG1}},
		{name: "gateway DAD for a host address in host_ip6s: NA O to all nodes", setup: base, port: portG2, frame: gwDADForH1,
			verdict: tcActRedirect, out: expectedNA(allNodesMAC, allNodes, macH1, guaH1, naOverride), tx: []uint16{portG2}},
		{name: "gateway NS for an unknown host: packet-in GATEWAY_ND_MISS", setup: base, port: portG1, frame: gwNSForH3,
			verdict: tcActShot, events: []Event{packetIn(portG1, punt(t, "GATEWAY_ND_MISS"), gwNSForH3)}},
		{name: "gateway DAD for LL_G: GATEWAY_ND_GATEWAY_IP", setup: base, port: portG1, frame: gwDADForG, verdict: tcActShot, drop: "GATEWAY_ND_GATEWAY_IP"},
		{name: "gateway NS for GUA_G even if host_ip6s has it: GATEWAY_ND_GATEWAY_IP", setup: withND(func(e *EBPF) error { return e.SetHostIPv6(guaG, macH2) }),
			port: portG2, frame: gwNSForGUA, verdict: tcActShot, drop: "GATEWAY_ND_GATEWAY_IP"},
		{name: "gateway NS with hop limit 64: ND_UNSUPPORTED", setup: base, port: portG1, frame: gwHop64.frame(), verdict: tcActShot, drop: "ND_UNSUPPORTED"},
		{name: "gateway NA to a host: packet-in GATEWAY_NA, never forwarded", setup: base, port: portG1, frame: gwNAToH1,
			verdict: tcActShot, events: []Event{packetIn(portG1, punt(t, "GATEWAY_NA"), gwNAToH1)}},
		{name: "gateway unsolicited NA to all nodes: packet-in GATEWAY_NA", setup: base, port: portG2, frame: gwUnsolicitedNA,
			verdict: tcActShot, events: []Event{packetIn(portG2, punt(t, "GATEWAY_NA"), gwUnsolicitedNA)}},
		{name: "gateway RA to all nodes: GATEWAY_ROUTER_ND", setup: base, port: portG1, frame: routerAdvert(allNodesMAC, macGW1, llG, allNodes).frame(),
			verdict: tcActShot, drop: "GATEWAY_ROUTER_ND"},
		{name: "gateway unicast RA to a host: GATEWAY_ROUTER_ND", setup: base, port: portG1, frame: routerAdvert(macH1, macGW1, llG, llH1).frame(),
			verdict: tcActShot, drop: "GATEWAY_ROUTER_ND"},
		{name: "gateway RS: GATEWAY_ROUTER_ND", setup: base, port: portG2, frame: routerSolicit(macGW2, llGW1).frame(), verdict: tcActShot, drop: "GATEWAY_ROUTER_ND"},
		{name: "gateway redirect: GATEWAY_ROUTER_ND", setup: base, port: portG1, frame: ndMsg{dstMAC: macH1, srcMAC: macGW1, src: llG, dst: llH1, typ: ndRedirect,
			body: append(append(make([]byte, 4), ipR[:]...), ipR[:]...)}.frame(), verdict: tcActShot, drop: "GATEWAY_ROUTER_ND"},
		{name: "gateway RA without ND config: still GATEWAY_ROUTER_ND", port: portG1, frame: routerAdvert(allNodesMAC, macGW1, llG, allNodes).frame(),
			verdict: tcActShot, drop: "GATEWAY_ROUTER_ND"},
		{name: "gateway MLD report (other ICMPv6 multicast): GATEWAY_BROADCAST", setup: base, port: portG1, frame: mldReport, verdict: tcActShot, drop: "GATEWAY_BROADCAST"},
		{name: "gateway IPv6 to a host: src := vmac(bucket(dst)), not learned", setup: base, port: portG1, frame: down6,
			verdict: tcActRedirect, out: withMACs(down6, nil, &vH1), tx: []uint16{portH1}},
		{name: "gateway IPv6 to host h2 (unlearned pair, no digest from gateways)", setup: base, port: portG2, frame: udp6(macH2, macGW2, ipR, llH2),
			verdict: tcActRedirect, out: withMACs(udp6(macH2, macGW2, ipR, llH2), nil, &vH2), tx: []uint16{portH2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			runCase(t, r, c)
			res := c.out
			if len(res) > 0 && res[12] == 0x86 && res[13] == 0xdd && res[20] == 58 {
				if err := checkICMPv6Checksum(res); err != nil {
					t.Errorf("expected frame: %v", err)
				}
			}
		})
	}
}

// fixChecksum recomputes the ICMPv6 checksum of an Ethernet/IPv6/ICMPv6 frame with
// golang.org/x/net/icmp (after a test edited the IPv6 header outside the pseudo-header).
func fixChecksum(t *testing.T, f []byte) []byte {
	t.Helper()
	out := append([]byte(nil), f...)
	if err := checkICMPv6Checksum(out); err != nil {
		t.Fatalf("fixChecksum: %v", err)
	}
	return out
}

// BenchmarkHostToGatewayIPv6 is BenchmarkHostToGateway for an IPv6/UDP frame from a learned
// (address, MAC) with nd_settings configured: the IPv6 fast path's extra cost is the
// IPv6 header load, the nd_settings lookup and the learned_ip6s lookup.
func BenchmarkHostToGatewayIPv6(b *testing.B) {
	benchHostToGateway(b, func(v MAC) []byte { return pad(udp6(v, macH1, llH1, ipR)) }, ndBase)
}
