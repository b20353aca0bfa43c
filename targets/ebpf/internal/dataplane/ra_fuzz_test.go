package dataplane

import (
	"encoding/binary"
	"fmt"
	"slices"
	"testing"

	"supergw/targets/ebpf/internal/bucket"
)

// FuzzOutside feeds arbitrary frames from the outside switch's ports (uplinks h1, h2;
// gateways' outside ports g1, g2) through the real tc program and checks, for any input:
//
//   - the program runs and returns TC_ACT_SHOT or TC_ACT_REDIRECT, length unchanged;
//     a drop counts exactly one reason by the frame's length and sends nothing;
//   - an IPv4 frame from an uplink to IP_P ends as outsideModel says — the contract's
//     classification (docs/pipeline-contract.md, "Outside dispatch") written again in Go:
//     the same drop reason, or out of the one gateway port the model picks, with the
//     destination rewritten to that gateway's MAC and nothing else changed;
//   - a gateway's outside frame never reaches another gateway port and, when its IPv4
//     source is IP_P, leaves with the public MAC as source;
//   - an uplink's frame never reaches another uplink; only an ARP reply leaves by the
//     ingress port; floods reach the other side's group minus the ingress port.
//
// Inputs are (port selector, shape, bytes); shapeOutside steers the bytes into IPv4 to
// IP_P, UDP 500/4500, markers, SPIs of every table, IKE flags and inconsistent lengths
// and truncations, so the fuzzer reaches every branch of the classification.
// Namespaces are sgw-hd-ofuzz-*.
func FuzzOutside(f *testing.F) {
	r, e := newFuzzRig(f, "ofuzz")
	must(f, outside(f)(e))
	m := &outsideModel{
		buckets: map[uint16]Gateway{bucketOf(f, macH1): {portG1, macGW1}, clientBucket(f, ipClient): {portG2, macGW2}},
		pins:    map[IPv4]Gateway{ipPinned: {portG1, macGW1}},
		labels:  []ternaryRow{{label1, Gateway{portG1, macGW1}}, {label2, Gateway{portG2, macGW2}}},
		ranges:  []ternaryRow{{range1, Gateway{portG1, macGW1}}, {range2, Gateway{portG2, macGW2}}},
	}
	base := &fuzzRig{r: r, e: e, shot: tcActShot, redirect: tcActRedirect, nDrops: uint16(p4const(f, "DROP_COUNTER_SIZE"))}
	fz := &outsideFuzz{fuzzRig: base, m: m, uplink: role(f, "UPLINK"), gatewayOutside: role(f, "GATEWAY_OUTSIDE")}
	fz.roles = map[uint16]uint8{portH1: fz.uplink, portH2: fz.uplink, portG1: fz.gatewayOutside, portG2: fz.gatewayOutside}
	for _, s := range outsideSeeds() {
		f.Add(s.port, s.shape, s.data)
	}
	f.Fuzz(func(t *testing.T, port uint8, shape uint32, data []byte) {
		fz.check(t, port, shape, data)
	})
}

type ternaryRow struct {
	k  DispatchKey
	gw Gateway
}

// outsideModel holds the rig's tables and decides a frame from an uplink to IP_P.
type outsideModel struct {
	buckets        map[uint16]Gateway
	pins           map[IPv4]Gateway
	labels, ranges []ternaryRow
}

func ternaryLookup(rows []ternaryRow, key uint64) (Gateway, bool) {
	for _, r := range rows {
		if key&r.k.Mask == r.k.Value {
			return r.gw, true
		}
	}
	return Gateway{}, false
}

