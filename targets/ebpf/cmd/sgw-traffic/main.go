// Command sgw-traffic is the traffic source and sink of the dataplane benchmark
// (bench/dataplane): it sends the frames of a plan into one interface and counts
// what arrives at the sink interfaces, checking the switch's MAC rewrite.
//
//	sgw-traffic -gen NETNS:DEV -frames FILE -seconds S -cpu N [-rate R]
//	            -sink NETNS:DEV [-sink NETNS:DEV ...] [-vmac-base MAC -bucket-mask M]
//
// Generator (-gen-mode, default auto: the first this kernel allows, named in the result's
// "generator"; internal/pktgen):
//   - xdp-live-frames: an XDP program run with BPF_PROG_RUN and BPF_F_TEST_XDP_LIVE_FRAMES
//     on DEV's ingress returns XDP_TX, so the kernel transmits every frame out of DEV
//     (a veth) into its peer, the switch's port. Each frame gets the headers of the next
//     frame of the plan, round robin (the first 42 bytes, Ethernet, IPv4 and UDP, of a
//     plan of IPv4 frames; the first 62, Ethernet, IPv6 and UDP, of a plan of IPv6
//     frames: the plan's ethertype says which), so the frames carry the plan's many
//     source and destination MACs and addresses. With -rate R a token bucket in the
//     XDP program keeps to R frames a second (a run without a token drops its frame
//     instead of sending it).
//   - af-packet-tx-ring: the plan's whole frames, round robin, through an AF_PACKET TX
//     ring on DEV (qdisc bypassed); with -rate R a token bucket in this process.
//
// This process runs pinned to -cpu; without -rate it sends as fast as it can for
// -seconds, with -rate R it sends R frames per second, evenly spaced.
//
// Sink: a tc (TCX ingress) program on each sink DEV counts frames, bytes, frames
// whose dst MAC is DEV's own (the kernel's PACKET_HOST) and frames whose src MAC
// is a vmac of -vmac-base/-bucket-mask, then drops them. Sinks are attached before
// the first frame and read after the queues drained.
//
// -prog-stats NETNS:DEV turns on the kernel's run-time statistics of eBPF programs
// (BPF_ENABLE_STATS, for this process's lifetime only) and reports the runs and run
// time of the programs attached with TCX to DEV's ingress during the traffic.
//
// FILE holds frames as <u16 little-endian length><bytes>, all of one length and one
// ethertype, IPv4 or IPv6 (the format of bench/dataplane/frames.py). Prints one JSON
// object on stdout (its "family" says which the plan was, its "generator" how the frames
// were sent and why that way). Root. `sgw-traffic -modes` prints which generator modes
// this kernel allows (a JSON list, fastest first).
package main

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"supergw/targets/ebpf/internal/netns"
	"supergw/targets/ebpf/internal/pktgen"
)

func init() {
	// Namespace switches (setns) and BPF_PROG_RUN happen on this one pinned thread.
	runtime.LockOSThread()
}

const (
	headerLen  = 62      // SGW_GEN_HEADER_LEN in traffic.c: Ethernet + IPv6 + UDP
	headerLen4 = 42      // SGW_GEN_HEADER_LEN_IPV4: Ethernet + IPv4 + UDP
	maxFrames  = 4096    // SGW_GEN_MAX_FRAMES
	firstCall  = 1 << 16 // program runs in the first BPF_PROG_RUN call
	callTarget = time.Second
)

type endpoint struct{ netns, dev string }

func (e endpoint) String() string { return e.netns + ":" + e.dev }

type endpoints []endpoint

func (s *endpoints) String() string { return fmt.Sprint(*s) }

func (s *endpoints) Set(v string) error {
	e, err := parseEndpoint(v)
	if err == nil {
		*s = append(*s, e)
	}
	return err
}

func parseEndpoint(v string) (endpoint, error) {
	ns, dev, ok := strings.Cut(v, ":")
	if !ok || ns == "" || dev == "" || strings.ContainsAny(ns, "/") {
		return endpoint{}, fmt.Errorf("%q: want NETNS:DEV (a namespace in /run/netns and an interface in it)", v)
	}
	return endpoint{ns, dev}, nil
}

type options struct {
	gen        endpoint
	sinks      endpoints
	progStats  endpoints
	framesFile string
	seconds    float64
	rate       float64
	cpu        int
	vmacBase   net.HardwareAddr
	bucketMask uint16
	drain      time.Duration
	genMode    pktgen.Mode
	noOffload  bool // TX ring: frames without checksum offload state (CHECKSUM_NONE)
}

