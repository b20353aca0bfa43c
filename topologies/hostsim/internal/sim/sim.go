// Package sim emulates many hosts behind one Ethernet port: ARP for the gateway IP (and, dual
// stack, Neighbor Discovery for the gateway's IPv6 address), ARP, NS and ICMP/ICMPv6 echo answers,
// per-host counters, and a paced UDP traffic generator whose receiver counts loss, reordering,
// one-way latency and gaps per flow (topologies/hostsim/README.md).
package sim

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gopacket/gopacket/layers"
)

// Link sends and receives whole Ethernet frames (without FCS).
type Link interface {
	// Send writes the frames, returning how many went out.
	Send(frames [][]byte) (int, error)
	// Recv fills bufs[i][:lens[i]] for the returned count; 0 with a nil error after a timeout.
	Recv(bufs [][]byte, lens []int) (int, error)
	Close() error
}

// Config names the emulated hosts: host k has FirstIP+k and FirstMAC+k*MACStep; dual stack
// (FirstIP6 set) also FirstIP6+k and the link-local address of its MAC (LinkLocal).
type Config struct {
	GatewayIP netip.Addr
	// GatewayIP6 is the router's IPv6 address the hosts resolve with Neighbor Discovery and send
	// off-link IPv6 through (the source of the Router Advertisements, LL_G); set with FirstIP6.
	GatewayIP6 netip.Addr
	// FirstIP6 is host 0's global IPv6 address, in a /64 (invalid: the hosts speak IPv4 only).
	FirstIP6 netip.Addr
	FirstIP  netip.Addr
	FirstMAC net.HardwareAddr
	// MACStep is the distance between two hosts' MACs (0 means 1); the clustering paper's
	// §4.3 hosts 00:00:03:00:18:00, 19:00, ... are 256 apart.
	MACStep   uint64
	Count     int
	PrefixLen int
	// Clock is CLOCK_MONOTONIC in ns (shared by every hostsim on the machine).
	Clock func() uint64
}

// MaxHosts is one switch's host tables (p4src/common/size.p4: 65,536 hosts): a whole site on one port.
const MaxHosts = 65536

// Host is one emulated host and its counters.
type Host struct {
	Index int
	IP    netip.Addr
	MAC   net.HardwareAddr
	// IP6 and LinkLocal are the host's IPv6 addresses (invalid when the hosts speak IPv4 only).
	IP6, LinkLocal netip.Addr
	gwMAC          atomic.Pointer[net.HardwareAddr]
	gwMAC6         atomic.Pointer[net.HardwareAddr]
	txPackets      atomic.Uint64
	txBytes        atomic.Uint64
	firstTx        atomic.Uint64 // Clock() when the host's first frame went out (0: none yet)
	rxPackets      atomic.Uint64
	rxBytes        atomic.Uint64
}

// GatewayMAC is IP_G's MAC as this host resolved it, or nil.
func (h *Host) GatewayMAC() net.HardwareAddr { return loadMAC(&h.gwMAC) }

// GatewayMAC6 is the MAC the Neighbor Advertisement for GatewayIP6 gave this host, or nil.
func (h *Host) GatewayMAC6() net.HardwareAddr { return loadMAC(&h.gwMAC6) }

// GatewayMACFor is the MAC this host sends off-link traffic of dst's family to, or nil.
func (h *Host) GatewayMACFor(dst netip.Addr) net.HardwareAddr {
	if dst.Is6() {
		return h.GatewayMAC6()
	}
	return h.GatewayMAC()
}

func loadMAC(p *atomic.Pointer[net.HardwareAddr]) net.HardwareAddr {
	if m := p.Load(); m != nil {
		return *m
	}
	return nil
}

// resolved tells whether the host knows the gateway's MAC in every family it speaks.
func (h *Host) resolved() bool {
	return h.GatewayMAC() != nil && (!h.IP6.IsValid() || h.GatewayMAC6() != nil)
}

type counters struct {
	malformed, ignored, arpRequests, arpReplies, icmpReplies, testTx, testRx atomic.Uint64
	nsSent, naSent, icmp6Replies                                             atomic.Uint64
}