// dispatch returns the drop reason, or "" and the gateway, for an IPv4 frame (at least
// a complete IPv4 header) to IP_P from an uplink.
func (m *outsideModel) dispatch(f []byte) (string, Gateway) {
	be16 := func(o int) uint16 { return binary.BigEndian.Uint16(f[o:]) }
	be32 := func(o int) uint32 { return binary.BigEndian.Uint32(f[o:]) }
	ihl, frag, proto, total := f[14]&0x0f, be16(20)&0x1fff, f[23], be16(16)
	var src IPv4
	copy(src[:], f[26:30])
	kind, at := "other", 0
	if ihl == 5 && frag == 0 {
		switch {
		case proto == 50:
			if total < 28 || len(f) < 42 {
				return "MALFORMED_ESP", Gateway{}
			}
			kind, at = "esp", 34
		case proto == 17 && len(f) >= 42 && be16(36) == 500:
			if be16(38) < 36 || len(f) < 62 {
				return "MALFORMED_IKE", Gateway{}
			}
			kind, at = "ike", 42
		case proto == 17 && len(f) >= 42 && be16(36) == 4500:
			ulen := be16(38)
			if ulen == 9 {
				if len(f) >= 43 && f[42] == 0xff {
					break
				}
				return "MALFORMED_ESP", Gateway{}
			}
			word := len(f) >= 46
			if word && be32(42) == 0 && ulen >= 12 {
				if ulen < 40 || len(f) < 66 {
					return "MALFORMED_IKE", Gateway{}
				}
				kind, at = "ike", 46
			} else {
				if ulen < 16 || !word || be32(42) == 0 || len(f) < 50 {
					return "MALFORMED_ESP", Gateway{}
				}
				kind, at = "esp", 42
			}
		}
	}
	switch kind {
	case "esp":
		if gw, ok := ternaryLookup(m.ranges, uint64(be32(at))); ok {
			return "", gw
		}
		return "ESP_SPI_UNKNOWN", Gateway{}
	case "ike":
		spiI, spiR := binary.BigEndian.Uint64(f[at:]), binary.BigEndian.Uint64(f[at+8:])
		if spiR != 0 {
			key := spiI
			if f[at+19]&0x08 != 0 {
				key = spiR
			}
			if gw, ok := ternaryLookup(m.labels, key); ok {
				return "", gw
			}
			return "IKE_SPI_UNKNOWN", Gateway{}
		}
	}
	if gw, ok := m.pins[src]; ok {
		return "", gw
	}
	b, err := bucket.OfClient(src, kBuckets, crcHash)
	if err != nil {
		panic(err)
	}
	if gw, ok := m.buckets[b]; ok {
		return "", gw
	}
	return "BUCKET_UNASSIGNED", Gateway{}
}

type outsideFuzz struct {
	*fuzzRig
	m                      *outsideModel
	uplink, gatewayOutside uint8
}

var outsidePorts = []uint16{portH1, portH2, portG1, portG2}

// shapeOutside builds a frame from raw bytes and shape bits:
//
//	bits 0-1   dst MAC: raw, public MAC, gw1, broadcast
//	bits 2-3   src MAC: raw, router (learned on h1), gw1, never learned
//	bits 4-5   ethertype: raw, IPv4, ARP (valid request), IPv4
//	bits 6-7   IPv4 destination / ARP target: raw, IP_P, gw1's WAN address, IP_P
//	bits 8-9   IPv4 source / ARP sender: raw, a client, the pinned client, IP_P
//	bit  10    IPv4 header without options, first fragment
//	bits 11-12 IP protocol: raw, UDP, ESP, UDP
//	bits 13-14 UDP destination port: raw, 500, 4500, 4500
//	bits 15-16 first payload word: raw, zero (marker), in range 1, in no range
//	bits 17-18 IKE responder SPI (behind a marker if one is there): raw, 0, label 1, label 3
//	bit  19    IKE flag I
//	bits 20-21 lengths: as built, IPv4 and UDP lengths of the frame, UDP length from data[0], as built
//	bits 22-23 size: as built, cut to 34 + data[1] % 40, padded to 60, as built
func shapeOutside(shape uint32, data []byte) []byte {
	f := slices.Clone(data)
	if len(f) > fuzzMaxFrame {
		f = f[:fuzzMaxFrame]
	}
	ensure := func(n int) {
		for len(f) < n {
			f = append(f, 0)
		}
	}
	field := func(bit uint) uint32 { return (shape >> bit) & 3 }
	ensure(ethHdrLen)
	switch field(0) {
	case 1:
		copy(f[0:6], macPub[:])
	case 2:
		copy(f[0:6], macGW1[:])
	case 3:
		copy(f[0:6], broadcast[:])
	}
	switch field(2) {
	case 1:
		copy(f[6:12], macRtr[:])
	case 2:
		copy(f[6:12], macGW1[:])
	case 3:
		copy(f[6:12], macNew[:])
	}
	dsts := []IPv4{{}, ipP, ipGW1Wan, ipP}
	srcs := []IPv4{{}, ipClient, ipPinned, ipP}
	switch field(4) {
	case 1, 3:
		binary.BigEndian.PutUint16(f[12:], 0x0800)
	case 2:
		binary.BigEndian.PutUint16(f[12:], 0x0806)
		ensure(arpFrameLen)
		copy(f[14:22], []byte{0, 1, 8, 0, 6, 4, 0, 1})
		if s := field(8); s != 0 {
			copy(f[28:32], srcs[s][:])
		}
		if s := field(6); s != 0 {
			copy(f[38:42], dsts[s][:])
		}
	}
	if binary.BigEndian.Uint16(f[12:]) == 0x0800 {
		ensure(ethHdrLen + 20)
		if s := field(6); s != 0 {
			copy(f[30:34], dsts[s][:])
		}
		if s := field(8); s != 0 {
			copy(f[26:30], srcs[s][:])
		}
		if shape&(1<<10) != 0 {
			f[14] = 0x45
			binary.BigEndian.PutUint16(f[20:], 0)
		}
		switch field(11) {
		case 1, 3:
			f[23] = 17
		case 2:
			f[23] = 50
		}
		l4 := 34
		if f[23] == 17 && field(13) != 0 {
			ensure(l4 + 8)
			port := []uint16{0, 500, 4500, 4500}[field(13)]
			binary.BigEndian.PutUint16(f[l4+2:], port)
			l4 += 8
		}
		if s := field(15); s != 0 {
			ensure(l4 + 4)
			binary.BigEndian.PutUint32(f[l4:], []uint32{0, 0, 0xc1000042, 0xc3000001}[s])
		}
		ike := l4
		if field(15) == 1 {
			ike += 4
		}
		if s := field(17); s != 0 {
			ensure(ike + 20)
			binary.BigEndian.PutUint64(f[ike+8:], []uint64{0, 0, 1<<56 | 5, 3<<56 | 5}[s])
		}
		if shape&(1<<19) != 0 {
			ensure(ike + 20)
			f[ike+19] |= 0x08
		}
	}
	switch field(22) {
	case 1:
		if n := 34 + int(at(data, 1))%40; n < len(f) {
			f = f[:n]
		}
	case 2:
		ensure(60)
	}
	if binary.BigEndian.Uint16(f[12:]) == 0x0800 && len(f) >= 42 {
		switch field(20) {
		case 1:
			binary.BigEndian.PutUint16(f[16:], uint16(len(f)-ethHdrLen))
			binary.BigEndian.PutUint16(f[38:], uint16(len(f)-34))
		case 2:
			binary.BigEndian.PutUint16(f[38:], uint16(at(data, 0))%48)
		}
	}
	return f
}