// SinkResult is what one sink counted.
type SinkResult struct {
	At          string `json:"at"`
	Frames      uint64 `json:"frames"`
	Bytes       uint64 `json:"bytes"`
	DstIsOwnMAC uint64 `json:"dst_is_own_mac"`
	SrcIsVMAC   uint64 `json:"src_is_vmac"`
}

// ProgResult is what one attached program did during the traffic.
type ProgResult struct {
	At      string `json:"at"`
	ID      uint32 `json:"id"`
	Name    string `json:"name"`
	Runs    uint64 `json:"runs"`
	RunTime int64  `json:"run_time_ns"`
}

// Result is the run.
type Result struct {
	Sent       uint64        `json:"sent"`
	Seconds    float64       `json:"seconds"` // first frame to last frame handed to the kernel
	OfferedPPS float64       `json:"offered_pps"`
	FrameBytes int           `json:"frame_bytes"` // without FCS
	Family     string        `json:"family"`      // the plan's frames: "ipv4" or "ipv6"
	PlanFrames int           `json:"plan_frames"`
	CPU        int           `json:"cpu"`
	Sinks      []SinkResult  `json:"sinks"`
	Programs   []ProgResult  `json:"programs"`
	Generator  pktgen.Choice `json:"generator"` // how the frames were sent, and why that way
}

func main() {
	if len(os.Args) == 2 && os.Args[1] == "-modes" {
		// What the benchmark asks first: which generator modes this kernel allows.
		out, _ := json.Marshal(pktgen.Available())
		fmt.Println(string(out))
		return
	}
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "sgw-traffic: %v\n", err)
		os.Exit(2)
	}
	r, err := run(o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sgw-traffic: %v\n", err)
		os.Exit(1)
	}
	out, _ := json.Marshal(r)
	fmt.Println(string(out))
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("sgw-traffic", flag.ContinueOnError)
	gen := fs.String("gen", "", "NETNS:DEV the generator transmits out of")
	fs.Var(&o.sinks, "sink", "NETNS:DEV whose ingress counts and drops (repeatable)")
	fs.Var(&o.progStats, "prog-stats", "NETNS:DEV whose TCX ingress programs' run time to report (repeatable)")
	fs.StringVar(&o.framesFile, "frames", "", "frames file: <u16 LE length><bytes> records of one length")
	fs.Float64Var(&o.seconds, "seconds", 3, "how long to send")
	fs.Float64Var(&o.rate, "rate", 0, "frames per second to pace at, evenly (0: as fast as possible)")
	fs.IntVar(&o.cpu, "cpu", 0, "CPU the generator runs on")
	fs.BoolVar(&o.noOffload, "no-checksum-offload", false, "af-packet-tx-ring: hand UDP frames over without checksum "+
		"offload state, so that the receiving veth's GRO verifies their checksums in software (see internal/pktgen)")
	vmac := fs.String("vmac-base", "00:00:00:00:00:00", "vmac base the sinks recognise in src MACs")
	mask := fs.Uint("bucket-mask", 0, "bucket mask (K-1) of the vmacs")
	fs.DurationVar(&o.drain, "drain", 200*time.Millisecond, "wait after the last frame before reading the sinks")
	mode := fs.String("gen-mode", string(pktgen.Auto), "how to send: auto (the first this kernel allows), "+
		string(pktgen.LiveFrames)+" or "+string(pktgen.PacketTxRing))
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if o.gen, err = parseEndpoint(*gen); err != nil {
		return o, fmt.Errorf("-gen %w", err)
	}
	if len(o.sinks) == 0 {
		return o, errors.New("at least one -sink NETNS:DEV is needed")
	}
	if o.framesFile == "" {
		return o, errors.New("-frames FILE is needed")
	}
	if !(o.seconds > 0 && o.seconds <= 600) {
		return o, fmt.Errorf("-seconds %g: want (0, 600]", o.seconds)
	}
	if !(o.rate == 0 || o.rate >= 1 && o.rate <= 1e9) {
		return o, fmt.Errorf("-rate %g: want 0 (unpaced) or 1..1e9 frames per second", o.rate)
	}
	if o.cpu < 0 || o.cpu >= runtime.NumCPU() {
		return o, fmt.Errorf("-cpu %d: this machine has CPUs 0..%d", o.cpu, runtime.NumCPU()-1)
	}
	if o.vmacBase, err = net.ParseMAC(*vmac); err != nil || len(o.vmacBase) != 6 {
		return o, fmt.Errorf("-vmac-base %q: want a MAC like 02:5e:98:00:00:00", *vmac)
	}
	if *mask > 0xffff {
		return o, fmt.Errorf("-bucket-mask %d: want <= 65535", *mask)
	}
	o.bucketMask = uint16(*mask)
	if o.drain < 0 {
		return o, fmt.Errorf("-drain %v: want >= 0", o.drain)
	}
	if o.genMode, err = pktgen.ParseMode(*mode); err != nil {
		return o, fmt.Errorf("-gen-mode: %w", err)
	}
	return o, nil
}

