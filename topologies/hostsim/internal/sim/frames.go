package sim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// Frame sizes follow RFC 2544: frame_bytes counts the Ethernet FCS, which the NIC (here the veth)
// adds, so FCSBytes less go through the socket.
const (
	FCSBytes      = 4
	MinFrameBytes = 64
	MaxFrameBytes = 1518
	headerBytes   = 14 + 20 + 8 // Ethernet + IPv4 + UDP
	headerBytes6  = 14 + 40 + 8 // Ethernet + IPv6 + UDP
)

// The test payload: magic, run, flow, seq, tx timestamp (CLOCK_MONOTONIC ns). 18 bytes, so a
// 64-byte frame (60 on the wire) carries it; the rest of a larger frame is zeros.
const (
	payloadMagic = 0x5347 // "SG"
	PayloadBytes = 18
	// offsets into the payload
	offSeq = 6
	offTS  = 10
)

// MinFrameBytes6 is the smallest test frame to an IPv6 destination (its headers and the payload, FCS included).
const MinFrameBytes6 = headerBytes6 + PayloadBytes + FCSBytes

var serializeOpts = gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}

func serialize(ls ...gopacket.SerializableLayer) ([]byte, error) {
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, serializeOpts, ls...); err != nil {
		return nil, err
	}
	out := buf.Bytes()
	if len(out) < 60 { // Ethernet's minimum without FCS: pad as a NIC would
		out = append(out, make([]byte, 60-len(out))...)
	}
	return out, nil
}

// ARPFrame is an ARP request (op 1, to broadcast) or reply (op 2, to dstMAC) as a Linux host sends it.
func ARPFrame(op uint16, srcMAC net.HardwareAddr, srcIP netip.Addr, dstMAC net.HardwareAddr, dstIP netip.Addr) ([]byte, error) {
	ethDst, arpDst := dstMAC, dstMAC
	if op == layers.ARPRequest {
		ethDst, arpDst = layers.EthernetBroadcast, net.HardwareAddr{0, 0, 0, 0, 0, 0}
	}
	s, d := srcIP.As4(), dstIP.As4()
	return serialize(
		&layers.Ethernet{SrcMAC: srcMAC, DstMAC: ethDst, EthernetType: layers.EthernetTypeARP},
		&layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6,
			ProtAddressSize: 4, Operation: op, SourceHwAddress: srcMAC, SourceProtAddress: s[:],
			DstHwAddress: arpDst, DstProtAddress: d[:]})
}

// EchoReply answers an ICMP echo request: same id, sequence and data.
func EchoReply(srcMAC, dstMAC net.HardwareAddr, ip *layers.IPv4, icmp *layers.ICMPv4) ([]byte, error) {
	return serialize(
		&layers.Ethernet{SrcMAC: srcMAC, DstMAC: dstMAC, EthernetType: layers.EthernetTypeIPv4},
		&layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolICMPv4, SrcIP: ip.DstIP, DstIP: ip.SrcIP,
			Id: ip.Id, Flags: layers.IPv4DontFragment},
		&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(layers.ICMPv4TypeEchoReply, 0), Id: icmp.Id, Seq: icmp.Seq},
		gopacket.Payload(icmp.Payload))
}

// Template is one flow's frame with a zero seq and timestamp; Stamp fills them in a copy.
type Template struct {
	frame   []byte
	payload int    // offset of the test payload (behind the UDP header)
	csum0   uint16 // the UDP checksum over the zero fields, updated incrementally by Stamp
}

// NewTemplate builds a UDP frame of frameBytes (FCS included) from src to dst through gwMAC;
// IPv4 or IPv6 as src and dst are (both the same family).
func NewTemplate(frameBytes int, srcMAC, gwMAC net.HardwareAddr, src, dst netip.Addr, srcPort, dstPort uint16,
	run, flow uint16) (*Template, error) {
	if src.Is4() != dst.Is4() || !src.IsValid() || !dst.IsValid() {
		return nil, fmt.Errorf("source %s and destination %s are not of one address family", src, dst)
	}
	headers, minBytes := headerBytes, MinFrameBytes
	if src.Is6() {
		headers, minBytes = headerBytes6, MinFrameBytes6
	}
	if frameBytes < minBytes || frameBytes > MaxFrameBytes {
		return nil, fmt.Errorf("frame_bytes %d is outside %d-%d (to %s)", frameBytes, minBytes, MaxFrameBytes, dst)
	}
	payload := make([]byte, frameBytes-FCSBytes-headers)
	binary.BigEndian.PutUint16(payload[0:], payloadMagic)
	binary.BigEndian.PutUint16(payload[2:], run)
	binary.BigEndian.PutUint16(payload[4:], flow)
	udp := &layers.UDP{SrcPort: layers.UDPPort(srcPort), DstPort: layers.UDPPort(dstPort)}
	var ip gopacket.SerializableLayer
	ethType := layers.EthernetTypeIPv4
	if src.Is4() {
		ip4 := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: src.AsSlice(), DstIP: dst.AsSlice(),
			Flags: layers.IPv4DontFragment}
		if err := udp.SetNetworkLayerForChecksum(ip4); err != nil {
			return nil, err
		}
		ip = ip4
	} else {
		ip6 := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolUDP, SrcIP: src.AsSlice(), DstIP: dst.AsSlice()}
		if err := udp.SetNetworkLayerForChecksum(ip6); err != nil {
			return nil, err
		}
		ip, ethType = ip6, layers.EthernetTypeIPv6
	}
	frame, err := serialize(&layers.Ethernet{SrcMAC: srcMAC, DstMAC: gwMAC, EthernetType: ethType}, ip, udp,
		gopacket.Payload(payload))
	if err != nil {
		return nil, err
	}
	return &Template{frame: frame, payload: headers, csum0: binary.BigEndian.Uint16(frame[headers-2:])}, nil
}

