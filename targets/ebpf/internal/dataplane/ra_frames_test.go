package dataplane

import "encoding/binary"

// Frame builders for the outside switch: IPv4 with a chosen protocol, UDP, IKE and ESP,
// with consistent IPv4 and UDP lengths unless a test overrides them.

// ipv4Packet is an Ethernet frame carrying IPv4 (no options) with payload, padded to 60.
func ipv4Packet(dst, src MAC, srcIP, dstIP IPv4, proto byte, payload []byte) []byte {
	h := make([]byte, 20)
	h[0] = 0x45
	binary.BigEndian.PutUint16(h[2:], uint16(20+len(payload)))
	h[8] = 64
	h[9] = proto
	copy(h[12:], srcIP[:])
	copy(h[16:], dstIP[:])
	return pad(ethFrame(dst, src, 0x0800, append(h, payload...)))
}

func udp(sport, dport uint16, payload []byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, sport)
	b = binary.BigEndian.AppendUint16(b, dport)
	b = binary.BigEndian.AppendUint16(b, uint16(8+len(payload)))
	b = binary.BigEndian.AppendUint16(b, 0)
	return append(b, payload...)
}

// ikeHeader is a 28-byte IKEv2 header (RFC 7296, 3.1) with the given SPIs and flags,
// exchange IKE_AUTH (35), and 8 bytes of body behind it.
func ikeHeader(spiI, spiR uint64, flags byte) []byte {
	b := binary.BigEndian.AppendUint64(nil, spiI)
	b = binary.BigEndian.AppendUint64(b, spiR)
	b = append(b, 46, 0x20, 35, flags)
	b = binary.BigEndian.AppendUint32(b, 1)
	b = binary.BigEndian.AppendUint32(b, 36)
	return append(b, make([]byte, 8)...)
}

// espHeader is an ESP header (SPI, sequence number) and 8 bytes of ciphertext.
func espHeader(spi uint32) []byte {
	b := binary.BigEndian.AppendUint32(nil, spi)
	b = binary.BigEndian.AppendUint32(b, 1)
	return append(b, 0xde, 0xad, 0xbe, 0xef, 0xde, 0xad, 0xbe, 0xef)
}

const (
	ikeFlagInitiator = 0x08
	ipProtoICMP      = 1
	ipProtoUDP       = 17
	ipProtoESP       = 50
)

// nonESPMarker is the four zero bytes in front of IKE on UDP 4500.
var nonESPMarker = []byte{0, 0, 0, 0}

// withIPv4 returns f with its IPv4 header changed by fn (offsets from the IPv4 header).
func withIPv4(f []byte, fn func(h []byte)) []byte {
	out := append([]byte(nil), f...)
	fn(out[14:34])
	return out
}
