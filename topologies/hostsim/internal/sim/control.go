package sim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
)

// APIVersion is the control API's version (topologies/hostsim/README.md).
const APIVersion = 1

// Totals are the counters over all hosts and flows.
type Totals struct {
	TxPackets   uint64    `json:"tx_packets"`
	TxBytes     uint64    `json:"tx_bytes"`
	RxPackets   uint64    `json:"rx_packets"`
	RxBytes     uint64    `json:"rx_bytes"`
	TestTx      uint64    `json:"test_tx_packets"`
	TestRx      uint64    `json:"test_rx_packets"`
	Lost        uint64    `json:"lost"`
	Reordered   uint64    `json:"reordered"`
	Duplicates  uint64    `json:"duplicates"`
	Latency     LatencyUs `json:"latency_us"`
	MaxGapMs    float64   `json:"max_gap_ms"`
	Malformed   uint64    `json:"malformed"`
	Ignored     uint64    `json:"ignored"`
	ARPRequests uint64    `json:"arp_requests_sent"`
	ARPReplies  uint64    `json:"arp_replies_sent"`
	ICMPReplies uint64    `json:"icmp_replies_sent"`
	// Dual stack: Neighbor Solicitations for the gateway, Neighbor Advertisements and ICMPv6
	// echo replies sent.
	NSSent       uint64 `json:"ns_sent"`
	NASent       uint64 `json:"na_sent"`
	ICMP6Replies uint64 `json:"icmpv6_replies_sent"`
}

// HostStats is one host in `stats`.
type HostStats struct {
	Index      int     `json:"index"`
	IP         string  `json:"ip"`
	MAC        string  `json:"mac"`
	GatewayMAC *string `json:"gateway_mac"`
	// Dual stack only: the host's global and link-local IPv6 addresses, and the MAC the
	// Neighbor Advertisement for the gateway's IPv6 address gave it (null until then, and
	// always for IPv4-only hosts).
	IP6         string  `json:"ip6,omitempty"`
	LinkLocal   string  `json:"link_local,omitempty"`
	GatewayMAC6 *string `json:"gateway_mac6"`
	TxPackets   uint64  `json:"tx_packets"`
	TxBytes     uint64  `json:"tx_bytes"`
	RxPackets   uint64  `json:"rx_packets"`
	RxBytes     uint64  `json:"rx_bytes"`
	// FirstTxNs is when the host's first frame went out (CLOCK_MONOTONIC ns; 0: none yet):
	// where a switch's learning of the host starts.
	FirstTxNs uint64 `json:"first_tx_ns"`
}

// Stats is the `stats` answer.
type Stats struct {
	Totals  Totals        `json:"totals"`
	Run     RunStats      `json:"run"`
	Hosts   []HostStats   `json:"hosts,omitempty"`
	FlowsTx []TxFlowStats `json:"flows_tx,omitempty"`
	FlowsRx []RxFlowStats `json:"flows_rx,omitempty"`
}

// Snapshot reads every counter; hosts and flows add the per-host and per-flow lists.
func (s *Sim) Snapshot(hosts, flows bool) Stats {
	st := Stats{Run: s.CurrentRun()}
	t := &st.Totals
	for _, h := range s.hosts {
		hs := HostStats{Index: h.Index, IP: h.IP.String(), MAC: h.MAC.String(), TxPackets: h.txPackets.Load(),
			TxBytes: h.txBytes.Load(), RxPackets: h.rxPackets.Load(), RxBytes: h.rxBytes.Load(), FirstTxNs: h.firstTx.Load()}
		hs.GatewayMAC = macString(h.GatewayMAC())
		if h.IP6.IsValid() {
			hs.IP6, hs.LinkLocal = h.IP6.String(), h.LinkLocal.String()
			hs.GatewayMAC6 = macString(h.GatewayMAC6())
		}
		t.TxPackets += hs.TxPackets
		t.TxBytes += hs.TxBytes
		t.RxPackets += hs.RxPackets
		t.RxBytes += hs.RxBytes
		if hosts {
			st.Hosts = append(st.Hosts, hs)
		}
	}
	t.TestTx, t.TestRx = s.c.testTx.Load(), s.c.testRx.Load()
	t.Malformed, t.Ignored = s.c.malformed.Load(), s.c.ignored.Load()
	t.ARPRequests, t.ARPReplies, t.ICMPReplies = s.c.arpRequests.Load(), s.c.arpReplies.Load(), s.c.icmpReplies.Load()
	t.NSSent, t.NASent, t.ICMP6Replies = s.c.nsSent.Load(), s.c.naSent.Load(), s.c.icmp6Replies.Load()
	rx := s.rx.snapshot()
	var latSum uint64
	var received uint64
	for _, f := range rx {
		t.Lost += f.Lost
		t.Reordered += f.Reordered
		t.Duplicates += f.Duplicates
		t.MaxGapMs = max(t.MaxGapMs, f.MaxGapMs)
		if f.Received > 0 {
			if received == 0 || f.Latency.Min < t.Latency.Min {
				t.Latency.Min = f.Latency.Min
			}
			t.Latency.Max = max(t.Latency.Max, f.Latency.Max)
		}
		latSum += f.latSum
		received += f.Received
	}
	if received > 0 {
		t.Latency.Avg = float64(latSum) / float64(received) / 1e3
	}
	if flows {
		st.FlowsTx, st.FlowsRx = s.TxFlows(), rx
		if st.FlowsRx == nil {
			st.FlowsRx = []RxFlowStats{}
		}
	}
	return st
}

func macString(m net.HardwareAddr) *string {
	if m == nil {
		return nil
	}
	str := m.String()
	return &str
}

