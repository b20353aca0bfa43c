package dataplane

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"

	"supergw/targets/ebpf/internal/bucket"
	"supergw/targets/ebpf/internal/p4constants"
)

// BPF_PROG_RUN tests of the remote-access stages (bpf/supergw_ra.h): one row per line of
// docs/pipeline-contract.md's "Outside switch" and "Client pools" sections. The rig's
// ports are re-roled: h1, h2 become uplinks (routers behind them), g1, g2 the gateways'
// outside ports.

var (
	ipP        = ip4("203.0.113.1")
	macPub     = mac("02:50:00:00:00:01")
	macRtr     = mac("02:ee:00:00:00:01") // the router behind uplink h1
	macRtr2    = mac("02:ee:00:00:00:02") // another router, behind uplink h2
	macNew     = mac("02:ee:00:00:00:99") // never learned
	macUnknown = mac("02:99:00:00:00:01") // in no table
	ipRtr      = ip4("203.0.113.254")
	ipClient   = ip4("198.51.100.7") // not pinned
	ipPinned   = ip4("198.51.100.8") // pinned to g1
	ipGW1Wan   = ip4("192.0.2.11")

	label1 = DispatchKey{Value: 1 << 56, Mask: 0xff << 56, Priority: 10}
	label2 = DispatchKey{Value: 2 << 56, Mask: 0xff << 56, Priority: 10}
	range1 = DispatchKey{Value: 0xc1000000, Mask: 0xff000000, Priority: 1}
	range2 = DispatchKey{Value: 0xc2000000, Mask: 0xff000000, Priority: 1}
	pinKey = DispatchKey{Value: uint64(binary.BigEndian.Uint32(ipPinned[:]))}
)