func at(b []byte, i int) byte {
	if i < len(b) {
		return b[i]
	}
	return 0
}

type outsideSeed struct {
	port  uint8
	shape uint32
	data  []byte
}

// outsideSeeds: every classification from an uplink, and gateway frames.
func outsideSeeds() []outsideSeed {
	toP := func(src IPv4, proto byte, payload []byte) []byte {
		return ipv4Packet(macPub, macRtr, src, ipP, proto, payload)
	}
	frames := [][]byte{
		toP(ipClient, ipProtoUDP, udp(500, 500, ikeHeader(0x1111, 0, ikeFlagInitiator))),
		toP(ipPinned, ipProtoUDP, udp(500, 500, ikeHeader(0x1111, 0, ikeFlagInitiator))),
		toP(ipClient, ipProtoUDP, udp(500, 500, ikeHeader(0x1111, 1<<56|3, ikeFlagInitiator))),
		toP(ipClient, ipProtoUDP, udp(4500, 4500, append(nonESPMarker, ikeHeader(2<<56, 1<<56, 0)...))),
		toP(ipClient, ipProtoUDP, udp(500, 500, ikeHeader(0x1111, 3<<56|3, ikeFlagInitiator))),
		toP(ipClient, ipProtoESP, espHeader(0xc1000005)),
		toP(ipClient, ipProtoUDP, udp(4500, 4500, espHeader(0xc2000007))),
		toP(ipClient, ipProtoESP, espHeader(0xc3000001)),
		toP(ipClient, ipProtoUDP, udp(4500, 4500, []byte{0xff})),
		toP(ipClient, ipProtoUDP, udp(4500, 4500, []byte{0, 0})),
		toP(ipClient, ipProtoICMP, []byte{8, 0}),
		toP(ip4("198.51.100.200"), ipProtoUDP, udp(500, 500, ikeHeader(1, 0, 8))),
		toP(ipClient, ipProtoUDP, udp(500, 500, ikeHeader(1, 1<<56, 8)))[:55],
		arpRequest(macRtr, ipRtr, ipP),
		arpRequest(macGW1, ipP, ipRtr),
		ipv4Packet(macRtr, macGW1, ipP, ipClient, ipProtoUDP, udp(4500, 4500, espHeader(1))),
		ipv4Packet(macGW2, macGW1, ipGW1Wan, ipClient, ipProtoUDP, nil),
		ipv4Frame(macRtr2, macRtr, ipClient, ipGW1Wan),
	}
	var seeds []outsideSeed
	for p := range outsidePorts {
		for _, f := range frames {
			seeds = append(seeds, outsideSeed{uint8(p), 0, f})
		}
		seeds = append(seeds,
			outsideSeed{uint8(p), 1 | 1<<2 | 1<<4 | 1<<6 | 1<<8 | 1<<10 | 1<<11 | 1<<13 | 2<<17 | 1<<19 | 1<<20, make([]byte, 80)},
			outsideSeed{uint8(p), 1 | 1<<2 | 1<<4 | 1<<6 | 1<<8 | 1<<10 | 1<<11 | 2<<13 | 1<<15 | 2<<17 | 1<<19 | 1<<20, make([]byte, 80)},
			outsideSeed{uint8(p), 1 | 1<<2 | 1<<4 | 1<<6 | 1<<8 | 1<<10 | 2<<11 | 2<<15 | 1<<20, make([]byte, 60)},
			outsideSeed{uint8(p), 1 | 1<<2 | 1<<4 | 1<<6 | 1<<8 | 1<<10 | 1<<11 | 2<<13 | 2<<15 | 2<<20 | 1<<22, []byte{11, 9}},
		)
	}
	return seeds
}