// Sim is the emulated hosts on one link.
type Sim struct {
	cfg     Config
	subnet  netip.Prefix
	subnet6 netip.Prefix         // the hosts' /64 (invalid: IPv4 only)
	byIP6   map[netip.Addr]*Host // every host's global and link-local address
	link    Link
	hosts   []*Host
	c       counters
	rx      *receiver
	txMu    sync.Mutex // serialises Send between the generator and the answers
	runMu   sync.Mutex
	run     *Run
	runSeq  uint16
}

func New(cfg Config, link Link) (*Sim, error) {
	if cfg.Count < 1 || cfg.Count > MaxHosts {
		return nil, fmt.Errorf("count %d is outside 1-%d", cfg.Count, MaxHosts)
	}
	if !cfg.FirstIP.Is4() || !cfg.GatewayIP.Is4() {
		return nil, fmt.Errorf("first IP and gateway IP must be IPv4")
	}
	if len(cfg.FirstMAC) != 6 || cfg.FirstMAC[0]&1 != 0 {
		return nil, fmt.Errorf("first MAC %s is not a unicast Ethernet address", cfg.FirstMAC)
	}
	if cfg.PrefixLen < 1 || cfg.PrefixLen > 30 {
		return nil, fmt.Errorf("prefix length %d is outside 1-30", cfg.PrefixLen)
	}
	subnet := netip.PrefixFrom(cfg.FirstIP, cfg.PrefixLen).Masked()
	if !subnet.Contains(cfg.GatewayIP) {
		return nil, fmt.Errorf("gateway IP %s is outside %s", cfg.GatewayIP, subnet)
	}
	if cfg.Clock == nil {
		cfg.Clock = MonotonicClock()
	}
	if cfg.MACStep == 0 {
		cfg.MACStep = 1
	}
	s := &Sim{cfg: cfg, subnet: subnet, link: link, rx: newReceiver(), byIP6: map[netip.Addr]*Host{}}
	if cfg.FirstIP6.IsValid() || cfg.GatewayIP6.IsValid() {
		if err := s.checkIPv6(); err != nil {
			return nil, err
		}
	}
	macBase := macToUint(cfg.FirstMAC)
	ip, ip6 := cfg.FirstIP, cfg.FirstIP6
	for k := 0; k < cfg.Count; k++ {
		if !subnet.Contains(ip) || ip == cfg.GatewayIP || ip == subnet.Addr() {
			return nil, fmt.Errorf("host %d's IP %s is not a host address of %s other than the gateway's", k, ip, subnet)
		}
		mac := macBase + uint64(k)*cfg.MACStep
		if cfg.MACStep>>48 != 0 || mac>>48 != 0 {
			return nil, fmt.Errorf("host %d's MAC overflows 48 bits", k)
		}
		h := &Host{Index: k, IP: ip, MAC: uintToMAC(mac)}
		if s.subnet6.IsValid() {
			if err := s.addIPv6(h, ip6); err != nil {
				return nil, err
			}
			ip6 = ip6.Next()
		}
		s.hosts = append(s.hosts, h)
		ip = ip.Next()
	}
	if last := s.hosts[len(s.hosts)-1].IP; last == netip.PrefixFrom(last, cfg.PrefixLen).Masked().Addr() {
		return nil, fmt.Errorf("host IPs run past %s", subnet)
	}
	return s, nil
}

// checkIPv6 validates the dual-stack part of the config and sets the hosts' /64.
func (s *Sim) checkIPv6() error {
	g, f := s.cfg.GatewayIP6, s.cfg.FirstIP6
	if !g.IsValid() || !f.IsValid() {
		return fmt.Errorf("IPv6 needs both the gateway's IPv6 address and the first host's IPv6 address")
	}
	if !f.Is6() || f.Is4In6() || !f.IsGlobalUnicast() || f.Zone() != "" {
		return fmt.Errorf("first IPv6 address %s is not a global unicast IPv6 address", f)
	}
	s.subnet6 = netip.PrefixFrom(f, 64).Masked()
	if !g.Is6() || g.Is4In6() || g.Zone() != "" || !(g.IsLinkLocalUnicast() || s.subnet6.Contains(g)) {
		return fmt.Errorf("gateway IPv6 address %s is neither link-local (fe80::/10) nor in the hosts' %s", g, s.subnet6)
	}
	return nil
}