// plan is the frames of a plan file and how many bytes of each the generator writes.
type plan struct {
	frames  [][]byte
	ipv6    bool
	headers int // headerLen or headerLen4
}

func (p plan) family() string {
	if p.ipv6 {
		return "ipv6"
	}
	return "ipv4"
}

// readFrames reads the plan: at least one frame, at most maxFrames, all of one
// length and one ethertype, IPv4 or IPv6, each holding its Ethernet, IP and UDP headers.
func readFrames(path string) (plan, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return plan{}, err
	}
	var p plan
	for off := 0; off < len(data); {
		if off+2 > len(data) {
			return plan{}, fmt.Errorf("%s: truncated length at byte %d", path, off)
		}
		n := int(binary.LittleEndian.Uint16(data[off:]))
		off += 2
		if n < 14 || off+n > len(data) {
			return plan{}, fmt.Errorf("%s: frame %d: length %d (want an Ethernet frame within the file)", path, len(p.frames), n)
		}
		f := data[off : off+n]
		off += n
		ipv6 := false
		switch et := binary.BigEndian.Uint16(f[12:]); et {
		case 0x0800:
		case 0x86dd:
			ipv6 = true
		default:
			return plan{}, fmt.Errorf("%s: frame %d: ethertype %#04x, want IPv4 (0x0800) or IPv6 (0x86dd)", path, len(p.frames), et)
		}
		if len(p.frames) == 0 {
			p.ipv6, p.headers = ipv6, headerLen4
			if ipv6 {
				p.headers = headerLen
			}
		}
		if n < p.headers {
			return plan{}, fmt.Errorf("%s: frame %d: length %d (want >= %d for %s/UDP headers)", path, len(p.frames), n, p.headers, p.family())
		}
		if len(p.frames) > 0 && n != len(p.frames[0]) {
			return plan{}, fmt.Errorf("%s: frame %d is %d bytes, frame 0 is %d: one length per plan", path, len(p.frames), n, len(p.frames[0]))
		}
		if ipv6 != p.ipv6 {
			return plan{}, fmt.Errorf("%s: frame %d is not %s as frame 0 is: one family per plan", path, len(p.frames), p.family())
		}
		p.frames = append(p.frames, f)
	}
	if len(p.frames) == 0 || len(p.frames) > maxFrames {
		return plan{}, fmt.Errorf("%s: %d frames, want 1..%d", path, len(p.frames), maxFrames)
	}
	return p, nil
}

func run(o options) (Result, error) {
	if os.Geteuid() != 0 {
		return Result{}, errors.New("needs root (eBPF, namespaces)")
	}
	p, err := readFrames(o.framesFile)
	if err != nil {
		return Result{}, err
	}
	frames := p.frames
	choice, err := pktgen.Choose(o.genMode, pktgen.ProbeLiveFrames)
	if err != nil {
		return Result{}, err
	}
	var set unix.CPUSet
	set.Set(o.cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return Result{}, fmt.Errorf("pin to cpu %d: %w", o.cpu, err)
	}
	spec, err := loadTraffic()
	if err != nil {
		return Result{}, err
	}
	for name, value := range map[string]any{
		"sgw_gen_count":        uint32(len(frames)),
		"sgw_gen_ipv6":         boolByte(p.ipv6),
		"sgw_gen_rate":         uint64(o.rate),
		"sgw_sink_vmac_base":   [6]byte(o.vmacBase),
		"sgw_sink_bucket_mask": o.bucketMask,
	} {
		if err := spec.Variables[name].Set(value); err != nil {
			return Result{}, fmt.Errorf("set %s: %w", name, err)
		}
	}
	var cleanup []func()
	defer func() {
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
	}()
	sinks := make([]*trafficObjects, len(o.sinks))
	for i, at := range o.sinks {
		objs := new(trafficObjects)
		if err := spec.LoadAndAssign(objs, nil); err != nil {
			return Result{}, fmt.Errorf("load sink for %s: %w", at, err)
		}
		cleanup = append(cleanup, func() { objs.Close() })
		l, err := attachSink(at, objs.SgwSink)
		if err != nil {
			return Result{}, err
		}
		cleanup = append(cleanup, func() { l.Close() })
		sinks[i] = objs
	}
	watched, err := watchPrograms(o.progStats)
	if err != nil {
		return Result{}, err
	}
	defer watched.close()
	var r Result
	switch r.Generator = choice; choice.Mode {
	case pktgen.LiveFrames:
		r.Sent, r.Seconds, err = sendLiveFrames(spec, p, o)
	default:
		r.Sent, r.Seconds, err = sendTxRing(p, o)
	}
	if err != nil {
		return Result{}, err
	}
	for i, objs := range sinks {
		s, err := readSink(objs.SgwSinkCounts)
		if err != nil {
			return Result{}, fmt.Errorf("sink %s: %w", o.sinks[i], err)
		}
		s.At = o.sinks[i].String()
		r.Sinks = append(r.Sinks, s)
	}
	if r.Programs, err = watched.results(); err != nil {
		return Result{}, err
	}
	r.FrameBytes, r.Family, r.PlanFrames, r.CPU = len(frames[0]), p.family(), len(frames), o.cpu
	if r.Seconds > 0 {
		r.OfferedPPS = float64(r.Sent) / r.Seconds
	}
	return r, nil
}