func clientBucket(t testing.TB, ip IPv4) uint16 {
	t.Helper()
	b, err := bucket.OfClient(ip, kBuckets, crcHash)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// outside turns the rig into an outside switch with two gateways.
func outside(t testing.TB) func(*EBPF) error {
	return func(e *EBPF) error {
		for _, err := range []error{
			e.SetPortRole(portH1, role(t, "UPLINK")),
			e.SetPortRole(portH2, role(t, "UPLINK")),
			e.SetPortRole(portG1, role(t, "GATEWAY_OUTSIDE")),
			e.SetPortRole(portG2, role(t, "GATEWAY_OUTSIDE")),
			e.SetRAConfig(RAConfig{Configured: true, PublicIP: ipP, PublicMAC: macPub}),
			e.SetFloodGroup(uint16(p4const(t, "GATEWAY_OUTSIDE_FLOOD_GROUP")), []uint16{portG1, portG2}),
			e.SetFloodGroup(uint16(p4const(t, "UPLINK_FLOOD_GROUP")), []uint16{portH1, portH2}),
			e.SetL2(macRtr, portH1, role(t, "UPLINK")),
			e.SetL2(macRtr2, portH2, role(t, "UPLINK")),
			e.SetL2(macGW1, portG1, role(t, "GATEWAY_OUTSIDE")),
			e.SetL2(macGW2, portG2, role(t, "GATEWAY_OUTSIDE")),
			e.SetLearned(macRtr, portH1),
			e.SetLearned(macRtr2, portH2),
			e.SetDispatchEntry(IKESPILabels, label1, Gateway{portG1, macGW1}),
			e.SetDispatchEntry(IKESPILabels, label2, Gateway{portG2, macGW2}),
			e.SetDispatchEntry(ESPSPIRanges, range1, Gateway{portG1, macGW1}),
			e.SetDispatchEntry(ESPSPIRanges, range2, Gateway{portG2, macGW2}),
			e.SetDispatchEntry(ClientPins, pinKey, Gateway{portG1, macGW1}),
			e.SetBucket(clientBucket(t, ipClient), portG2, macGW2),
		} {
			if err != nil {
				return err
			}
		}
		return nil
	}
}

// and runs the outside set-up, then more.
func and(first func(*EBPF) error, more ...func(*EBPF) error) func(*EBPF) error {
	return func(e *EBPF) error {
		if err := first(e); err != nil {
			return err
		}
		for _, m := range more {
			if err := m(e); err != nil {
				return err
			}
		}
		return nil
	}
}

func dispatchCounter(t DispatchTable, k DispatchKey) func(*EBPF) (Counter, error) {
	return func(e *EBPF) (Counter, error) { return e.DispatchCounter(t, k) }
}

func bucketCounter(b uint16) func(*EBPF) (Counter, error) {
	return func(e *EBPF) (Counter, error) { return e.BucketCounter(b) }
}

func TestOutsideDatapath(t *testing.T) {
	r := newRig(t)
	out := outside(t)
	cb := clientBucket(t, ipClient)
	toP := func(src IPv4, proto byte, payload []byte) []byte {
		return ipv4Packet(macPub, macRtr, src, ipP, proto, payload)
	}
	ikeInit := toP(ipClient, ipProtoUDP, udp(500, 500, ikeHeader(0x1111, 0, ikeFlagInitiator)))
	ikeInitPinned := toP(ipPinned, ipProtoUDP, udp(500, 500, ikeHeader(0x1111, 0, ikeFlagInitiator)))
	ikeAuth := toP(ipClient, ipProtoUDP, udp(500, 500, ikeHeader(0x1111, 1<<56|0xabc, ikeFlagInitiator)))
	ikeNATT := toP(ipClient, ipProtoUDP, udp(4500, 4500, append(nonESPMarker, ikeHeader(0x2222, 2<<56|5, ikeFlagInitiator)...)))
	// The gateway initiated this IKE SA (its rekey): the client answers with flag I clear,
	// and the gateway's SPI (label 2) is the initiator's; the responder SPI is the client's.
	ikeGatewayInitiated := toP(ipClient, ipProtoUDP, udp(4500, 4500, append(nonESPMarker, ikeHeader(2<<56|9, 1<<56|0x77, 0x20)...)))
	ikeUnlabelled := toP(ipClient, ipProtoUDP, udp(500, 500, ikeHeader(0x1111, 3<<56|1, ikeFlagInitiator)))
	esp := toP(ipClient, ipProtoESP, espHeader(0xc1000005))
	espNATT := toP(ipClient, ipProtoUDP, udp(4500, 4500, espHeader(0xc2000007)))
	espUnknown := toP(ipClient, ipProtoESP, espHeader(0xc3000001))
	keepalive := toP(ipClient, ipProtoUDP, udp(4500, 4500, []byte{0xff}))
	icmp := toP(ipClient, ipProtoICMP, []byte{8, 0, 0xf7, 0xff, 0, 0, 0, 0})
	fragment := withIPv4(esp, func(h []byte) { binary.BigEndian.PutUint16(h[6:], 185) }) // offset 1480 bytes
	firstFragment := withIPv4(esp, func(h []byte) { binary.BigEndian.PutUint16(h[6:], 0x2000) })
	options := withIPv4(ikeAuth, func(h []byte) { h[0] = 0x46 })
	fromGW := func(dst MAC, src IPv4, payload []byte) []byte {
		return ipv4Packet(dst, macGW1, src, ipClient, ipProtoUDP, payload)
	}
	gwFromP := fromGW(macRtr, ipP, udp(4500, 4500, espHeader(0x11)))
	gwFromWan := fromGW(macRtr, ipGW1Wan, udp(500, 500, ikeHeader(5, 6, ikeFlagInitiator)))
	gwToUnknown := fromGW(macUnknown, ipP, udp(4500, 4500, espHeader(0x11)))
	siteToSite := ipv4Packet(macGW1, macRtr, ip4("198.51.100.99"), ipGW1Wan, ipProtoUDP, udp(500, 500, ikeHeader(7, 0, ikeFlagInitiator)))
	arpForP := arpRequest(macRtr, ipRtr, ipP)
	arpForP2 := pad(ethFrame(macRtr, macPub, 0x0806, arpBody(arpFields{op: 2, sha: macPub, spa: ipP, tha: macRtr, tpa: ipRtr})))
	cases := []dpCase{
		// ra_settings
		{name: "uplink before ra_settings is RA_NOT_CONFIGURED", setup: and(out, func(e *EBPF) error { return e.SetRAConfig(RAConfig{}) }),
			port: portH1, frame: ikeInit, verdict: tcActShot, drop: "RA_NOT_CONFIGURED"},
		{name: "gateway outside port before ra_settings is RA_NOT_CONFIGURED", setup: and(out, func(e *EBPF) error { return e.SetRAConfig(RAConfig{}) }),
			port: portG1, frame: gwFromWan, verdict: tcActShot, drop: "RA_NOT_CONFIGURED"},
		{name: "RA_NOT_CONFIGURED wins over malformed ARP", setup: and(out, func(e *EBPF) error { return e.SetRAConfig(RAConfig{}) }),
			port: portH1, frame: pad(ethFrame(broadcast, macRtr, 0x0806, []byte{0, 1})), verdict: tcActShot, drop: "RA_NOT_CONFIGURED"},
		{name: "NOT_CONFIGURED wins over RA_NOT_CONFIGURED", noConfig: true, setup: and(out, func(e *EBPF) error { return e.SetRAConfig(RAConfig{}) }),
			port: portH1, frame: ikeInit, verdict: tcActShot, drop: "NOT_CONFIGURED"},
		// ARP for IP_P
		{name: "uplink asks for IP_P: answered with the public MAC", setup: out, port: portH1, frame: arpForP, verdict: tcActRedirect, out: arpForP2, tx: []uint16{portH1}},
		{name: "uplink ARP for a gateway's WAN address floods to the gateways", setup: out, port: portH1, frame: arpRequest(macRtr, ipRtr, ipGW1Wan), verdict: tcActShot, tx: []uint16{portG1, portG2}},
		{name: "uplink ARP reply to a gateway is L2", setup: out, port: portH1, frame: arpReply(macGW1, macRtr, ipRtr, macGW1, ipGW1Wan), verdict: tcActRedirect, tx: []uint16{portG1}},
		{name: "gateway ARP claiming IP_P", setup: out, port: portG1, frame: arpRequest(macGW1, ipP, ipRtr), verdict: tcActShot, drop: "ARP_SPOOF_PUBLIC_IP"},
		{name: "gateway gratuitous ARP reply for IP_P", setup: out, port: portG2, frame: arpReply(broadcast, macGW2, ipP, broadcast, ipP), verdict: tcActShot, drop: "ARP_SPOOF_PUBLIC_IP"},
		{name: "gateway ARP for the router goes to the uplinks", setup: out, port: portG1, frame: arpRequest(macGW1, ipGW1Wan, ipRtr), verdict: tcActShot, tx: []uint16{portH1, portH2}},
		{name: "gateway ARP reply to the router", setup: out, port: portG1, frame: arpReply(macRtr, macGW1, ipGW1Wan, macRtr, ipRtr), verdict: tcActRedirect, tx: []uint16{portH1}},
		// IKE
		{name: "IKE_SA_INIT of a new client: bucket of its address", setup: out, port: portH1, frame: ikeInit, verdict: tcActRedirect,
			out: withMACs(ikeInit, &macGW2, nil), tx: []uint16{portG2}, counter: bucketCounter(cb)},
		{name: "IKE_SA_INIT of a pinned client: its pin", setup: out, port: portH1, frame: ikeInitPinned, verdict: tcActRedirect,
			out: withMACs(ikeInitPinned, &macGW1, nil), tx: []uint16{portG1}, counter: dispatchCounter(ClientPins, pinKey)},
		{name: "pin moved to g2", setup: and(out, func(e *EBPF) error { return e.SetDispatchEntry(ClientPins, pinKey, Gateway{portG2, macGW2}) }),
			port: portH1, frame: ikeInitPinned, verdict: tcActRedirect, out: withMACs(ikeInitPinned, &macGW2, nil), tx: []uint16{portG2}, counter: dispatchCounter(ClientPins, pinKey)},
		{name: "IKE on 500 with a responder SPI: its label", setup: out, port: portH1, frame: ikeAuth, verdict: tcActRedirect,
			out: withMACs(ikeAuth, &macGW1, nil), tx: []uint16{portG1}, counter: dispatchCounter(IKESPILabels, label1)},
		{name: "IKE on 4500 behind the non-ESP marker: its label", setup: out, port: portH1, frame: ikeNATT, verdict: tcActRedirect,
			out: withMACs(ikeNATT, &macGW2, nil), tx: []uint16{portG2}, counter: dispatchCounter(IKESPILabels, label2)},
		{name: "IKE SA the gateway initiated: the initiator SPI's label", setup: out, port: portH1, frame: ikeGatewayInitiated, verdict: tcActRedirect,
			out: withMACs(ikeGatewayInitiated, &macGW2, nil), tx: []uint16{portG2}, counter: dispatchCounter(IKESPILabels, label2)},
		{name: "IKE with a label no gateway owns", setup: out, port: portH1, frame: ikeUnlabelled, verdict: tcActShot, drop: "IKE_SPI_UNKNOWN"},
		{name: "a labelled IKE message of a pinned client still goes by label", setup: out, port: portH1,
			frame: toP(ipPinned, ipProtoUDP, udp(500, 500, ikeHeader(1, 2<<56, ikeFlagInitiator))), verdict: tcActRedirect,
			out: withMACs(toP(ipPinned, ipProtoUDP, udp(500, 500, ikeHeader(1, 2<<56, ikeFlagInitiator))), &macGW2, nil), tx: []uint16{portG2}},
		{name: "higher priority label wins", setup: and(out, func(e *EBPF) error {
			return e.SetDispatchEntry(IKESPILabels, DispatchKey{Value: 1 << 56, Mask: 0xff<<56 | 0xf000, Priority: 20}, Gateway{portG2, macGW2})
		}), port: portH1, frame: ikeAuth, verdict: tcActRedirect, out: withMACs(ikeAuth, &macGW2, nil), tx: []uint16{portG2}},
		// ESP
		{name: "ESP: its SPI range", setup: out, port: portH1, frame: esp, verdict: tcActRedirect,
			out: withMACs(esp, &macGW1, nil), tx: []uint16{portG1}, counter: dispatchCounter(ESPSPIRanges, range1)},
		{name: "ESP in UDP 4500: its SPI range", setup: out, port: portH1, frame: espNATT, verdict: tcActRedirect,
			out: withMACs(espNATT, &macGW2, nil), tx: []uint16{portG2}, counter: dispatchCounter(ESPSPIRanges, range2)},
		{name: "ESP with an SPI no range holds", setup: out, port: portH1, frame: espUnknown, verdict: tcActShot, drop: "ESP_SPI_UNKNOWN"},
		{name: "a first fragment carries its ESP header", setup: out, port: portH1, frame: firstFragment, verdict: tcActRedirect,
			out: withMACs(firstFragment, &macGW1, nil), tx: []uint16{portG1}},
		{name: "ESP range pointing back at the uplink", setup: and(out, func(e *EBPF) error { return e.SetDispatchEntry(ESPSPIRanges, range1, Gateway{portH1, macGW1}) }),
			port: portH1, frame: esp, verdict: tcActShot, out: withMACs(esp, &macGW1, nil), drop: "HAIRPIN", counter: dispatchCounter(ESPSPIRanges, range1)},
		// Everything else to IP_P: pin, else hash.
		{name: "NAT-T keepalive: bucket of the address", setup: out, port: portH1, frame: keepalive, verdict: tcActRedirect,
			out: withMACs(keepalive, &macGW2, nil), tx: []uint16{portG2}, counter: bucketCounter(cb)},
		{name: "ICMP: bucket of the address", setup: out, port: portH1, frame: icmp, verdict: tcActRedirect, out: withMACs(icmp, &macGW2, nil), tx: []uint16{portG2}},
		{name: "ICMP of a pinned client: its pin", setup: out, port: portH1, frame: toP(ipPinned, ipProtoICMP, []byte{8, 0}), verdict: tcActRedirect,
			out: withMACs(toP(ipPinned, ipProtoICMP, []byte{8, 0}), &macGW1, nil), tx: []uint16{portG1}},
		{name: "a later fragment: bucket of the address", setup: out, port: portH1, frame: fragment, verdict: tcActRedirect, out: withMACs(fragment, &macGW2, nil), tx: []uint16{portG2}},
		{name: "IPv4 with options: bucket of the address", setup: out, port: portH1, frame: options, verdict: tcActRedirect, out: withMACs(options, &macGW2, nil), tx: []uint16{portG2}},
		{name: "UDP to another port of IP_P: bucket", setup: out, port: portH1, frame: toP(ipClient, ipProtoUDP, udp(500, 53, nil)), verdict: tcActRedirect,
			out: withMACs(toP(ipClient, ipProtoUDP, udp(500, 53, nil)), &macGW2, nil), tx: []uint16{portG2}},
		{name: "hash bucket without a gateway", setup: and(out, func(e *EBPF) error { return e.DeleteBucket(cb) }),
			port: portH1, frame: ikeInit, verdict: tcActShot, drop: "BUCKET_UNASSIGNED"},
		{name: "identity hash: bucket of the address's low bits", setup: and(out, func(e *EBPF) error {
			if err := e.SetDispatchConfig(DispatchConfig{Configured: true, GatewayIP: ipG, VMACBase: vmacBase, BucketMask: kBuckets - 1, BucketHash: p4constants.BucketHashIdentity}); err != nil {
				return err
			}
			return e.SetBucket(uint16(ipClient[3]), portG1, macGW1)
		}), port: portH1, frame: ikeInit, verdict: tcActRedirect, out: withMACs(ikeInit, &macGW1, nil), tx: []uint16{portG1}, counter: bucketCounter(uint16(ipClient[3]))},
		// Truncated IKE and ESP
		{name: "IKE on 500 shorter than its header (UDP length)", setup: out, port: portH1, frame: toP(ipClient, ipProtoUDP, udp(500, 500, ikeHeader(1, 1<<56, 8)[:27])), verdict: tcActShot, drop: "MALFORMED_IKE"},
		{name: "IKE frame cut inside the header", setup: out, port: portH1, frame: ikeAuth[:55], verdict: tcActShot, drop: "MALFORMED_IKE"},
		{name: "IKE on 4500 shorter than marker and header", setup: out, port: portH1, frame: toP(ipClient, ipProtoUDP, udp(4500, 4500, append(nonESPMarker, ikeHeader(1, 1<<56, 8)[:20]...))), verdict: tcActShot, drop: "MALFORMED_IKE"},
		{name: "two bytes on 4500", setup: out, port: portH1, frame: toP(ipClient, ipProtoUDP, udp(4500, 4500, []byte{1, 2})), verdict: tcActShot, drop: "MALFORMED_ESP"},
		{name: "two zero bytes on 4500 (padding looks like a marker)", setup: out, port: portH1, frame: toP(ipClient, ipProtoUDP, udp(4500, 4500, []byte{0, 0})), verdict: tcActShot, drop: "MALFORMED_ESP"},
		{name: "one byte on 4500 that is no keepalive", setup: out, port: portH1, frame: toP(ipClient, ipProtoUDP, udp(4500, 4500, []byte{0})), verdict: tcActShot, drop: "MALFORMED_ESP"},
		{name: "ESP in UDP shorter than SPI and sequence", setup: out, port: portH1, frame: toP(ipClient, ipProtoUDP, udp(4500, 4500, espHeader(0xc1000001)[:6])), verdict: tcActShot, drop: "MALFORMED_ESP"},
		{name: "ESP shorter than SPI and sequence (IPv4 length)", setup: out, port: portH1, frame: toP(ipClient, ipProtoESP, espHeader(0xc1000001)[:4]), verdict: tcActShot, drop: "MALFORMED_ESP"},
		{name: "ESP frame cut inside the header", setup: out, port: portH1, frame: esp[:40], verdict: tcActShot, drop: "MALFORMED_ESP"},
		// L2 on the outside
		{name: "site-to-site IKE to a gateway's WAN address is L2", setup: out, port: portH1, frame: siteToSite, verdict: tcActRedirect, tx: []uint16{portG1}},
		{name: "uplink to an unknown MAC floods to the gateways", setup: out, port: portH1, frame: ipv4Frame(macUnknown, macRtr, ipClient, ipGW1Wan), verdict: tcActShot, tx: []uint16{portG1, portG2}},
		{name: "uplink broadcast floods to the gateways", setup: out, port: portH2, frame: pad(ethFrame(broadcast, macRtr2, 0x88b5, nil)), verdict: tcActShot, tx: []uint16{portG1, portG2}},
		{name: "uplink to another uplink", setup: out, port: portH1, frame: ipv4Frame(macRtr2, macRtr, ipClient, ipGW1Wan), verdict: tcActShot, drop: "UPLINK_TO_UPLINK"},
		{name: "uplink to a MAC behind itself", setup: out, port: portH1, frame: ipv4Frame(macRtr, macRtr, ipClient, ipGW1Wan), verdict: tcActShot, drop: "HAIRPIN"},
		{name: "gateway from IP_P to the router: src := public MAC", setup: out, port: portG1, frame: gwFromP, verdict: tcActRedirect, out: withMACs(gwFromP, nil, &macPub), tx: []uint16{portH1}},
		{name: "gateway from its WAN address: src kept", setup: out, port: portG1, frame: gwFromWan, verdict: tcActRedirect, tx: []uint16{portH1}},
		{name: "gateway to an unknown MAC floods to the uplinks, src := public MAC", setup: out, port: portG1, frame: gwToUnknown, verdict: tcActShot,
			out: withMACs(gwToUnknown, nil, &macPub), tx: []uint16{portH1, portH2}},
		{name: "gateway to another gateway", setup: out, port: portG1, frame: fromGW(macGW2, ipGW1Wan, nil), verdict: tcActShot, drop: "GATEWAY_TO_GATEWAY"},
		{name: "gateway to a MAC behind its own port", setup: out, port: portG1, frame: fromGW(macGW1, ipGW1Wan, nil), verdict: tcActShot, drop: "GATEWAY_TO_GATEWAY"},
		{name: "gateway broadcast that is not ARP", setup: out, port: portG2, frame: pad(ethFrame(broadcast, macGW2, 0x88b5, nil)), verdict: tcActShot, drop: "GATEWAY_BROADCAST"},
		{name: "a gateway's outside port does not learn", setup: out, port: portG1, frame: ipv4Packet(macRtr, macNew, ipGW1Wan, ipClient, ipProtoICMP, nil), verdict: tcActRedirect, tx: []uint16{portH1}},
		// Learning on uplinks
		{name: "uplink learning: IPv4 digest carries no address", setup: out, port: portH1, frame: ipv4Frame(macGW1, macNew, ipClient, ipGW1Wan), verdict: tcActRedirect,
			tx: []uint16{portG1}, events: []Event{digest(macNew, portH1, IPv4{})}},
		{name: "uplink learning: ARP digest carries the sender address", setup: out, port: portH1, frame: arpRequest(macNew, ipRtr, ipGW1Wan), verdict: tcActShot,
			tx: []uint16{portG1, portG2}, events: []Event{digest(macNew, portH1, ipRtr)}},
		{name: "uplink learning: an ARP sender claiming IP_P is reported without it", setup: out, port: portH2, frame: arpRequest(macNew, ipP, ipP), verdict: tcActRedirect,
			out: pad(ethFrame(macNew, macPub, 0x0806, arpBody(arpFields{op: 2, sha: macPub, spa: ipP, tha: macNew, tpa: ipP}))), tx: []uint16{portH2},
			events: []Event{digest(macNew, portH2, IPv4{})}},
		{name: "role 5 is UNKNOWN_PORT", setup: func(e *EBPF) error { return e.SetPortRole(portH2, 5) }, port: portH2, frame: ikeInit, verdict: tcActShot, drop: "UNKNOWN_PORT"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { runCase(t, r, c) })
	}
}

func TestClientPoolsDatapath(t *testing.T) {
	r := newRig(t)
	vH1 := vmacOf(t, macH1, kBuckets, crcHash)
	pool := DispatchKey{Value: 0x0a5a0100, PrefixLen: 24} // 10.90.1.0/24
	wide := DispatchKey{Value: 0x0a5a0000, PrefixLen: 16} // 10.90.0.0/16
	withPool := func(e *EBPF) error { return e.SetDispatchEntry(ClientPools, pool, Gateway{portG2, macGW2}) }
	withWide := func(e *EBPF) error { return e.SetDispatchEntry(ClientPools, wide, Gateway{portG1, macGW1}) }
	toClient := ipv4Frame(vH1, macH1, ipH1, ip4("10.90.1.5"))
	toOther := ipv4Frame(vH1, macH1, ipH1, ip4("10.90.2.5"))
	cases := []dpCase{
		{name: "host to a client of a pool: the pool's gateway, not the bucket's", setup: withPool, port: portH1, frame: toClient, verdict: tcActRedirect,
			out: withMACs(toClient, &macGW2, nil), tx: []uint16{portG2}, counter: dispatchCounter(ClientPools, pool)},
		{name: "host to an address in no pool: bucket dispatch", setup: withPool, port: portH1, frame: toOther, verdict: tcActRedirect,
			out: withMACs(toOther, &macGW1, nil), tx: []uint16{portG1}, bucketHit: true},
		{name: "longest prefix wins", setup: and(withPool, withWide), port: portH1, frame: toClient, verdict: tcActRedirect,
			out: withMACs(toClient, &macGW2, nil), tx: []uint16{portG2}, counter: dispatchCounter(ClientPools, pool)},
		{name: "the shorter prefix catches the rest", setup: and(withPool, func(e *EBPF) error {
			return e.SetDispatchEntry(ClientPools, wide, Gateway{portG2, macGW2})
		}), port: portH1, frame: toOther, verdict: tcActRedirect, out: withMACs(toOther, &macGW2, nil), tx: []uint16{portG2}, counter: dispatchCounter(ClientPools, wide)},
		{name: "a non-IPv4 frame to a vmac goes by bucket even under 0.0.0.0/0", setup: func(e *EBPF) error { return e.SetDispatchEntry(ClientPools, DispatchKey{}, Gateway{portG2, macGW2}) },
			port: portH1, frame: pad(ethFrame(vH1, macH1, 0x88b5, nil)), verdict: tcActRedirect, out: withMACs(pad(ethFrame(vH1, macH1, 0x88b5, nil)), &macGW1, nil), tx: []uint16{portG1}, bucketHit: true},
		{name: "a frame to no vmac never meets the pools", setup: func(e *EBPF) error { return e.SetDispatchEntry(ClientPools, DispatchKey{}, Gateway{portG2, macGW2}) },
			port: portH1, frame: ipv4Frame(macH2, macH1, ipH1, ip4("10.90.1.5")), verdict: tcActRedirect, tx: []uint16{portH2}},
		{name: "pool pointing back at the host's port", setup: func(e *EBPF) error { return e.SetDispatchEntry(ClientPools, pool, Gateway{portH1, macGW2}) },
			port: portH1, frame: toClient, verdict: tcActShot, out: withMACs(toClient, &macGW2, nil), drop: "HAIRPIN"},
		{name: "pool deleted: bucket dispatch again", setup: and(withPool, func(e *EBPF) error { return e.DeleteDispatchEntry(ClientPools, pool) }),
			port: portH1, frame: toClient, verdict: tcActRedirect, out: withMACs(toClient, &macGW1, nil), tx: []uint16{portG1}, bucketHit: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { runCase(t, r, c) })
	}
}

// clientVector is one address of p4src/vectors/client-*.json with the buckets BMv2 computed.
type clientVector struct {
	IP          string `json:"ip"`
	BucketK64   uint16 `json:"bucket_k64"`
	BucketK256  uint16 `json:"bucket_k256"`
	BucketK4096 uint16 `json:"bucket_k4096"`
}

// The eBPF client-address hashes against every BMv2 vector, for K = 64, 256 and 4096:
// every bucket's gateway MAC names the bucket, so an IKE_SA_INIT's rewritten destination
// says where it went.
func TestClientBucketVectorsInDatapath(t *testing.T) {
	r := newRig(t)
	for h, name := range map[p4constants.BucketHash]string{p4constants.BucketHashCRC32: "client-crc32.json", p4constants.BucketHashIdentity: "client-identity.json"} {
		raw, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "p4src", "vectors", name))
		if err != nil {
			t.Fatal(err)
		}
		var f struct {
			Vectors []clientVector `json:"vectors"`
		}
		if err := json.Unmarshal(raw, &f); err != nil || len(f.Vectors) == 0 {
			t.Fatalf("%s: %v, %d vectors", name, err, len(f.Vectors))
		}
		for _, k := range []int{64, 256, 4096} {
			t.Run(fmt.Sprintf("%v/K=%d", h, k), func(t *testing.T) {
				e := r.pipeline(t, true)
				must(t, outside(t)(e))
				must(t, e.SetDispatchConfig(DispatchConfig{Configured: true, GatewayIP: ipG, VMACBase: vmacBase, BucketMask: uint16(k - 1), BucketHash: h}))
				must(t, e.DeleteDispatchEntry(ClientPins, pinKey))
				for b := 0; b < k; b++ {
					must(t, e.SetBucket(uint16(b), portG1, MAC{2, 0xbb, 0, 0, byte(b >> 8), byte(b)}))
				}
				for _, v := range f.Vectors {
					want := map[int]uint16{64: v.BucketK64, 256: v.BucketK256, 4096: v.BucketK4096}[k]
					frame := ipv4Packet(macPub, macRtr, IPv4(net.ParseIP(v.IP).To4()), ipP, ipProtoUDP, udp(500, 500, ikeHeader(1, 0, ikeFlagInitiator)))
					res := r.runOn(t, e, r.ifindex[portH1], frame)
					if res.verdict != tcActRedirect || !bytes.Equal(res.out[0:4], []byte{2, 0xbb, 0, 0}) {
						t.Fatalf("%s: verdict %d, out %x", v.IP, res.verdict, res.out)
					}
					if got := binary.BigEndian.Uint16(res.out[4:6]); got != want {
						t.Errorf("%s: bucket %d, want %d", v.IP, got, want)
					}
				}
			})
		}
	}
}
