package sim

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"
)

// RunSpec is a `start` request (control API).
type RunSpec struct {
	RatePPS      float64  `json:"rate_pps"`
	FrameBytes   int      `json:"frame_bytes"`
	DurationS    float64  `json:"duration_s"`
	Destinations []string `json:"destinations"`
	Mode         string   `json:"mode"`
	Hosts        []int    `json:"hosts"`
	DstPort      int      `json:"dst_port"`
}

// RunStats is the `run` object of the control API.
type RunStats struct {
	ID          uint16  `json:"id"`
	State       string  `json:"state"`
	RatePPS     float64 `json:"rate_pps"`
	FrameBytes  int     `json:"frame_bytes"`
	DurationS   float64 `json:"duration_s"`
	Flows       int     `json:"flows"`
	Sent        uint64  `json:"sent"`
	ElapsedS    float64 `json:"elapsed_s"`
	AchievedPPS float64 `json:"achieved_pps"`
	SendErrors  uint64  `json:"send_errors"`
	// Slips counts the times the sender fell more than a batch behind its schedule (descheduled)
	// and skipped ahead instead of bursting: achieved_pps then stays below rate_pps.
	Slips uint64 `json:"slips"`
}

// TxFlowStats is one flow as its sender sees it. FirstSentNs and LastSentNs are the send
// stamps (CLOCK_MONOTONIC, the clock of the receivers' arrival times) of its first and last
// frame that went out: with the receiver's arrivals they show a flow that stopped arriving
// before the run ended, which the receiver alone cannot see (0 before the first frame).
type TxFlowStats struct {
	Flow        uint16 `json:"flow"`
	Src         string `json:"src"`
	Dst         string `json:"dst"`
	Sent        uint64 `json:"sent"`
	FirstSentNs uint64 `json:"first_sent_ns"`
	LastSentNs  uint64 `json:"last_sent_ns"`
}

type txFlow struct {
	host *Host
	src  netip.Addr // the host's address of dst's family
	dst  netip.Addr
	tmpl *Template
	seq  uint32 // the next sequence number
	sent uint64 // frames that went out (a failed send uses its sequence number: the receiver sees a hole)
	// firstSent, lastSent: the stamps of the first and the last frame that went out
	firstSent, lastSent uint64
}

// Run is one traffic run of the generator.
type Run struct {
	mu    sync.Mutex
	stats RunStats
	flows []*txFlow
	stop  chan struct{}
	done  chan struct{}
}

const MaxFlows = 65536

// Batch is the most frames one sendmmsg carries.
const Batch = 64