func (fz *outsideFuzz) check(t *testing.T, portSel uint8, shape uint32, data []byte) {
	in := shapeOutside(shape, data)
	port := outsidePorts[int(portSel)%len(outsidePorts)]
	role := fz.roles[port]
	etherType := binary.BigEndian.Uint16(in[12:14])
	desc := fmt.Sprintf("port %d (role %d), frame %x", port, role, in)
	fz.drainEvents()
	o, ran := fz.observe(t, fz.r.ifindex[port], in, desc)
	if !ran {
		return
	}
	res, drops, sent := o.res, o.drops, o.sent
	toP := etherType == 0x0800 && len(in) >= 34 && IPv4(in[30:34]) == ipP
	if role == fz.uplink && toP {
		fz.checkDispatch(t, desc, port, in, res, drops, sent)
	}
	for _, p := range sent {
		switch {
		case p == port:
			if !(etherType == 0x0806 && binary.BigEndian.Uint16(res.out[20:]) == 2 && res.verdict == tcActRedirect) {
				t.Errorf("%s: sent back out of the ingress port, and not as an ARP reply", desc)
			}
		case fz.roles[p] == role:
			t.Errorf("%s: sent to port %d of the same side", desc, p)
		}
	}
	if role == fz.gatewayOutside && len(sent) > 0 && etherType == 0x0800 && IPv4(in[26:30]) == ipP && MAC(res.out[6:12]) != macPub {
		t.Errorf("%s: a gateway's frame from IP_P left with source %x", desc, res.out[6:12])
	}
	if len(drops) == 0 && res.verdict == tcActShot && len(sent) > 0 {
		group := []uint16{portG1, portG2}
		if role == fz.gatewayOutside {
			group = []uint16{portH1, portH2}
		}
		if !slices.Equal(sent, group) {
			t.Errorf("%s: flood reached %v, want %v", desc, sent, group)
		}
	}
}

// checkDispatch compares an uplink's frame to IP_P with the model.
func (fz *outsideFuzz) checkDispatch(t *testing.T, desc string, port uint16, in []byte, res runResult, drops, sent []uint16) {
	reason, gw := fz.m.dispatch(in)
	if reason != "" {
		if len(drops) != 1 || drops[0] != drop(t, reason) {
			t.Fatalf("%s: drops %v, sent %v; the contract says %s", desc, drops, sent, reason)
		}
		return
	}
	if gw.Port == port {
		if len(drops) != 1 || drops[0] != drop(t, "HAIRPIN") {
			t.Fatalf("%s: drops %v; the contract says HAIRPIN", desc, drops)
		}
		return
	}
	if len(drops) != 0 || res.verdict != tcActRedirect || !slices.Equal(sent, []uint16{gw.Port}) {
		t.Fatalf("%s: drops %v, verdict %d, sent %v; the contract says port %d", desc, drops, res.verdict, sent, gw.Port)
	}
	want := slices.Clone(in)
	copy(want[0:6], gw.MAC[:])
	if !slices.Equal(res.out, want) {
		t.Fatalf("%s: out %x, want %x", desc, res.out, want)
	}
}