// sendLiveFrames sends with the XDP program in live-frame mode and waits o.drain: it
// returns the frames the program handed to XDP_TX and how long it sent.
func sendLiveFrames(spec *ebpf.CollectionSpec, p plan, o options) (uint64, float64, error) {
	gen := new(trafficObjects)
	if err := spec.LoadAndAssign(gen, nil); err != nil {
		return 0, 0, fmt.Errorf("load generator: %w", err)
	}
	defer gen.Close()
	for i, f := range p.frames {
		var h [headerLen]byte
		copy(h[:], f[:p.headers])
		if err := gen.SgwGenHeaders.Put(uint32(i), h); err != nil {
			return 0, 0, fmt.Errorf("plan frame %d: %w", i, err)
		}
	}
	var seconds float64
	err := netns.Do(o.gen.netns, func() error {
		idx, err := ifindex(o.gen.dev)
		if err != nil {
			return fmt.Errorf("generator %s: %w", o.gen, err)
		}
		seconds, err = send(gen.SgwGenTx, idx, p.frames[0], o)
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	time.Sleep(o.drain)
	sent, err := sentFrames(gen.SgwGen)
	return sent, seconds, err
}

// sendTxRing sends the plan's frames through an AF_PACKET TX ring on the generator's
// interface and waits o.drain.
func sendTxRing(p plan, o options) (uint64, float64, error) {
	var st pktgen.SendStats
	err := netns.Do(o.gen.netns, func() error {
		idx, err := ifindex(o.gen.dev)
		if err != nil {
			return fmt.Errorf("generator %s: %w", o.gen, err)
		}
		ring, err := pktgen.OpenTxRing(idx, !o.noOffload)
		if err != nil {
			return fmt.Errorf("generator %s: %w", o.gen, err)
		}
		defer ring.Close()
		st, err = ring.Send(p.frames, pktgen.SendOptions{Duration: time.Duration(o.seconds * float64(time.Second)), Rate: o.rate})
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	time.Sleep(o.drain)
	return st.Sent, st.Elapsed.Seconds(), nil
}

func boolByte(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

type watchedProg struct {
	at     endpoint
	id     ebpf.ProgramID
	prog   *ebpf.Program
	before *ebpf.ProgramStats
}

type watchedProgs struct {
	stats io.Closer
	progs []watchedProg
}

// watchPrograms turns on run-time statistics and notes where every program
// attached to the endpoints' TCX ingress stands.
func watchPrograms(at []endpoint) (*watchedProgs, error) {
	w := &watchedProgs{}
	if len(at) == 0 {
		return w, nil
	}
	var err error
	if w.stats, err = ebpf.EnableStats(unix.BPF_STATS_RUN_TIME); err != nil {
		return nil, fmt.Errorf("enable eBPF run-time statistics: %w", err)
	}
	for _, e := range at {
		err := netns.Do(e.netns, func() error {
			idx, err := ifindex(e.dev)
			if err != nil {
				return err
			}
			res, err := link.QueryPrograms(link.QueryOptions{Target: idx, Attach: ebpf.AttachTCXIngress})
			if err != nil {
				return err
			}
			if len(res.Programs) == 0 {
				return errors.New("no program attached with TCX to its ingress")
			}
			for _, p := range res.Programs {
				prog, err := ebpf.NewProgramFromID(p.ID)
				if err != nil {
					return err
				}
				w.progs = append(w.progs, watchedProg{at: e, id: p.ID, prog: prog})
			}
			return nil
		})
		if err != nil {
			w.close()
			return nil, fmt.Errorf("-prog-stats %s: %w", e, err)
		}
	}
	for i := range w.progs {
		if w.progs[i].before, err = w.progs[i].prog.Stats(); err != nil {
			w.close()
			return nil, fmt.Errorf("program %d statistics: %w", w.progs[i].id, err)
		}
	}
	return w, nil
}

func (w *watchedProgs) results() ([]ProgResult, error) {
	out := []ProgResult{}
	for _, p := range w.progs {
		after, err := p.prog.Stats()
		if err != nil {
			return nil, fmt.Errorf("program %d statistics: %w", p.id, err)
		}
		name := ""
		if info, err := p.prog.Info(); err == nil {
			name = info.Name
		}
		out = append(out, ProgResult{At: p.at.String(), ID: uint32(p.id), Name: name,
			Runs: after.RunCount - p.before.RunCount, RunTime: int64(after.Runtime - p.before.Runtime)})
	}
	return out, nil
}

func (w *watchedProgs) close() {
	for _, p := range w.progs {
		p.prog.Close()
	}
	if w.stats != nil {
		w.stats.Close()
	}
}

func attachSink(at endpoint, prog *ebpf.Program) (l link.Link, err error) {
	err = netns.Do(at.netns, func() error {
		idx, err := ifindex(at.dev)
		if err != nil {
			return fmt.Errorf("sink %s: %w", at, err)
		}
		l, err = link.AttachTCX(link.TCXOptions{Interface: idx, Program: prog, Attach: ebpf.AttachTCXIngress})
		if err != nil {
			return fmt.Errorf("attach sink to %s: %w", at, err)
		}
		return nil
	})
	return l, err
}

// send runs the generator until o.seconds have passed and returns how long it
// sent. Each BPF_PROG_RUN call has a fixed cost (it sets up and tears down a page
// pool, which waits for an RCU grace period: tens of ms on a VM), so calls are sized
// to last up to callTarget each, from the rate of the call before.
func send(prog *ebpf.Program, idx int, template []byte, o options) (float64, error) {
	ctx := pktgen.XDPMd{DataEnd: uint32(len(template)), IngressIfindex: uint32(idx)}
	start := time.Now()
	deadline := start.Add(time.Duration(o.seconds * float64(time.Second)))
	repeat := uint64(firstCall)
	for now := start; now.Before(deadline); now = time.Now() {
		_, err := prog.Run(&ebpf.RunOptions{
			Data: template, Repeat: uint32(repeat), Flags: unix.BPF_F_TEST_XDP_LIVE_FRAMES, Context: ctx,
		})
		if err != nil {
			return 0, fmt.Errorf("live frames out of ifindex %d: %w", idx, err)
		}
		took := time.Since(now)
		perSecond := float64(repeat) / max(took.Seconds(), 1e-6)
		left := min(time.Until(deadline), callTarget)
		repeat = uint64(max(float64(firstCall), min(perSecond*left.Seconds(), 1<<31)))
	}
	return time.Since(start).Seconds(), nil
}

func sentFrames(m *ebpf.Map) (uint64, error) {
	var per []trafficSgwGenState
	if err := m.Lookup(uint32(0), &per); err != nil {
		return 0, fmt.Errorf("read generator state: %w", err)
	}
	var n uint64
	for _, s := range per {
		n += s.Sent
	}
	return n, nil
}

func readSink(m *ebpf.Map) (SinkResult, error) {
	sum := func(key uint32) (uint64, error) {
		var per []uint64
		if err := m.Lookup(key, &per); err != nil {
			return 0, err
		}
		var n uint64
		for _, v := range per {
			n += v
		}
		return n, nil
	}
	var s SinkResult
	var errs []error
	for key, dst := range []*uint64{&s.Frames, &s.Bytes, &s.DstIsOwnMAC, &s.SrcIsVMAC} {
		v, err := sum(uint32(key))
		errs = append(errs, err)
		*dst = v
	}
	return s, errors.Join(errs...)
}

func ifindex(dev string) (int, error) {
	i, err := net.InterfaceByName(dev)
	if err != nil {
		return 0, err
	}
	return i.Index, nil
}