// addIPv6 gives host h its global address a (FirstIP6 + its index) and its link-local address.
func (s *Sim) addIPv6(h *Host, a netip.Addr) error {
	if !s.subnet6.Contains(a) || a == s.cfg.GatewayIP6 || a == s.subnet6.Addr() {
		return fmt.Errorf("host %d's IPv6 address %s is not a host address of %s other than the gateway's", h.Index, a, s.subnet6)
	}
	h.IP6, h.LinkLocal = a, LinkLocal(h.MAC)
	if other := s.byIP6[h.LinkLocal]; other != nil {
		return fmt.Errorf("hosts %d and %d share the link-local address %s", other.Index, h.Index, h.LinkLocal)
	}
	s.byIP6[h.IP6], s.byIP6[h.LinkLocal] = h, h
	return nil
}

// IPv6 tells whether the hosts speak IPv6 too.
func (s *Sim) IPv6() bool { return s.subnet6.IsValid() }

func macToUint(m net.HardwareAddr) uint64 {
	var b [8]byte
	copy(b[2:], m)
	return binary.BigEndian.Uint64(b[:])
}

func uintToMAC(v uint64) net.HardwareAddr {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return net.HardwareAddr(b[2:8])
}

// Hosts are the emulated hosts in index order.
func (s *Sim) Hosts() []*Host { return s.hosts }

func (s *Sim) Config() Config { return s.cfg }

func (s *Sim) hostByIP(ip netip.Addr) *Host {
	if !ip.Is4() {
		return nil
	}
	a, f := ip.As4(), s.cfg.FirstIP.As4()
	k := int64(binary.BigEndian.Uint32(a[:])) - int64(binary.BigEndian.Uint32(f[:]))
	if k < 0 || k >= int64(len(s.hosts)) {
		return nil
	}
	return s.hosts[k]
}

func (s *Sim) hostByMAC(m net.HardwareAddr) *Host {
	d := int64(macToUint(m)) - int64(macToUint(s.cfg.FirstMAC))
	step := int64(s.cfg.MACStep)
	if len(m) != 6 || d < 0 || d%step != 0 || d/step >= int64(len(s.hosts)) {
		return nil
	}
	return s.hosts[d/step]
}

// send transmits frames sourced by host h (nil: not counted per host).
func (s *Sim) send(h *Host, frames ...[]byte) error {
	s.txMu.Lock()
	n, err := s.link.Send(frames)
	s.txMu.Unlock()
	if h != nil {
		if n > 0 && h.firstTx.Load() == 0 {
			h.firstTx.CompareAndSwap(0, s.cfg.Clock())
		}
		for _, f := range frames[:n] {
			h.txPackets.Add(1)
			h.txBytes.Add(uint64(len(f)))
		}
	}
	return err
}

// Resolve sends an ARP request for IP_G (and, dual stack, a Neighbor Solicitation for
// GatewayIP6) from every host (all) or every host that has no answer yet in that family; it
// returns how many hosts asked.
func (s *Sim) Resolve(all bool) (int, error) {
	n := 0
	for _, h := range s.hosts {
		asked := false
		if all || h.GatewayMAC() == nil {
			if all {
				h.gwMAC.Store(nil)
			}
			f, err := ARPFrame(layers.ARPRequest, h.MAC, h.IP, nil, s.cfg.GatewayIP)
			if err != nil {
				return n, err
			}
			if err := s.send(h, f); err != nil {
				return n, fmt.Errorf("ARP request from %s: %w", h.IP, err)
			}
			s.c.arpRequests.Add(1)
			asked = true
		}
		if h.IP6.IsValid() && (all || h.GatewayMAC6() == nil) {
			if all {
				h.gwMAC6.Store(nil)
			}
			// From the global address, as Linux solicits when the packet waiting for the
			// router's MAC comes from it (ndisc_solicit): the switch learns that address at once.
			f, err := NSFrame(h.MAC, h.IP6, s.cfg.GatewayIP6)
			if err != nil {
				return n, err
			}
			if err := s.send(h, f); err != nil {
				return n, fmt.Errorf("Neighbor Solicitation from %s: %w", h.IP6, err)
			}
			s.c.nsSent.Add(1)
			asked = true
		}
		if asked {
			n++
		}
	}
	return n, nil
}

// Resolved counts the hosts that know IP_G's MAC, and (dual stack) GatewayIP6's.
func (s *Sim) Resolved() (v4, v6 int) {
	for _, h := range s.hosts {
		if h.GatewayMAC() != nil {
			v4++
		}
		if h.GatewayMAC6() != nil {
			v6++
		}
	}
	return v4, v6
}