// Reset zeroes every counter; refused during a run.
func (s *Sim) Reset() error {
	s.runMu.Lock()
	defer s.runMu.Unlock()
	if s.run != nil && s.run.running() {
		return errors.New("a run is active: stop it before reset")
	}
	for _, h := range s.hosts {
		h.txPackets.Store(0)
		h.txBytes.Store(0)
		h.rxPackets.Store(0)
		h.rxBytes.Store(0)
	}
	for _, c := range []*counters{&s.c} {
		c.malformed.Store(0)
		c.ignored.Store(0)
		c.arpRequests.Store(0)
		c.arpReplies.Store(0)
		c.icmpReplies.Store(0)
		c.testTx.Store(0)
		c.testRx.Store(0)
		c.nsSent.Store(0)
		c.naSent.Store(0)
		c.icmp6Replies.Store(0)
	}
	s.rx.reset()
	if s.run != nil {
		s.run.mu.Lock()
		for _, f := range s.run.flows {
			f.sent = 0
		}
		s.run.mu.Unlock()
	}
	return nil
}

type request struct {
	Cmd   string `json:"cmd"`
	All   bool   `json:"all"`
	Hosts any    `json:"hosts"`
	Flows bool   `json:"flows"`
	RunSpec
}

// maxSocketPath is sockaddr_un's sun_path less its terminating NUL.
const maxSocketPath = 107

// Server answers the control API on a unix socket.
type Server struct {
	sim *Sim
	// Iface names the interface in `hello`.
	Iface string
	mu    sync.Mutex // commands are serialised
	Quit  chan struct{}
	once  sync.Once
	ln    net.Listener
}

// Listen opens the socket at path (an old socket file is replaced).
func Listen(s *Sim, path string) (*Server, error) {
	if len(path) > maxSocketPath {
		return nil, fmt.Errorf("control socket path %s is %d bytes, longer than a unix socket address holds (%d): use a shorter path", path, len(path), maxSocketPath)
	}
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
		_ = os.Remove(path)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	return &Server{sim: s, Quit: make(chan struct{}), ln: ln}, nil
}

// Serve accepts clients until Close.
func (srv *Server) Serve() {
	for {
		c, err := srv.ln.Accept()
		if err != nil {
			return
		}
		go srv.client(c)
	}
}

func (srv *Server) Close() error { return srv.ln.Close() }

func (srv *Server) client(c net.Conn) {
	defer c.Close()
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	enc := json.NewEncoder(c)
	for sc.Scan() {
		answer := srv.Handle(sc.Bytes())
		if err := enc.Encode(answer); err != nil {
			return
		}
		if answer["quit"] == true {
			return
		}
	}
}

// Handle answers one request line (exported for tests).
func (srv *Server) Handle(line []byte) map[string]any {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	out, err := srv.handle(line)
	if err != nil {
		return map[string]any{"ok": false, "error": err.Error()}
	}
	out["ok"] = true
	return out
}

func (srv *Server) handle(line []byte) (map[string]any, error) {
	var req request
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return nil, fmt.Errorf("request is not a JSON object with the documented fields: %v", err)
	}
	s := srv.sim
	switch req.Cmd {
	case "hello":
		var gw6 any // null: IPv4 only
		if s.IPv6() {
			gw6 = s.cfg.GatewayIP6.String()
		}
		return map[string]any{"version": APIVersion, "iface": srv.Iface, "hosts": len(s.hosts), "gateway_ip": s.cfg.GatewayIP.String(),
			"gateway_ip6": gw6}, nil
	case "status":
		v4, v6 := s.Resolved()
		return map[string]any{"hosts": len(s.hosts), "resolved": v4, "resolved6": v6, "ready": s.Ready(), "run": s.CurrentRun()}, nil
	case "resolve":
		n, err := s.Resolve(req.All)
		return map[string]any{"requested": n}, err
	case "start":
		spec := req.RunSpec
		spec.Hosts = nil
		if req.Hosts != nil {
			list, ok := req.Hosts.([]any)
			if !ok {
				return nil, errors.New("hosts must be a list of host indexes")
			}
			for _, v := range list {
				f, ok := v.(float64)
				if !ok || f != float64(int(f)) {
					return nil, fmt.Errorf("hosts: %v is not a host index", v)
				}
				spec.Hosts = append(spec.Hosts, int(f))
			}
			if spec.Hosts == nil {
				spec.Hosts = []int{}
			}
		}
		run, err := s.Start(spec)
		if err != nil {
			return nil, err
		}
		return map[string]any{"run": run.ID, "flows": run.Flows}, nil
	case "stop":
		return map[string]any{"run": s.Stop()}, nil
	case "stats":
		wantHosts, ok := req.Hosts.(bool)
		if req.Hosts != nil && !ok {
			return nil, errors.New("stats: hosts must be true or false")
		}
		st := s.Snapshot(wantHosts, req.Flows)
		out := map[string]any{"totals": st.Totals, "run": st.Run}
		if wantHosts {
			out["hosts"] = st.Hosts
		}
		if req.Flows {
			out["flows_tx"], out["flows_rx"] = st.FlowsTx, st.FlowsRx
		}
		return out, nil
	case "metrics":
		return map[string]any{"text": s.Prometheus()}, nil
	case "reset":
		return map[string]any{}, s.Reset()
	case "quit":
		srv.once.Do(func() { close(srv.Quit) })
		return map[string]any{"quit": true}, nil
	case "":
		return nil, errors.New(`no "cmd": one of hello, status, resolve, start, stop, stats, metrics, reset, quit`)
	default:
		return nil, fmt.Errorf("unknown cmd %q: one of hello, status, resolve, start, stop, stats, metrics, reset, quit", req.Cmd)
	}
}
