package dataplane

import (
	"encoding/binary"
	"fmt"
	"net"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv6"
)

// IPv6 Neighbor Discovery test frames. The ICMPv6 checksum of every frame built here,
// and of every frame the tests expect from the switch, is computed by golang.org/x/net/icmp
// over the IPv6 pseudo-header: an implementation independent of the eBPF program's.

func ip6(s string) IPv6 {
	ip := net.ParseIP(s)
	if ip == nil || ip.To4() != nil {
		panic("bad test IPv6 " + s)
	}
	return IPv6(ip.To16())
}

// solicitedNode is ff02::1:ffXX:XXXX for target (RFC 4291 2.7.1) and its MAC (RFC 2464 7).
func solicitedNode(target IPv6) (IPv6, MAC) {
	ip := ip6("ff02::1:ff00:0")
	copy(ip[13:], target[13:])
	return ip, multicastMAC(ip)
}

func multicastMAC(ip IPv6) MAC {
	return MAC{0x33, 0x33, ip[12], ip[13], ip[14], ip[15]}
}

var (
	allNodes    = ip6("ff02::1")
	allNodesMAC = multicastMAC(allNodes)
)

const (
	ndRS       = 133
	ndRA       = 134
	ndNS       = 135
	ndNA       = 136
	ndRedirect = 137

	naRouter    = 0x80
	naSolicited = 0x40
	naOverride  = 0x20

	optSourceLL = 1
	optTargetLL = 2
	optNonce    = 14
)

// ndMsg is an ICMPv6 message behind an IPv6 header; zero fields take ND's valid values.
type ndMsg struct {
	dstMAC, srcMAC MAC
	src, dst       IPv6
	hopLimit       int // 0: 255
	typ, code      uint8
	body           []byte // the message behind type, code and checksum
	// payloadLen, if set, overrides the IPv6 payload length; trailer is appended behind
	// the message (Ethernet padding or garbage the payload length does not cover).
	payloadLen int
	trailer    []byte
	badCsum    bool
}

func (m ndMsg) frame() []byte {
	hop := m.hopLimit
	if hop == 0 {
		hop = 255
	}
	msg := icmp.Message{Type: ipv6.ICMPType(m.typ), Code: int(m.code), Body: &icmp.RawBody{Data: m.body}}
	b, err := msg.Marshal(icmp.IPv6PseudoHeader(net.IP(m.src[:]), net.IP(m.dst[:])))
	if err != nil {
		panic(err)
	}
	if m.badCsum {
		b[2] ^= 0xff
	}
	plen := len(b)
	if m.payloadLen != 0 {
		plen = m.payloadLen
	}
	h := make([]byte, 40)
	h[0] = 0x60
	binary.BigEndian.PutUint16(h[4:], uint16(plen))
	h[6] = 58
	h[7] = byte(hop)
	copy(h[8:], m.src[:])
	copy(h[24:], m.dst[:])
	f := ethFrame(m.dstMAC, m.srcMAC, 0x86dd, append(h, b...))
	return append(f, m.trailer...)
}

func llOpt(typ uint8, m MAC) []byte { return append([]byte{typ, 1}, m[:]...) }

func nonceOpt() []byte { return []byte{optNonce, 1, 1, 2, 3, 4, 5, 6} }

// nsBody is an NS body (reserved word, target) followed by opts.
func nsBody(target IPv6, opts ...[]byte) []byte {
	b := append(make([]byte, 4), target[:]...)
	for _, o := range opts {
		b = append(b, o...)
	}
	return b
}

func naBody(flags uint8, target IPv6, opts ...[]byte) []byte {
	b := nsBody(target, opts...)
	b[0] = flags
	return b
}

// ns is a Neighbor Solicitation from (srcMAC, src) for target; with the source link-layer
// option unless src is :: or noOpt.
func ns(dstMAC, srcMAC MAC, src, dst, target IPv6, opts ...[]byte) ndMsg {
	return ndMsg{dstMAC: dstMAC, srcMAC: srcMAC, src: src, dst: dst, typ: ndNS, body: nsBody(target, opts...)}
}

// multicastNS is the NS a host sends to resolve target: to its solicited-node group, with
// the source link-layer option.
func multicastNS(srcMAC MAC, src, target IPv6) ndMsg {
	dst, dstMAC := solicitedNode(target)
	return ns(dstMAC, srcMAC, src, dst, target, llOpt(optSourceLL, srcMAC))
}

// dadNS is a duplicate address detection probe for target (RFC 4862 5.4.2): from ::,
// no source link-layer option, a nonce as Linux sends (RFC 7527).
func dadNS(srcMAC MAC, target IPv6) ndMsg {
	dst, dstMAC := solicitedNode(target)
	return ns(dstMAC, srcMAC, IPv6{}, dst, target, nonceOpt())
}

func na(dstMAC, srcMAC MAC, src, dst IPv6, flags uint8, target IPv6, opts ...[]byte) ndMsg {
	return ndMsg{dstMAC: dstMAC, srcMAC: srcMAC, src: src, dst: dst, typ: ndNA, body: naBody(flags, target, opts...)}
}

// expectedNA is the advertisement the switch must send for target from mac to (dstMAC,
// dst): R, S, O as given, hop limit 255, the target link-layer option mac, nothing else.
func expectedNA(dstMAC MAC, dst IPv6, mac MAC, target IPv6, flags uint8) []byte {
	return na(dstMAC, mac, target, dst, flags, target, llOpt(optTargetLL, mac)).frame()
}

// routerAdvert is an RA from src (hop limit 64, lifetime 1800 s) with a source
// link-layer option.
func routerAdvert(dstMAC, srcMAC MAC, src, dst IPv6) ndMsg {
	body := []byte{64, 0, 0x07, 0x08, 0, 0, 0, 0, 0, 0, 0, 0}
	return ndMsg{dstMAC: dstMAC, srcMAC: srcMAC, src: src, dst: dst, typ: ndRA, body: append(body, llOpt(optSourceLL, srcMAC)...)}
}

func routerSolicit(srcMAC MAC, src IPv6) ndMsg {
	return ndMsg{dstMAC: multicastMAC(ip6("ff02::2")), srcMAC: srcMAC, src: src, dst: ip6("ff02::2"), typ: ndRS,
		body: append(make([]byte, 4), llOpt(optSourceLL, srcMAC)...)}
}

// checkICMPv6Checksum recomputes the checksum of the ICMPv6 message in an Ethernet/IPv6
// frame with golang.org/x/net/icmp and compares it with the frame's.
func checkICMPv6Checksum(f []byte) error {
	if len(f) < 14+40+4 || binary.BigEndian.Uint16(f[12:]) != 0x86dd || f[14+6] != 58 {
		return fmt.Errorf("not Ethernet/IPv6/ICMPv6: %x", f)
	}
	plen := int(binary.BigEndian.Uint16(f[18:]))
	if 54+plen > len(f) {
		return fmt.Errorf("payload length %d beyond the frame (%d bytes)", plen, len(f))
	}
	m := append([]byte(nil), f[54:54+plen]...)
	got := binary.BigEndian.Uint16(m[2:])
	msg := icmp.Message{Type: ipv6.ICMPType(m[0]), Code: int(m[1]), Body: &icmp.RawBody{Data: m[4:]}}
	b, err := msg.Marshal(icmp.IPv6PseudoHeader(net.IP(f[22:38]), net.IP(f[38:54])))
	if err != nil {
		return err
	}
	if want := binary.BigEndian.Uint16(b[2:]); got != want {
		return fmt.Errorf("ICMPv6 checksum %#04x, want %#04x", got, want)
	}
	return nil
}