// Ready tells whether every host resolved the gateway in every family it speaks.
func (s *Sim) Ready() bool {
	for _, h := range s.hosts {
		if !h.resolved() {
			return false
		}
	}
	return true
}

// Handle processes one received frame as the hosts' NICs and stacks would.
func (s *Sim) Handle(p *Parser, frame []byte, now uint64) {
	if !s.IPv6() && len(frame) >= 14 && layers.EthernetType(binary.BigEndian.Uint16(frame[12:])) == layers.EthernetTypeIPv6 {
		s.c.ignored.Add(1) // IPv4-only hosts: their stacks would have IPv6 off
		return
	}
	if err := p.Decode(frame); err != nil {
		s.c.malformed.Add(1)
		return
	}
	dst := p.Eth.DstMAC
	group := dst[0]&1 == 1 // broadcast or multicast
	var h *Host
	if !group {
		if h = s.hostByMAC(dst); h == nil {
			s.c.ignored.Add(1) // another NIC's unicast: filtered by ours
			return
		}
	}
	switch {
	case p.Has(layers.LayerTypeARP):
		target := s.hostByIP(netip.AddrFrom4([4]byte(p.ARP.DstProtAddress)))
		if target == nil || (h != nil && h != target) || !bytes.Equal(dst, layers.EthernetBroadcast) && h == nil {
			s.c.ignored.Add(1)
			return
		}
		target.rxPackets.Add(1)
		target.rxBytes.Add(uint64(len(frame)))
		s.handleARP(target, p)
	case p.Has(layers.LayerTypeIPv4) && h != nil:
		if s.hostByIP(netip.AddrFrom4([4]byte(p.IP.DstIP.To4()))) != h {
			s.c.ignored.Add(1)
			return
		}
		h.rxPackets.Add(1)
		h.rxBytes.Add(uint64(len(frame)))
		switch {
		case p.Has(layers.LayerTypeICMPv4) && p.ICMP.TypeCode.Type() == layers.ICMPv4TypeEchoRequest:
			if reply, err := EchoReply(h.MAC, p.Eth.SrcMAC, &p.IP, &p.ICMP); err == nil && s.send(h, reply) == nil {
				s.c.icmpReplies.Add(1)
			}
		case p.Has(layers.LayerTypeUDP):
			if probe, ok := ParseProbe(p.UDP.Payload); ok {
				s.c.testRx.Add(1)
				src := netip.AddrFrom4([4]byte(p.IP.SrcIP.To4()))
				s.rx.record(src, h.IP, probe, now)
			}
		}
	case p.Has(layers.LayerTypeIPv6) && s.IPv6():
		s.handleIPv6(h, p, frame, now)
	default:
		s.c.ignored.Add(1)
	}
}

func (s *Sim) handleARP(h *Host, p *Parser) {
	sender := netip.AddrFrom4([4]byte(p.ARP.SourceProtAddress))
	switch p.ARP.Operation {
	case layers.ARPReply:
		if sender == s.cfg.GatewayIP {
			mac := net.HardwareAddr(bytes.Clone(p.ARP.SourceHwAddress))
			h.gwMAC.Store(&mac)
		}
	case layers.ARPRequest:
		reply, err := ARPFrame(layers.ARPReply, h.MAC, h.IP, net.HardwareAddr(p.ARP.SourceHwAddress), sender)
		if err == nil && s.send(h, reply) == nil {
			s.c.arpReplies.Add(1)
		}
	}
}