func (s *Sim) buildFlows(spec *RunSpec, run uint16) ([]*txFlow, error) {
	if spec.RatePPS <= 0 || spec.RatePPS > 10e6 {
		return nil, fmt.Errorf("rate_pps %v is outside (0, 10e6]", spec.RatePPS)
	}
	if spec.DurationS < 0 || spec.DurationS > 86400 {
		return nil, fmt.Errorf("duration_s %v is outside [0, 86400] (0: until stop)", spec.DurationS)
	}
	if spec.FrameBytes < MinFrameBytes || spec.FrameBytes > MaxFrameBytes {
		return nil, fmt.Errorf("frame_bytes %d is outside %d-%d (Ethernet frame with FCS)", spec.FrameBytes, MinFrameBytes, MaxFrameBytes)
	}
	if spec.DstPort == 0 {
		spec.DstPort = 5001
	}
	if spec.DstPort < 1 || spec.DstPort > 65535 {
		return nil, fmt.Errorf("dst_port %d is outside 1-65535", spec.DstPort)
	}
	if spec.Mode == "" {
		spec.Mode = "pairs"
	}
	if spec.Mode != "pairs" && spec.Mode != "mesh" {
		return nil, fmt.Errorf("mode %q is neither pairs nor mesh", spec.Mode)
	}
	if len(spec.Destinations) == 0 {
		return nil, errors.New("destinations is empty: give the remote hosts' IPv4 (or, dual stack, IPv6) addresses")
	}
	dsts := make([]netip.Addr, len(spec.Destinations))
	for i, d := range spec.Destinations {
		a, err := netip.ParseAddr(d)
		if err != nil || a.Zone() != "" || a.Is4In6() {
			return nil, fmt.Errorf("destinations[%d] %q is not an IPv4 or IPv6 address", i, d)
		}
		switch {
		case a.Is6() && !s.IPv6():
			return nil, fmt.Errorf("destinations[%d] %s is IPv6, and these hosts speak IPv4 only (start hostsim with --first-ip6 and --gateway-ip6)", i, a)
		case a.Is6() && (!a.IsGlobalUnicast() || s.subnet6.Contains(a)):
			return nil, fmt.Errorf("destinations[%d] %s is not a global unicast address off this LAN (%s): the generator sends through the gateway", i, a, s.subnet6)
		case a.Is4() && s.subnet.Contains(a):
			return nil, fmt.Errorf("destinations[%d] %s is on this LAN (%s): the generator sends through IP_G", i, a, s.subnet)
		}
		dsts[i] = a
	}
	senders := s.hosts
	if spec.Hosts != nil {
		senders = nil
		for _, k := range spec.Hosts {
			if k < 0 || k >= len(s.hosts) {
				return nil, fmt.Errorf("hosts: index %d is outside 0-%d", k, len(s.hosts)-1)
			}
			senders = append(senders, s.hosts[k])
		}
		if len(senders) == 0 {
			return nil, errors.New("hosts is empty")
		}
	}
	var flows []*txFlow
	add := func(h *Host, dst netip.Addr) error {
		gw, src, what := h.GatewayMACFor(dst), h.IP, fmt.Sprintf("IP_G %s", s.cfg.GatewayIP)
		if dst.Is6() {
			src, what = h.IP6, fmt.Sprintf("the gateway's IPv6 address %s", s.cfg.GatewayIP6)
		}
		if gw == nil {
			return fmt.Errorf("host %d (%s) has not resolved %s yet: wait for status.ready or send resolve", h.Index, src, what)
		}
		if len(flows) >= MaxFlows {
			return fmt.Errorf("more than %d flows", MaxFlows)
		}
		id := uint16(len(flows))
		t, err := NewTemplate(spec.FrameBytes, h.MAC, gw, src, dst, 10000+uint16(h.Index%50000), uint16(spec.DstPort), run, id)
		if err != nil {
			return err
		}
		flows = append(flows, &txFlow{host: h, src: src, dst: dst, tmpl: t})
		return nil
	}
	for i, h := range senders {
		if spec.Mode == "pairs" {
			if err := add(h, dsts[i%len(dsts)]); err != nil {
				return nil, err
			}
			continue
		}
		for _, d := range dsts {
			if err := add(h, d); err != nil {
				return nil, err
			}
		}
	}
	return flows, nil
}

// Start begins a run; it is refused while another runs.
func (s *Sim) Start(spec RunSpec) (RunStats, error) {
	s.runMu.Lock()
	defer s.runMu.Unlock()
	if s.run != nil && s.run.running() {
		return RunStats{}, fmt.Errorf("run %d is active: stop it first", s.run.snapshot().ID)
	}
	id := s.runSeq + 1
	flows, err := s.buildFlows(&spec, id)
	if err != nil {
		return RunStats{}, err
	}
	s.runSeq = id
	r := &Run{flows: flows, stop: make(chan struct{}), done: make(chan struct{}),
		stats: RunStats{ID: id, State: "running", RatePPS: spec.RatePPS, FrameBytes: spec.FrameBytes,
			DurationS: spec.DurationS, Flows: len(flows)}}
	s.run = r
	go s.generate(r, time.Duration(spec.DurationS*float64(time.Second)))
	return r.snapshot(), nil
}

// Stop ends the current run and returns its final stats.
func (s *Sim) Stop() RunStats {
	s.runMu.Lock()
	r := s.run
	s.runMu.Unlock()
	if r == nil {
		return RunStats{State: "idle"}
	}
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	<-r.done
	return r.snapshot()
}

