package dataplane

import (
	"encoding/binary"
	"net"
)

// Test frame builders. Frames are padded to the 60-byte Ethernet minimum, as a
// NIC would deliver them, unless built with a raw payload.

func mac(s string) MAC {
	hw, err := net.ParseMAC(s)
	if err != nil || len(hw) != 6 {
		panic("bad test MAC " + s)
	}
	return MAC(hw)
}

func ip4(s string) IPv4 {
	ip := net.ParseIP(s).To4()
	if ip == nil {
		panic("bad test IPv4 " + s)
	}
	return IPv4(ip)
}

func ethFrame(dst, src MAC, etherType uint16, payload []byte) []byte {
	f := make([]byte, 0, 60)
	f = append(f, dst[:]...)
	f = append(f, src[:]...)
	f = binary.BigEndian.AppendUint16(f, etherType)
	return append(f, payload...)
}

func pad(f []byte) []byte {
	for len(f) < 60 {
		f = append(f, 0)
	}
	return f
}

type arpFields struct {
	htype, ptype uint16
	hlen, plen   uint8
	op           uint16
	sha          MAC
	spa          IPv4
	tha          MAC
	tpa          IPv4
}

func arpBody(a arpFields) []byte {
	if a.htype == 0 {
		a.htype = 1
	}
	if a.ptype == 0 {
		a.ptype = 0x0800
	}
	if a.hlen == 0 {
		a.hlen = 6
	}
	if a.plen == 0 {
		a.plen = 4
	}
	b := binary.BigEndian.AppendUint16(nil, a.htype)
	b = binary.BigEndian.AppendUint16(b, a.ptype)
	b = append(b, a.hlen, a.plen)
	b = binary.BigEndian.AppendUint16(b, a.op)
	b = append(b, a.sha[:]...)
	b = append(b, a.spa[:]...)
	b = append(b, a.tha[:]...)
	return append(b, a.tpa[:]...)
}

var broadcast = MAC{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

func arpRequest(sha MAC, spa, tpa IPv4) []byte {
	return pad(ethFrame(broadcast, sha, 0x0806, arpBody(arpFields{op: 1, sha: sha, spa: spa, tpa: tpa})))
}

func arpReply(dst, sha MAC, spa IPv4, tha MAC, tpa IPv4) []byte {
	return pad(ethFrame(dst, sha, 0x0806, arpBody(arpFields{op: 2, sha: sha, spa: spa, tha: tha, tpa: tpa})))
}

// ipv4Frame is an Ethernet frame with a minimal IPv4/UDP-less header.
func ipv4Frame(dst, src MAC, srcIP, dstIP IPv4) []byte {
	h := make([]byte, 20)
	h[0] = 0x45
	binary.BigEndian.PutUint16(h[2:], 46)
	h[8] = 64
	h[9] = 17
	copy(h[12:], srcIP[:])
	copy(h[16:], dstIP[:])
	return pad(ethFrame(dst, src, 0x0800, h))
}

func withMACs(f []byte, dst, src *MAC) []byte {
	out := append([]byte(nil), f...)
	if dst != nil {
		copy(out[0:6], dst[:])
	}
	if src != nil {
		copy(out[6:12], src[:])
	}
	return out
}
