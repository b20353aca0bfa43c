package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"supergw/targets/ebpf/internal/bucket"
	"supergw/targets/ebpf/internal/dataplane"
	"supergw/targets/ebpf/internal/p4constants"
	"supergw/targets/ebpf/internal/pktgen"
)

// Topology inside sgw-dp-bench-<pid>:
//
//	sgw-dp-bgen ── sgw-dp-bh [switch port 1, host]   tc: supergw pipeline
//	sgw-dp-bsnk ── sgw-dp-bg [switch port 3, gateway]
const (
	hostPort      uint16 = 1
	gwPort        uint16 = 3
	tcActRedirect        = 7
)

var (
	hostMAC  = dataplane.MAC{0x02, 0x00, 0x00, 0x00, 0x00, 0x01}
	vmacBase = dataplane.MAC{0x02, 0x53, 0x47, 0x00, 0x00, 0x00}
	gwIP     = dataplane.IPv4{10, 0, 0, 1}
)

const kBuckets = 256

type benchEnv struct {
	o       options
	ns      string
	origNS  int
	dp      *dataplane.EBPF
	bucket  uint16
	vmac    dataplane.MAC
	cleanup []func()
}

func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

func newBenchEnv(o options) (_ *benchEnv, err error) {
	e := &benchEnv{o: o, ns: fmt.Sprintf("sgw-dp-bench-%d", os.Getpid()), origNS: -1}
	defer func() {
		if err != nil {
			e.close()
		}
	}()
	if err := ip("netns", "add", e.ns); err != nil {
		return nil, err
	}
	e.cleanup = append(e.cleanup, func() { _ = ip("netns", "del", e.ns) })
	for _, args := range [][]string{
		{"link", "add", "sgw-dp-bh", "type", "veth", "peer", "name", "sgw-dp-bgen"},
		{"link", "add", "sgw-dp-bg", "type", "veth", "peer", "name", "sgw-dp-bsnk"},
		{"link", "set", "lo", "up"},
		{"link", "set", "sgw-dp-bh", "up"}, {"link", "set", "sgw-dp-bgen", "up"},
		{"link", "set", "sgw-dp-bg", "up"}, {"link", "set", "sgw-dp-bsnk", "up"},
	} {
		if err := ip(append([]string{"-n", e.ns}, args...)...); err != nil {
			return nil, err
		}
	}
	if err := e.enterNetns(); err != nil {
		return nil, err
	}
	e.dp, err = dataplane.New(dataplane.Config{
		DeviceID: o.deviceID,
		Ports:    map[uint16]string{hostPort: "sgw-dp-bh", gwPort: "sgw-dp-bg"},
		CPUPort:  p4constants.CPUPort,
	})
	if err != nil {
		return nil, err
	}
	e.cleanup = append(e.cleanup, func() { _ = e.dp.Close() })
	return e, e.configure()
}

// enterNetns moves this (locked) thread into the benchmark namespace.
func (e *benchEnv) enterNetns() error {
	orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	e.origNS = orig
	target, err := unix.Open("/run/netns/"+e.ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(target)
	if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("enter %s: %w", e.ns, err)
	}
	return nil
}

func (e *benchEnv) configure() error {
	b, err := bucket.Of(hostMAC, kBuckets, p4constants.BucketHashCRC32)
	if err != nil {
		return err
	}
	v, err := bucket.VMAC(vmacBase, b)
	if err != nil {
		return err
	}
	e.bucket, e.vmac = b, v
	dp := e.dp
	return errors.Join(
		dp.SetPortRole(hostPort, uint8(p4constants.PortRoleHost)),
		dp.SetPortRole(gwPort, uint8(p4constants.PortRoleGateway)),
		dp.SetDispatchConfig(dataplane.DispatchConfig{Configured: true, GatewayIP: gwIP, VMACBase: vmacBase, BucketMask: kBuckets - 1,
			BucketHash: p4constants.BucketHashCRC32}),
		dp.SetLearned(hostMAC, hostPort),
		dp.SetNDConfig(dataplane.NDConfig{Configured: true, LinkLocal: gwLL, Global: gwGUA}),
		dp.SetLearnedIP6(hostIP6, hostMAC),
		dp.SetFloodGroup(p4constants.HostFloodGroup, []uint16{hostPort}),
	)
}

// minIPv6Frame is Ethernet, IPv6 and UDP headers.
const minIPv6Frame = 14 + 40 + 8