// CurrentRun is the last run's stats ({"state": "idle"} before the first).
func (s *Sim) CurrentRun() RunStats {
	s.runMu.Lock()
	defer s.runMu.Unlock()
	if s.run == nil {
		return RunStats{State: "idle"}
	}
	return s.run.snapshot()
}

// TxFlows lists the current run's flows.
func (s *Sim) TxFlows() []TxFlowStats {
	s.runMu.Lock()
	r := s.run
	s.runMu.Unlock()
	if r == nil {
		return []TxFlowStats{}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]TxFlowStats, len(r.flows))
	for i, f := range r.flows {
		out[i] = TxFlowStats{Flow: uint16(i), Src: f.src.String(), Dst: f.dst.String(), Sent: f.sent,
			FirstSentNs: f.firstSent, LastSentNs: f.lastSent}
	}
	return out
}

func (r *Run) running() bool {
	select {
	case <-r.done:
		return false
	default:
		return true
	}
}

func (r *Run) snapshot() RunStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

// generate sends the run's frames round-robin over its flows at the run's aggregate rate: it
// sleeps until the next frame is due, then sends every frame due by now in batches of up to Batch.
func (s *Sim) generate(r *Run, duration time.Duration) {
	defer close(r.done)
	bufs := make([][]byte, Batch)
	for i := range bufs {
		bufs[i] = make([]byte, 0, MaxFrameBytes)
	}
	owners := make([]*txFlow, Batch)
	interval := time.Duration(float64(time.Second) / r.stats.RatePPS)
	start := time.Now()
	var scheduled uint64 // scheduled: the frames due so far, minus what slips skipped
	var skippedDur time.Duration
	next := 0
	finish := func(state string) {
		el := time.Since(start)
		r.mu.Lock()
		r.stats.State = state
		r.stats.ElapsedS = el.Seconds()
		if el > 0 {
			r.stats.AchievedPPS = float64(r.stats.Sent) / el.Seconds()
		}
		r.mu.Unlock()
	}
	for {
		select {
		case <-r.stop:
			finish("done")
			return
		default:
		}
		el := time.Since(start)
		if duration > 0 && el >= duration {
			finish("done")
			return
		}
		due := uint64((el-skippedDur)/interval) + 1
		if due <= scheduled {
			wait := time.Duration(scheduled)*interval + skippedDur - el
			time.Sleep(wait)
			continue
		}
		n := due - scheduled
		if n > 2*Batch { // descheduled: skip ahead rather than burst into the switch
			skip := n - Batch
			skippedDur += time.Duration(skip) * interval
			n = Batch
			r.mu.Lock()
			r.stats.Slips++
			r.mu.Unlock()
		}
		for n > 0 {
			b := min(int(n), Batch)
			now := s.cfg.Clock()
			r.mu.Lock()
			for i := 0; i < b; i++ {
				f := r.flows[next]
				next = (next + 1) % len(r.flows)
				bufs[i] = f.tmpl.Stamp(bufs[i], f.seq, now)
				f.seq++
				owners[i] = f
			}
			r.mu.Unlock()
			s.txMu.Lock()
			m, err := s.link.Send(bufs[:b])
			s.txMu.Unlock()
			r.mu.Lock()
			for i := 0; i < m; i++ {
				if owners[i].sent == 0 {
					owners[i].firstSent = now
				}
				owners[i].sent++
				owners[i].lastSent = now
			}
			r.stats.Sent += uint64(m)
			if err != nil || m < b {
				r.stats.SendErrors += uint64(b - m)
			}
			r.mu.Unlock()
			for i := 0; i < m; i++ {
				owners[i].host.txPackets.Add(1)
				owners[i].host.txBytes.Add(uint64(len(bufs[i])))
			}
			s.c.testTx.Add(uint64(m))
			scheduled += uint64(b)
			n -= uint64(b)
		}
	}
}