// handleIPv6 is a dual-stack host's IPv6: Neighbor Solicitations for its addresses (multicast to
// their solicited-node group, or unicast), the Neighbor Advertisement for the gateway's address,
// echo requests and test traffic to its addresses. h is nil for a multicast frame.
func (s *Sim) handleIPv6(h *Host, p *Parser, frame []byte, now uint64) {
	dst, _ := netip.AddrFromSlice(p.IP6.DstIP)
	nd := p.IP6.NextHeader == layers.IPProtocolICMPv6 && p.IP6.HopLimit == ndHopLimit && p.ICMP6.TypeCode.Code() == 0
	var to *Host // the host the frame is for, by its IPv6 destination or, for an NS, its target
	switch {
	case p.Has(layers.LayerTypeICMPv6NeighborSolicitation) && nd:
		target, _ := netip.AddrFromSlice(p.NS.TargetAddress)
		if to = s.byIP6[target]; h == nil && dst != SolicitedNode(target) {
			to = nil // multicast, but not to the target's group
		}
	case p.Has(layers.LayerTypeICMPv6NeighborSolicitation), p.Has(layers.LayerTypeICMPv6NeighborAdvertisement) && !nd:
		to = nil // not valid ND (RFC 4861 §7.1.1, §7.1.2): silently discarded
	default:
		to = s.byIP6[dst]
	}
	if to == nil || (h != nil && h != to) {
		s.c.ignored.Add(1)
		return
	}
	to.rxPackets.Add(1)
	to.rxBytes.Add(uint64(len(frame)))
	switch {
	case p.Has(layers.LayerTypeICMPv6NeighborSolicitation):
		s.answerNS(to, p)
	case p.Has(layers.LayerTypeICMPv6NeighborAdvertisement):
		target, _ := netip.AddrFromSlice(p.NA.TargetAddress)
		mac := linkLayerOption(p.NA.Options, layers.ICMPv6OptTargetAddress)
		if target == s.cfg.GatewayIP6 && mac != nil {
			m := net.HardwareAddr(bytes.Clone(mac))
			to.gwMAC6.Store(&m)
		}
	case p.Has(layers.LayerTypeICMPv6Echo) && p.ICMP6.TypeCode.Type() == layers.ICMPv6TypeEchoRequest:
		if reply, err := Echo6Reply(to.MAC, p.Eth.SrcMAC, &p.IP6, &p.Echo6); err == nil && s.send(to, reply) == nil {
			s.c.icmp6Replies.Add(1)
		}
	case p.Has(layers.LayerTypeUDP):
		if probe, ok := ParseProbe(p.UDP.Payload); ok {
			s.c.testRx.Add(1)
			src, _ := netip.AddrFromSlice(p.IP6.SrcIP)
			s.rx.record(src, dst, probe, now)
		}
	}
}

// answerNS answers a Neighbor Solicitation for one of h's addresses (RFC 4861 §7.2.4): to the
// solicitor (its source link-layer option, else the frame's source), solicited and override;
// a duplicate address detection probe (source ::) is answered to all nodes, not solicited.
func (s *Sim) answerNS(h *Host, p *Parser) {
	target, _ := netip.AddrFromSlice(p.NS.TargetAddress)
	src, _ := netip.AddrFromSlice(p.IP6.SrcIP)
	dst, dstMAC, flags := src, p.Eth.SrcMAC, uint8(NASolicited|NAOverride)
	if src.IsUnspecified() {
		dst, dstMAC, flags = allNodes, MulticastMAC(allNodes), NAOverride
	} else if sll := linkLayerOption(p.NS.Options, layers.ICMPv6OptSourceAddress); sll != nil {
		dstMAC = sll
	}
	if reply, err := NAFrame(h.MAC, dstMAC, dst, target, flags); err == nil && s.send(h, reply) == nil {
		s.c.naSent.Add(1)
	}
}

// Receive reads and handles frames until stop is closed (the link's Recv times out regularly).
func (s *Sim) Receive(stop <-chan struct{}, batch int) error {
	bufs := make([][]byte, batch)
	for i := range bufs {
		bufs[i] = make([]byte, 2048)
	}
	lens := make([]int, batch)
	p := NewParser()
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		n, err := s.link.Recv(bufs, lens)
		if err != nil {
			return err
		}
		now := s.cfg.Clock()
		for i := 0; i < n; i++ {
			s.Handle(p, bufs[i][:lens[i]], now)
		}
	}
}

// ResolveLoop re-ARPs (and re-solicits) every second for the hosts without an answer, as a host's stack retries.
func (s *Sim) ResolveLoop(stop <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if !s.Ready() {
				_, _ = s.Resolve(false)
			}
		}
	}
}

// MonotonicClock returns CLOCK_MONOTONIC in ns, read once from the kernel and advanced by Go's
// monotonic clock (vDSO), so stamping a frame costs no syscall.
func MonotonicClock() func() uint64 {
	base, start := monotonicNow(), time.Now()
	return func() uint64 { return base + uint64(time.Since(start)) }
}