// Len is the frame's length on the wire (without FCS).
func (t *Template) Len() int { return len(t.frame) }

// Stamp writes the template into dst with seq and ts, fixing the UDP checksum (RFC 1624).
func (t *Template) Stamp(dst []byte, seq uint32, ts uint64) []byte {
	dst = append(dst[:0], t.frame...)
	seqAt, tsAt := t.payload+offSeq, t.payload+offTS
	binary.BigEndian.PutUint32(dst[seqAt:], seq)
	binary.BigEndian.PutUint64(dst[tsAt:], ts)
	sum := uint32(^t.csum0)
	for off := seqAt; off < tsAt+8; off += 2 {
		sum += uint32(binary.BigEndian.Uint16(dst[off:]))
	}
	for sum > 0xffff {
		sum = (sum & 0xffff) + (sum >> 16)
	}
	c := ^uint16(sum)
	if c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(dst[t.payload-2:], c)
	return dst
}

// Probe is a received test payload.
type Probe struct {
	Run, Flow uint16
	Seq       uint32
	TS        uint64
}

// ParseProbe reads a test payload; ok is false when the UDP payload is not ours.
func ParseProbe(payload []byte) (Probe, bool) {
	if len(payload) < PayloadBytes || binary.BigEndian.Uint16(payload) != payloadMagic {
		return Probe{}, false
	}
	return Probe{Run: binary.BigEndian.Uint16(payload[2:]), Flow: binary.BigEndian.Uint16(payload[4:]),
		Seq: binary.BigEndian.Uint32(payload[6:]), TS: binary.BigEndian.Uint64(payload[10:])}, true
}

// Parser decodes what a host's NIC hands up: Ethernet, then ARP, IPv4 with ICMP or UDP, or IPv6
// with ICMPv6 (Neighbor Solicitation and Advertisement, echo) or UDP.
type Parser struct {
	Eth     layers.Ethernet
	ARP     layers.ARP
	IP      layers.IPv4
	ICMP    layers.ICMPv4
	IP6     layers.IPv6
	ICMP6   layers.ICMPv6
	NS      layers.ICMPv6NeighborSolicitation
	NA      layers.ICMPv6NeighborAdvertisement
	Echo6   layers.ICMPv6Echo
	UDP     layers.UDP
	Payload gopacket.Payload
	parser  *gopacket.DecodingLayerParser
	Decoded []gopacket.LayerType
}

func NewParser() *Parser {
	p := &Parser{}
	p.parser = gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &p.Eth, &p.ARP, &p.IP, &p.ICMP, &p.IP6,
		&p.ICMP6, &p.NS, &p.NA, &p.Echo6, &p.UDP, &p.Payload)
	p.parser.IgnoreUnsupported = true // TCP, MLD, RA ...: not malformed, just not for us
	p.Decoded = make([]gopacket.LayerType, 0, 8)
	return p
}

var (
	errBadIPChecksum     = errors.New("IPv4 header checksum mismatch")
	errBadICMPv6Checksum = errors.New("ICMPv6 checksum mismatch")
)

// Decode fills the layers; an error means the frame is malformed (truncated, bad header or checksum).
func (p *Parser) Decode(frame []byte) error {
	if err := p.parser.DecodeLayers(frame, &p.Decoded); err != nil {
		return err
	}
	if p.Has(layers.LayerTypeIPv4) {
		if p.IP.IHL < 5 || int(p.IP.IHL)*4 > len(p.IP.Contents) || checksum(p.IP.Contents) != 0 {
			return errBadIPChecksum
		}
	}
	if p.Has(layers.LayerTypeICMPv6) {
		if err := p.ICMP6.SetNetworkLayerForChecksum(&p.IP6); err != nil {
			return err
		}
		if err, v := p.ICMP6.VerifyChecksum(); err != nil || !v.Valid {
			return errBadICMPv6Checksum
		}
	}
	if p.Has(layers.LayerTypeARP) && (p.ARP.AddrType != layers.LinkTypeEthernet || p.ARP.Protocol != layers.EthernetTypeIPv4 ||
		p.ARP.HwAddressSize != 6 || p.ARP.ProtAddressSize != 4) {
		return errors.New("ARP is not Ethernet/IPv4")
	}
	return nil
}

func (p *Parser) Has(t gopacket.LayerType) bool {
	for _, d := range p.Decoded {
		if d == t {
			return true
		}
	}
	return false
}

func checksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum > 0xffff {
		sum = (sum & 0xffff) + (sum >> 16)
	}
	return ^uint16(sum)
}
