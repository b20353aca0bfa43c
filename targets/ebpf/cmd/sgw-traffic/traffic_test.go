package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"supergw/targets/ebpf/internal/netns"
	"supergw/targets/ebpf/internal/netnstest"
	"supergw/targets/ebpf/internal/pktgen"
)

// eachMode runs f once per generator mode as a subtest; a mode this kernel refuses
// is skipped with the kernel's answer, so the tests run whichever modes exist here.
func eachMode(t *testing.T, f func(t *testing.T, mode pktgen.Mode)) {
	for _, mode := range []pktgen.Mode{pktgen.LiveFrames, pktgen.PacketTxRing} {
		t.Run(string(mode), func(t *testing.T) {
			if mode == pktgen.LiveFrames {
				if err := pktgen.ProbeLiveFrames(); err != nil {
					t.Skipf("%v", err)
				}
			}
			f(t, mode)
		})
	}
}

// TestSinkTellsRewrittenFromNot sends a plan through a veth pair and checks that the
// sink counts every frame, and tells frames to its own MAC and frames from a vmac
// from the others: the benchmark's rewrite checks rest on these counters.
func TestSinkTellsRewrittenFromNot(t *testing.T) {
	eachMode(t, testSinkTellsRewrittenFromNot)
}

func testSinkTellsRewrittenFromNot(t *testing.T, mode pktgen.Mode) {
	ns := netnstest.VethPair(t, "sgw-tr-test")
	own := []byte{0x02, 0, 0, 0, 0, 0x99}
	vmac := []byte{0x02, 0x5e, 0x98, 0, 0, 0x07}  // bucket 7 of 02:5e:98:00:00:00/256
	other := []byte{0x02, 0x5e, 0x98, 0, 0x01, 0} // low bits above the mask: not a vmac
	host := []byte{0x02, 0xaa, 0, 0, 0, 0x01}
	plan := [][2][]byte{{own, host}, {own, vmac}, {host, vmac}, {host, other}} // {dst, src}
	var frames [][]byte
	for _, p := range plan {
		f := make([]byte, 60)
		copy(f[0:6], p[0])
		copy(f[6:12], p[1])
		binary.BigEndian.PutUint16(f[12:], 0x0800)
		f[14] = 0x45
		frames = append(frames, f)
	}
	start := time.Now()
	r := sendPaced(t, ns, frames, mode)
	s := r.Sinks[0]
	if r.Sent == 0 || s.Frames != r.Sent || r.Family != "ipv4" || r.Generator.Mode != mode {
		t.Fatalf("sent %d (%s, generator %+v), the sink counted %d", r.Sent, r.Family, r.Generator, s.Frames)
	}
	// Paced at pacedRate for 0.2 s: about 100 frames, not the millions an unpaced run sends.
	if max := uint64(pacedRate*time.Since(start).Seconds()) + 64; r.Sent > max {
		t.Errorf("paced at %d/s, sent %d in %v", pacedRate, r.Sent, time.Since(start))
	}
	// Round robin over the 4 frames: half to the sink's own MAC, half from a vmac.
	n := r.Sent / 4
	for _, c := range []struct {
		name string
		got  uint64
	}{{"dst_is_own_mac", s.DstIsOwnMAC}, {"src_is_vmac", s.SrcIsVMAC}} {
		if c.got < 2*n || c.got > 2*n+2 {
			t.Errorf("%s = %d of %d frames, want half", c.name, c.got, r.Sent)
		}
	}
}

// TestIPv6PlanFramesCarryAllTheirHeaders sends a plan of IPv6 frames that differ only past
// the IPv4 header length (the IPv6 destination's tail, the UDP header) and reads what reaches
// the sink's veth with a packet socket (it sees frames before the tc sink drops them): every
// frame carries the 62 bytes of headers of one plan frame, and both plan frames arrive.
func TestIPv6PlanFramesCarryAllTheirHeaders(t *testing.T) {
	eachMode(t, testIPv6PlanFramesCarryAllTheirHeaders)
}

