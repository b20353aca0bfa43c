package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSinkTellsRewrittenFromNot sends a plan through a veth pair and checks that the
// sink counts every frame, and tells frames to its own MAC and frames from a vmac
// from the others: the benchmark's rewrite checks rest on these counters.
func TestSinkTellsRewrittenFromNot(t *testing.T) {
	ns := vethNamespace(t)
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
	r := sendPaced(t, ns, frames)
	s := r.Sinks[0]
	if r.Sent == 0 || s.Frames != r.Sent || r.Family != "ipv4" {
		t.Fatalf("sent %d (%s), the sink counted %d", r.Sent, r.Family, s.Frames)
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
	ns := vethNamespace(t)
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
	if err := inNetns(ns, func() error {
		var err error
		fd, err = packetSocket("sink0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	r := sendPaced(t, ns, frames)
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

// sendPaced sends the plan out of gen0 at pacedRate frames a second for 0.2 s, sink on sink0.
func sendPaced(t *testing.T, ns string, frames [][]byte) Result {
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
		"-rate", fmt.Sprint(pacedRate), "-vmac-base", "02:5e:98:00:00:00", "-bucket-mask", "255", "-drain", "1s"}) // a loaded machine delivers late
	if err != nil {
		t.Fatal(err)
	}
	r, err := run(o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// vethNamespace is a namespace with a veth pair gen0 -> sink0 (sink0 has MAC 02:00:00:00:00:99).
func vethNamespace(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (namespaces, eBPF)")
	}
	ns := fmt.Sprintf("sgw-tr-test-%d", os.Getpid())
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	ip("netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	// No IPv6 in the namespace: its autoconfiguration frames (MLD, DAD) would reach the
	// sink without having been sent by the generator.
	for _, k := range []string{"net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"} {
		if out, err := exec.Command("ip", "netns", "exec", ns, "sysctl", "-qw", k).CombinedOutput(); err != nil {
			t.Fatalf("sysctl %s: %v: %s", k, err, out)
		}
	}
	sinkMAC := "02:00:00:00:00:99"
	ip("-n", ns, "link", "add", "gen0", "type", "veth", "peer", "name", "sink0")
	ip("-n", ns, "link", "set", "sink0", "address", sinkMAC)
	ip("-n", ns, "link", "set", "gen0", "up")
	ip("-n", ns, "link", "set", "sink0", "up")
	// Live frames need the receiving veth to run NAPI (GRO gives it one).
	if out, err := exec.Command("ip", "netns", "exec", ns, "ethtool", "-K", "sink0", "gro", "on").CombinedOutput(); err != nil {
		t.Fatalf("ethtool: %v: %s", err, out)
	}
	return ns
}