var (
	hostIP6 = dataplane.IPv6{0x20, 0x01, 0x0d, 0xb8, 15: 0x0b}
	gwLL    = dataplane.IPv6{0xfe, 0x80, 15: 0x01}
	gwGUA   = dataplane.IPv6{0x20, 0x01, 0x0d, 0xb8, 15: 0x01}
)

func family(o options) string {
	if o.ipv6 {
		return "ipv6"
	}
	return "ipv4"
}

// frame is a host → vmac IPv4/UDP (or, with -ipv6, IPv6/UDP) frame of o.size bytes.
func (e *benchEnv) frame() []byte {
	if e.o.ipv6 {
		return e.frame6()
	}
	f := make([]byte, e.o.size)
	copy(f[0:6], e.vmac[:])
	copy(f[6:12], hostMAC[:])
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ipHdr := f[14:34]
	ipHdr[0] = 0x45
	binary.BigEndian.PutUint16(ipHdr[2:], uint16(e.o.size-14))
	ipHdr[8], ipHdr[9] = 64, 17
	copy(ipHdr[12:], []byte{10, 0, 0, 11})
	copy(ipHdr[16:], []byte{192, 0, 2, 1})
	binary.BigEndian.PutUint16(f[34:], 12345)
	binary.BigEndian.PutUint16(f[36:], 9)
	binary.BigEndian.PutUint16(f[38:], uint16(e.o.size-34))
	return f
}

// frame6 is a host → vmac IPv6/UDP frame from hostIP6 (learned) to 2001:db8:ffff::1.
func (e *benchEnv) frame6() []byte {
	f := make([]byte, e.o.size)
	copy(f[0:6], e.vmac[:])
	copy(f[6:12], hostMAC[:])
	binary.BigEndian.PutUint16(f[12:], 0x86dd)
	ip := f[14:54]
	ip[0] = 0x60
	binary.BigEndian.PutUint16(ip[4:], uint16(e.o.size-54))
	ip[6], ip[7] = 17, 64
	copy(ip[8:], hostIP6[:])
	copy(ip[24:], []byte{0x20, 0x01, 0x0d, 0xb8, 0xff, 0xff, 15: 0x01})
	binary.BigEndian.PutUint16(f[54:], 12345)
	binary.BigEndian.PutUint16(f[56:], 9)
	binary.BigEndian.PutUint16(f[58:], uint16(e.o.size-54))
	return f
}

// progRun: BPF_PROG_RUN reuses one buffer, so the bucket's gateway MAC is the
// vmac itself and every repetition takes the same host → gateway path.
func (e *benchEnv) progRun() (Result, error) {
	if err := e.dp.SetBucket(e.bucket, gwPort, e.vmac); err != nil {
		return Result{}, err
	}
	before, err := e.dp.BucketCounter(e.bucket)
	if err != nil {
		return Result{}, err
	}
	ret, per, err := e.dp.RunIngress(hostPort, e.frame(), uint32(e.o.packets))
	if err != nil {
		return Result{}, err
	}
	if ret != tcActRedirect {
		return Result{}, fmt.Errorf("progrun: verdict %d, want TC_ACT_REDIRECT", ret)
	}
	after, err := e.dp.BucketCounter(e.bucket)
	if err != nil {
		return Result{}, err
	}
	n := uint64(e.o.packets)
	if got := after.Packets - before.Packets; got < n {
		return Result{}, fmt.Errorf("progrun: bucket counter moved by %d, want >= %d", got, n)
	}
	return rate("progrun", e.o, n, n, per*time.Duration(n)), nil
}