func testIPv6PlanFramesCarryAllTheirHeaders(t *testing.T, mode pktgen.Mode) {
	ns := netnstest.VethPair(t, "sgw-tr-test")
	var frames [][]byte
	for i := byte(1); i <= 2; i++ {
		f := make([]byte, 80)
		copy(f[0:6], []byte{0x02, 0, 0, 0, 0, 0x99})
		copy(f[6:12], []byte{0x02, 0xaa, 0, 0, 0, 0x01})
		binary.BigEndian.PutUint16(f[12:], 0x86dd)
		f[14] = 0x60
		for b := headerLen4; b < headerLen; b++ {
			f[b] = i
		}
		frames = append(frames, f)
	}
	var fd int
	runtime.LockOSThread() // netns.Do switches this thread's namespace
	defer runtime.UnlockOSThread()
	if err := netns.Do(ns, func() error {
		var err error
		fd, err = packetSocket("sink0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	r := sendPaced(t, ns, frames, mode)
	if r.Sent == 0 || r.Sinks[0].Frames != r.Sent || r.Family != "ipv6" {
		t.Fatalf("sent %d (%s), the sink counted %d", r.Sent, r.Family, r.Sinks[0].Frames)
	}
	seen := map[byte]int{}
	buf := make([]byte, 2048)
	for {
		n, _, err := unix.Recvfrom(fd, buf, unix.MSG_DONTWAIT)
		if err != nil {
			break
		}
		if n < headerLen || binary.BigEndian.Uint16(buf[12:]) != 0x86dd {
			continue
		}
		which := buf[headerLen4]
		if which < 1 || which > 2 || !bytes.Equal(buf[:headerLen], frames[which-1][:headerLen]) {
			t.Fatalf("a frame's headers are no plan frame's: % x", buf[:headerLen])
		}
		seen[which]++
	}
	if seen[1] == 0 || seen[2] == 0 {
		t.Fatalf("plan frames seen at the sink: %v", seen)
	}
}

func packetSocket(dev string) (int, error) {
	idx, err := ifindex(dev)
	if err != nil {
		return -1, err
	}
	proto := uint16(unix.ETH_P_ALL)<<8 | uint16(unix.ETH_P_ALL)>>8 // network byte order
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, int(proto))
	if err != nil {
		return -1, err
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: idx}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// pacedRate keeps a run's ~100 frames inside the sink veth's 256-frame XDP ring: on a loaded
// machine (CI runs Go packages' tests side by side) the sink's NAPI may not run for the whole
// 0.2 s, and at 2000/s (400 frames) the ring overflowed there: 52 of 373 counted.
const pacedRate = 500

// TestAutoModeIsWhatTheKernelAllows: without -gen-mode the generator uses live frames
// exactly where the kernel allows them, and its result says which mode it used and why.
func TestAutoModeIsWhatTheKernelAllows(t *testing.T) {
	ns := netnstest.VethPair(t, "sgw-tr-test")
	f := make([]byte, 60)
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	r := sendPaced(t, ns, [][]byte{f}, pktgen.Auto)
	want := pktgen.LiveFrames
	if pktgen.ProbeLiveFrames() != nil {
		want = pktgen.PacketTxRing
	}
	if r.Generator.Mode != want || r.Generator.Why == "" || r.Sent == 0 || r.Sinks[0].Frames != r.Sent {
		t.Fatalf("auto: generator %+v (want %s), sent %d, counted %d", r.Generator, want, r.Sent, r.Sinks[0].Frames)
	}
}

// sendPaced sends the plan out of gen0 at pacedRate frames a second for 0.2 s, sink on sink0.
func sendPaced(t *testing.T, ns string, frames [][]byte, mode pktgen.Mode) Result {
	t.Helper()
	var data []byte
	for _, f := range frames {
		data = binary.LittleEndian.AppendUint16(data, uint16(len(f)))
		data = append(data, f...)
	}
	file := filepath.Join(t.TempDir(), "plan.bin")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	o, err := parseFlags([]string{"-gen", ns + ":gen0", "-sink", ns + ":sink0", "-frames", file, "-seconds", "0.2",
		"-rate", fmt.Sprint(pacedRate), "-vmac-base", "02:5e:98:00:00:00", "-bucket-mask", "255", "-drain", "1s", "-gen-mode", string(mode)}) // a loaded machine delivers late
	if err != nil {
		t.Fatal(err)
	}
	// run switches this thread's namespace and CPU affinity: keep the goroutine on it.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r, err := run(o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
