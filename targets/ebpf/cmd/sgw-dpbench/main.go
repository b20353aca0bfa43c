// Command sgw-dpbench measures the supergw eBPF datapath on its fast path
// (host → vmac → gateway) for 64-byte frames, on one core:
//
//	progrun  BPF_PROG_RUN with Repeat on the tc program (ns per packet, no I/O)
//	live     real frames into the switch's host port (a veth), where the tc program
//	         attached by dataplane.New forwards them to the gateway port: sent by an
//	         XDP program in BPF_F_TEST_XDP_LIVE_FRAMES mode where the kernel allows it,
//	         else through an AF_PACKET TX ring (-gen-mode; the result names the mode)
//
// It builds its own namespace sgw-dp-bench-<pid> with two veth pairs and removes
// it on exit. Needs root. Results go to stdout, as JSON with -json.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"supergw/targets/ebpf/internal/pktgen"
)

func init() {
	// Every namespace-scoped syscall runs on this thread (see enterNetns).
	runtime.LockOSThread()
}

type options struct {
	mode     string
	packets  uint
	size     int
	deviceID uint64
	cpu      int
	jsonOut  bool
	verbose  bool
	ipv6     bool
	genMode  pktgen.Mode
}

// Result is one measurement.
type Result struct {
	Mode        string  `json:"mode"`
	Family      string  `json:"family"`
	FrameBytes  int     `json:"frame_bytes"`
	Packets     uint64  `json:"packets"`
	Forwarded   uint64  `json:"forwarded"`
	Seconds     float64 `json:"seconds"`
	NsPerPacket float64 `json:"ns_per_packet"`
	Mpps        float64 `json:"mpps"`
	CPU         int     `json:"cpu"`
	// Generator says how a live run sent its frames (nil for progrun).
	Generator *pktgen.Choice `json:"generator,omitempty"`
}

func main() {
	var o options
	flag.StringVar(&o.mode, "mode", "progrun", "progrun, live or both")
	flag.UintVar(&o.packets, "n", 10_000_000, "frames to run or send")
	flag.IntVar(&o.size, "size", 60, "frame size without FCS (60 = a 64-byte frame on the wire)")
	flag.Uint64Var(&o.deviceID, "device-id", 990, "device id of the benchmark switch (pin directory)")
	flag.IntVar(&o.cpu, "cpu", 0, "CPU to run on")
	flag.BoolVar(&o.jsonOut, "json", false, "print results as JSON lines")
	flag.BoolVar(&o.verbose, "v", false, "print link and drop statistics after the live run")
	flag.BoolVar(&o.ipv6, "ipv6", false, "IPv6/UDP frames from a learned address, nd_settings configured (needs -size >= 62)")
	mode := flag.String("gen-mode", string(pktgen.Auto), "live mode's generator: auto (the first this kernel allows), "+
		string(pktgen.LiveFrames)+" or "+string(pktgen.PacketTxRing))
	flag.Parse()
	var err error
	if o.genMode, err = pktgen.ParseMode(*mode); err != nil {
		log.Fatalf("-gen-mode: %v", err)
	}
	results, err := runBench(o)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range results {
		if o.jsonOut {
			b, _ := json.Marshal(r)
			fmt.Println(string(b))
			continue
		}
		fmt.Printf("%-8s %s %d-byte frames: %d sent, %d forwarded in %.3f s: %.1f ns/packet, %.2f Mpps (cpu %d)\n",
			r.Mode, r.Family, r.FrameBytes, r.Packets, r.Forwarded, r.Seconds, r.NsPerPacket, r.Mpps, r.CPU)
		if r.Generator != nil {
			fmt.Printf("         generator %s: %s\n", r.Generator.Mode, r.Generator.Why)
		}
	}
}

func runBench(o options) ([]Result, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("sgw-dpbench needs root (eBPF, namespaces)")
	}
	if o.size < 60 || o.size > 1514 {
		return nil, fmt.Errorf("-size %d: want 60..1514", o.size)
	}
	if o.ipv6 && o.size < minIPv6Frame {
		return nil, fmt.Errorf("-ipv6 -size %d: an IPv6/UDP frame needs at least %d bytes", o.size, minIPv6Frame)
	}
	if o.packets == 0 || o.packets > 1<<32-1 {
		return nil, fmt.Errorf("-n %d: want 1..%d", o.packets, uint32(1<<32-1))
	}
	var set unix.CPUSet
	set.Set(o.cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("pin to cpu %d: %w", o.cpu, err)
	}
	env, err := newBenchEnv(o)
	if err != nil {
		return nil, err
	}
	defer env.close()
	var out []Result
	if o.mode == "progrun" || o.mode == "both" {
		r, err := env.progRun()
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if o.mode == "live" || o.mode == "both" {
		r, err := env.live()
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-mode %q: want progrun, live or both", o.mode)
	}
	return out, nil
}

func rate(mode string, o options, sent, forwarded uint64, elapsed time.Duration) Result {
	r := Result{Mode: mode, Family: family(o), FrameBytes: o.size, Packets: sent, Forwarded: forwarded, Seconds: elapsed.Seconds(), CPU: o.cpu}
	if forwarded > 0 {
		r.NsPerPacket = float64(elapsed.Nanoseconds()) / float64(forwarded)
		r.Mpps = float64(forwarded) / elapsed.Seconds() / 1e6
	}
	return r
}
