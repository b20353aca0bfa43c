// Package sim emulates many hosts behind one Ethernet port: ARP for the gateway IP, ARP and ICMP
// echo answers, per-host counters, and a paced UDP traffic generator whose receiver counts loss,
// reordering, one-way latency and gaps per flow (topologies/hostsim/README.md).
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

// Config names the emulated hosts: host k has FirstIP+k and FirstMAC+k*MACStep.
type Config struct {
	GatewayIP netip.Addr
	FirstIP   netip.Addr
	FirstMAC  net.HardwareAddr
	// MACStep is the distance between two hosts' MACs (0 means 1); the clustering paper's
	// §4.3 hosts 00:00:03:00:18:00, 19:00, ... are 256 apart.
	MACStep   uint64
	Count     int
	PrefixLen int
	// Clock is CLOCK_MONOTONIC in ns (shared by every hostsim on the machine).
	Clock func() uint64
}

const MaxHosts = 4096

// Host is one emulated host and its counters.
type Host struct {
	Index     int
	IP        netip.Addr
	MAC       net.HardwareAddr
	gwMAC     atomic.Pointer[net.HardwareAddr]
	txPackets atomic.Uint64
	txBytes   atomic.Uint64
	rxPackets atomic.Uint64
	rxBytes   atomic.Uint64
}

// GatewayMAC is IP_G's MAC as this host resolved it, or nil.
func (h *Host) GatewayMAC() net.HardwareAddr {
	if p := h.gwMAC.Load(); p != nil {
		return *p
	}
	return nil
}

type counters struct {
	malformed, ignored, arpRequests, arpReplies, icmpReplies, testTx, testRx atomic.Uint64
}

// Sim is the emulated hosts on one link.
type Sim struct {
	cfg    Config
	subnet netip.Prefix
	link   Link
	hosts  []*Host
	c      counters
	rx     *receiver
	txMu   sync.Mutex // serialises Send between the generator and the answers
	runMu  sync.Mutex
	run    *Run
	runSeq uint16
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
	s := &Sim{cfg: cfg, subnet: subnet, link: link, rx: newReceiver()}
	macBase := macToUint(cfg.FirstMAC)
	ip := cfg.FirstIP
	for k := 0; k < cfg.Count; k++ {
		if !subnet.Contains(ip) || ip == cfg.GatewayIP || ip == subnet.Addr() {
			return nil, fmt.Errorf("host %d's IP %s is not a host address of %s other than the gateway's", k, ip, subnet)
		}
		mac := macBase + uint64(k)*cfg.MACStep
		if cfg.MACStep>>48 != 0 || mac>>48 != 0 {
			return nil, fmt.Errorf("host %d's MAC overflows 48 bits", k)
		}
		s.hosts = append(s.hosts, &Host{Index: k, IP: ip, MAC: uintToMAC(mac)})
		ip = ip.Next()
	}
	if last := s.hosts[len(s.hosts)-1].IP; last == netip.PrefixFrom(last, cfg.PrefixLen).Masked().Addr() {
		return nil, fmt.Errorf("host IPs run past %s", subnet)
	}
	return s, nil
}

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
		for _, f := range frames[:n] {
			h.txPackets.Add(1)
			h.txBytes.Add(uint64(len(f)))
		}
	}
	return err
}

// Resolve sends an ARP request for IP_G from every host (all) or every host that has no answer yet.
func (s *Sim) Resolve(all bool) (int, error) {
	n := 0
	for _, h := range s.hosts {
		if !all && h.GatewayMAC() != nil {
			continue
		}
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
		n++
	}
	return n, nil
}

// Resolved counts the hosts that know IP_G's MAC.
func (s *Sim) Resolved() int {
	n := 0
	for _, h := range s.hosts {
		if h.GatewayMAC() != nil {
			n++
		}
	}
	return n
}

// Handle processes one received frame as the hosts' NICs and stacks would.
func (s *Sim) Handle(p *Parser, frame []byte, now uint64) {
	if err := p.Decode(frame); err != nil {
		s.c.malformed.Add(1)
		return
	}
	dst := p.Eth.DstMAC
	broadcast := bytes.Equal(dst, layers.EthernetBroadcast)
	var h *Host
	if !broadcast {
		if h = s.hostByMAC(dst); h == nil {
			s.c.ignored.Add(1) // another NIC's unicast: filtered by ours
			return
		}
	}
	switch {
	case p.Has(layers.LayerTypeARP):
		target := s.hostByIP(netip.AddrFrom4([4]byte(p.ARP.DstProtAddress)))
		if target == nil || (h != nil && h != target) {
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

// ResolveLoop re-ARPs every second for the hosts without an answer, as a host's stack retries.
func (s *Sim) ResolveLoop(stop <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if s.Resolved() < len(s.hosts) {
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