// live sends real frames into the switch port sgw-dp-bh, whose tc program forwards
// them out of sgw-dp-bg to the sink, in the generator mode this kernel allows
// (internal/pktgen): sgw_gen_tx returning XDP_TX in live-frame mode out of sgw-dp-bgen,
// or an AF_PACKET TX ring on sgw-dp-bgen. The generator, the switch and the sink share
// one core: a lower bound. Live-frame pages are recycled without being rewritten, and
// the switch edits frames in place, so here too the bucket's gateway MAC is the vmac
// itself (the TX ring copies the frame anew each time; the same setting keeps both
// modes on one path).
func (e *benchEnv) live() (Result, error) {
	choice, err := pktgen.Choose(e.o.genMode, pktgen.ProbeLiveFrames)
	if err != nil {
		return Result{}, err
	}
	if err := e.dp.SetBucket(e.bucket, gwPort, e.vmac); err != nil {
		return Result{}, err
	}
	var objs trafficgenObjects
	if err := loadTrafficgenObjects(&objs, nil); err != nil {
		return Result{}, fmt.Errorf("load traffic generator: %w", err)
	}
	defer objs.Close()
	gen, err := dataplane.Ifindex("sgw-dp-bgen")
	if err != nil {
		return Result{}, err
	}
	sink, err := dataplane.Ifindex("sgw-dp-bsnk")
	if err != nil {
		return Result{}, err
	}
	// The switch port must run NAPI to take XDP frames from its veth peer;
	// GRO turns it on without putting an XDP program on the switch port.
	if out, err := exec.Command("ethtool", "-K", "sgw-dp-bh", "gro", "on").CombinedOutput(); err != nil {
		return Result{}, fmt.Errorf("ethtool -K sgw-dp-bh gro on: %v: %s", err, out)
	}
	type xdpAttach struct {
		prog *ebpf.Program
		idx  int
	}
	attach := []xdpAttach{{objs.SgwSinkDrop, sink}}
	if choice.Mode == pktgen.LiveFrames {
		// Live-frame XDP_TX needs an XDP program on the generator's veth.
		attach = append(attach, xdpAttach{objs.SgwGenPass, gen})
	}
	for _, a := range attach {
		l, err := link.AttachXDP(link.XDPOptions{Program: a.prog, Interface: a.idx})
		if err != nil {
			return Result{}, fmt.Errorf("attach XDP to ifindex %d: %w", a.idx, err)
		}
		defer l.Close()
	}
	frame := e.frame()
	txBefore, err := e.dp.PortTxCounter(gwPort)
	if err != nil {
		return Result{}, err
	}
	start := time.Now()
	sent := uint64(e.o.packets)
	if choice.Mode == pktgen.LiveFrames {
		_, err = objs.SgwGenTx.Run(&ebpf.RunOptions{
			Data:    frame,
			Repeat:  uint32(e.o.packets),
			Flags:   unix.BPF_F_TEST_XDP_LIVE_FRAMES,
			Context: pktgen.XDPMd{DataEnd: uint32(len(frame)), IngressIfindex: uint32(gen)},
		})
	} else {
		sent, err = sendRing(gen, frame, sent)
	}
	if err != nil {
		return Result{}, fmt.Errorf("live frames (%s): %w", choice.Mode, err)
	}
	// Let the last NAPI batch drain before reading the counters.
	time.Sleep(50 * time.Millisecond)
	elapsed := time.Since(start) - 50*time.Millisecond
	txAfter, err := e.dp.PortTxCounter(gwPort)
	if err != nil {
		return Result{}, err
	}
	if e.o.verbose {
		e.dumpStats()
	}
	r := rate("live", e.o, sent, txAfter.Packets-txBefore.Packets, elapsed)
	r.Generator = &choice
	return r, nil
}

// sendRing sends n copies of frame through an AF_PACKET TX ring on ifindex gen (at
// most a minute's worth) and returns how many the kernel took.
func sendRing(gen int, frame []byte, n uint64) (uint64, error) {
	ring, err := pktgen.OpenTxRing(gen, true)
	if err != nil {
		return 0, err
	}
	defer ring.Close()
	st, err := ring.Send([][]byte{frame}, pktgen.SendOptions{Duration: time.Minute, Frames: n})
	return st.Sent, err
}

func (e *benchEnv) close() {
	for i := len(e.cleanup) - 1; i >= 0; i-- {
		e.cleanup[i]()
	}
	if e.origNS >= 0 {
		_ = unix.Setns(e.origNS, unix.CLONE_NEWNET)
		unix.Close(e.origNS)
	}
}

// dumpStats prints link and drop statistics, to see where frames were lost.
func (e *benchEnv) dumpStats() {
	out, _ := exec.Command("ip", "-s", "link").CombinedOutput()
	fmt.Fprintf(os.Stderr, "%s", out)
	out, _ = exec.Command("bpftool", "prog", "show", "name", "sgw_ingress").CombinedOutput()
	fmt.Fprintf(os.Stderr, "%s", out)
	for _, dev := range []string{"sgw-dp-bgen", "sgw-dp-bh", "sgw-dp-bg", "sgw-dp-bsnk"} {
		out, _ := exec.Command("ethtool", "-S", dev).CombinedOutput()
		fmt.Fprintf(os.Stderr, "%s:\n%s", dev, out)
	}
	for r := uint16(0); r < p4constants.DropCounterSize; r++ {
		if c, err := e.dp.DropCounter(r); err == nil && c.Packets > 0 {
			fmt.Fprintf(os.Stderr, "drop_counter[%s] = %d packets\n", p4constants.DropReason(r), c.Packets)
		}
	}
}
