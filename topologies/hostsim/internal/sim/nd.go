package sim

import (
	"net"
	"net/netip"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// Neighbor Advertisement flags (RFC 4861 §4.4), the first byte of the message body.
const (
	NARouter    = 0x80
	NASolicited = 0x40
	NAOverride  = 0x20
)

// ndHopLimit is what every ND message carries and a receiver insists on (RFC 4861 §7.1).
const ndHopLimit = 255

var allNodes = netip.MustParseAddr("ff02::1")

// LinkLocal is a host's link-local address from its MAC: fe80::/64 with the modified EUI-64
// interface identifier (RFC 4291 appendix A, RFC 2464 §5), as Linux forms it by default.
func LinkLocal(mac net.HardwareAddr) netip.Addr {
	a := [16]byte{0: 0xfe, 1: 0x80}
	copy(a[8:], []byte{mac[0] ^ 0x02, mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5]})
	return netip.AddrFrom16(a)
}

// SolicitedNode is the solicited-node multicast address of a (RFC 4291 §2.7.1).
func SolicitedNode(a netip.Addr) netip.Addr {
	b := a.As16()
	return netip.AddrFrom16([16]byte{0: 0xff, 1: 0x02, 11: 0x01, 12: 0xff, 13: b[13], 14: b[14], 15: b[15]})
}

// MulticastMAC is the Ethernet group of an IPv6 multicast address (RFC 2464 §7).
func MulticastMAC(a netip.Addr) net.HardwareAddr {
	b := a.As16()
	return net.HardwareAddr{0x33, 0x33, b[12], b[13], b[14], b[15]}
}

func icmp6Frame(srcMAC, dstMAC net.HardwareAddr, src, dst netip.Addr, hopLimit uint8, typ uint8,
	body ...gopacket.SerializableLayer) ([]byte, error) {
	ip := &layers.IPv6{Version: 6, HopLimit: hopLimit, NextHeader: layers.IPProtocolICMPv6, SrcIP: src.AsSlice(), DstIP: dst.AsSlice()}
	icmp := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(typ, 0)}
	if err := icmp.SetNetworkLayerForChecksum(ip); err != nil {
		return nil, err
	}
	return serialize(append([]gopacket.SerializableLayer{
		&layers.Ethernet{SrcMAC: srcMAC, DstMAC: dstMAC, EthernetType: layers.EthernetTypeIPv6}, ip, icmp}, body...)...)
}

// NSFrame is the multicast Neighbor Solicitation a host sends to resolve target: to target's
// solicited-node group, with the source link-layer option (none from the unspecified address, RFC 4861 §4.3).
func NSFrame(srcMAC net.HardwareAddr, src, target netip.Addr) ([]byte, error) {
	group := SolicitedNode(target)
	ns := &layers.ICMPv6NeighborSolicitation{TargetAddress: target.AsSlice()}
	if !src.IsUnspecified() {
		ns.Options = layers.ICMPv6Options{{Type: layers.ICMPv6OptSourceAddress, Data: srcMAC}}
	}
	return icmp6Frame(srcMAC, MulticastMAC(group), src, group, ndHopLimit, layers.ICMPv6TypeNeighborSolicitation, ns)
}

// NAFrame is a Neighbor Advertisement for target from srcMAC, with the target link-layer option.
func NAFrame(srcMAC, dstMAC net.HardwareAddr, dst, target netip.Addr, flags uint8) ([]byte, error) {
	na := &layers.ICMPv6NeighborAdvertisement{Flags: flags, TargetAddress: target.AsSlice(),
		Options: layers.ICMPv6Options{{Type: layers.ICMPv6OptTargetAddress, Data: srcMAC}}}
	return icmp6Frame(srcMAC, dstMAC, target, dst, ndHopLimit, layers.ICMPv6TypeNeighborAdvertisement, na)
}

// Echo6Reply answers an ICMPv6 echo request (RFC 4443 §4.2): same identifier, sequence and data,
// from the address the request was sent to.
func Echo6Reply(srcMAC, dstMAC net.HardwareAddr, ip *layers.IPv6, echo *layers.ICMPv6Echo) ([]byte, error) {
	src, _ := netip.AddrFromSlice(ip.DstIP)
	dst, _ := netip.AddrFromSlice(ip.SrcIP)
	return icmp6Frame(srcMAC, dstMAC, src, dst, 64, layers.ICMPv6TypeEchoReply,
		&layers.ICMPv6Echo{Identifier: echo.Identifier, SeqNumber: echo.SeqNumber}, gopacket.Payload(echo.Payload))
}

// linkLayerOption is the link-layer address an ND message carries in an option of type t, or nil.
func linkLayerOption(opts layers.ICMPv6Options, t layers.ICMPv6Opt) net.HardwareAddr {
	for _, o := range opts {
		if o.Type == t && len(o.Data) == 6 {
			return net.HardwareAddr(o.Data)
		}
	}
	return nil
}
