package pktgen

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"

	"supergw/targets/ebpf/internal/dataplane"
	"supergw/targets/ebpf/internal/netns"
	"supergw/targets/ebpf/internal/netnstest"
)

// testEthertype marks the tests' frames (IEEE 802 local experimental).
const testEthertype = 0x88b5

func testFrame(n int, tag byte) []byte {
	f := make([]byte, n)
	copy(f, []byte{0x02, 0, 0, 0, 0, 0x99, 0x02, 0xaa, 0, 0, 0, 0x01})
	binary.BigEndian.PutUint16(f[12:], testEthertype)
	f[14] = tag
	return f
}

// inPair runs f in a fresh veth pair's namespace with the calling goroutine's thread held.
func inPair(t *testing.T, f func() error) {
	t.Helper()
	ns := netnstest.VethPair(t, "sgw-pg-test")
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := netns.Do(ns, f); err != nil {
		t.Fatal(err)
	}
}

// receiver is a packet socket on sink0 that reads the tests' frames.
type receiver struct{ fd int }

func listen(t *testing.T) receiver {
	t.Helper()
	return listenFor(t, testEthertype)
}

// listenFor receives the frames of one ethertype (unix.ETH_P_ALL: every frame) at sink0.
func listenFor(t *testing.T, ethertype uint16) receiver {
	t.Helper()
	idx, err := dataplane.Ifindex("sink0")
	if err != nil {
		t.Fatal(err)
	}
	proto := (ethertype&0xff)<<8 | ethertype>>8 // network byte order
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(proto))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: idx}); err != nil {
		t.Fatal(err)
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 8<<20)
	return receiver{fd}
}

// frames reads what arrived within wait.
func (r receiver) frames(wait time.Duration) [][]byte {
	var got [][]byte
	buf := make([]byte, 4096)
	tv := unix.NsecToTimeval(wait.Nanoseconds())
	_ = unix.SetsockoptTimeval(r.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	for {
		n, _, err := unix.Recvfrom(r.fd, buf, 0)
		if err != nil {
			return got
		}
		got = append(got, bytes.Clone(buf[:n]))
	}
}

// TestTxRingSendsThePlanRoundRobin: every frame the ring says it sent arrives at the
// other end, whole, in the plan's order.
func TestTxRingSendsThePlanRoundRobin(t *testing.T) {
	plan := [][]byte{testFrame(60, 1), testFrame(60, 2), testFrame(60, 3)}
	inPair(t, func() error {
		rx := listen(t)
		idx, err := dataplane.Ifindex("gen0")
		if err != nil {
			return err
		}
		ring, err := OpenTxRing(idx, false)
		if err != nil {
			return err
		}
		defer ring.Close()
		st, err := ring.Send(plan, SendOptions{Duration: 5 * time.Second, Frames: 300})
		if err != nil {
			return err
		}
		got := rx.frames(300 * time.Millisecond)
		if st.Sent != 300 || len(got) != 300 {
			t.Fatalf("the ring sent %d of 300, %d arrived", st.Sent, len(got))
		}
		for i, f := range got {
			if !bytes.Equal(f, plan[i%3]) {
				t.Fatalf("frame %d arrived as % x, want plan frame %d", i, f[:16], i%3)
			}
		}
		return nil
	})
}

// TestTxRingKeepsToItsRate: paced, the ring sends about rate x duration (plus one
// burst), not as many as it can.
func TestTxRingKeepsToItsRate(t *testing.T) {
	inPair(t, func() error {
		rx := listen(t)
		idx, err := dataplane.Ifindex("gen0")
		if err != nil {
			return err
		}
		ring, err := OpenTxRing(idx, false)
		if err != nil {
			return err
		}
		defer ring.Close()
		const rate = 1000
		st, err := ring.Send([][]byte{testFrame(60, 1)}, SendOptions{Duration: 300 * time.Millisecond, Rate: rate})
		if err != nil {
			return err
		}
		most := uint64(rate*st.Elapsed.Seconds()) + burst + 1
		if st.Sent < rate*3/10/2 || st.Sent > most {
			t.Errorf("paced at %d/s for %v: sent %d (want %d..%d)", rate, st.Elapsed, st.Sent, rate*3/10/2, most)
		}
		if got := len(rx.frames(200 * time.Millisecond)); uint64(got) != st.Sent {
			t.Errorf("sent %d, %d arrived", st.Sent, got)
		}
		return nil
	})
}

func TestTxRingRefusesBadInput(t *testing.T) {
	inPair(t, func() error {
		if _, err := OpenTxRing(1<<20, false); err == nil || !strings.Contains(err.Error(), "bind to ifindex") {
			t.Errorf("a ring on a missing interface: %v", err)
		}
		idx, err := dataplane.Ifindex("gen0")
		if err != nil {
			return err
		}
		ring, err := OpenTxRing(idx, false)
		if err != nil {
			return err
		}
		defer ring.Close()
		for _, tc := range []struct {
			frames [][]byte
			o      SendOptions
			want   string
		}{
			{nil, SendOptions{Duration: time.Second}, "no frames"},
			{[][]byte{testFrame(60, 1), make([]byte, MaxFrame+1)}, SendOptions{Duration: time.Second}, "frame 1: 2017 bytes"},
			{[][]byte{make([]byte, 10)}, SendOptions{Duration: time.Second}, "frame 0: 10 bytes"},
			{[][]byte{testFrame(60, 1)}, SendOptions{}, "duration 0s"},
		} {
			if _, err := ring.Send(tc.frames, tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: error %v", tc.want, err)
			}
		}
		return nil
	})
}

// TestProbeTellsTheTruth: where the probe says the kernel allows live frames, a real
// live-frame run transmits; where it says the kernel refuses, a real run is refused.
func TestProbeTellsTheTruth(t *testing.T) {
	probe := ProbeLiveFrames()
	inPair(t, func() error {
		rx := listen(t)
		idx, err := dataplane.Ifindex("gen0")
		if err != nil {
			return err
		}
		tx, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "Dual MIT/GPL",
			Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 3 /* XDP_TX */), asm.Return()}})
		if err != nil {
			return err
		}
		defer tx.Close()
		f := testFrame(60, 7)
		_, err = tx.Run(&ebpf.RunOptions{Data: f, Repeat: 10, Flags: unix.BPF_F_TEST_XDP_LIVE_FRAMES,
			Context: XDPMd{DataEnd: uint32(len(f)), IngressIfindex: uint32(idx)}})
		switch {
		case probe == nil && err != nil:
			t.Errorf("the probe says live frames are allowed, a live run failed: %v", err)
		case probe == nil && len(rx.frames(300*time.Millisecond)) == 0:
			t.Error("the probe says live frames are allowed, a live run sent nothing")
		case probe != nil && err == nil:
			t.Errorf("the probe says %v, yet a live run was allowed", probe)
		case probe != nil && !errors.Is(probe, ErrLiveFramesRefused):
			t.Errorf("the probe's refusal is not ErrLiveFramesRefused: %v", probe)
		}
		return nil
	})
}

// udpFrame is an Ethernet/IPv4 (ihl 5 or 6) or IPv6 frame carrying UDP, n bytes long.
func udpFrame(v6 bool, ihl int, n int) []byte {
	f := make([]byte, n)
	copy(f, []byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1})
	if v6 {
		f[12], f[13], f[14], f[20] = 0x86, 0xdd, 0x60, 17
	} else {
		f[12], f[13], f[14], f[23] = 0x08, 0x00, byte(0x40|ihl), 17
	}
	return f
}

func TestVnetHeaderMarksUDPChecksums(t *testing.T) {
	le := func(h []byte, off int) uint16 { return uint16(h[off]) | uint16(h[off+1])<<8 }
	for _, c := range []struct {
		name  string
		frame []byte
		start uint16 // 0: no NEEDS_CSUM
	}{
		{"IPv4 UDP", udpFrame(false, 5, 60), 34},
		{"IPv4 with options, UDP", udpFrame(false, 6, 64), 38},
		{"IPv6 UDP", udpFrame(true, 0, 62), 54},
		{"IPv6 UDP cut before its header ends", udpFrame(true, 0, 60), 0},
		{"not UDP", testFrame(60, 1), 0},
	} {
		h := vnetHeader(c.frame)
		if len(h) != vnetHdrLen {
			t.Fatalf("%s: header of %d bytes", c.name, len(h))
		}
		if c.start == 0 {
			if h[0] != 0 || le(h, 6) != 0 {
				t.Errorf("%s: flags %d start %d, want none", c.name, h[0], le(h, 6))
			}
			continue
		}
		if h[0] != 1 || le(h, 6) != c.start || le(h, 8) != 6 {
			t.Errorf("%s: flags %d start %d offset %d, want NEEDS_CSUM at %d+6", c.name, h[0], le(h, 6), le(h, 8), c.start)
		}
	}
}

// TestTxRingOffloadSendsFramesWhole: with checksum offload each slot carries a
// virtio_net_hdr in front of its frame; what arrives is the frame alone, byte for byte.
func TestTxRingOffloadSendsFramesWhole(t *testing.T) {
	plan := [][]byte{udpFrame(false, 5, 60), udpFrame(true, 0, 62), testFrame(60, 3)}
	inPair(t, func() error {
		rx := listenFor(t, unix.ETH_P_ALL)
		idx, err := dataplane.Ifindex("gen0")
		if err != nil {
			return err
		}
		ring, err := OpenTxRing(idx, true)
		if err != nil {
			return err
		}
		defer ring.Close()
		st, err := ring.Send(plan, SendOptions{Duration: 5 * time.Second, Frames: 30})
		if err != nil {
			return err
		}
		var got [][]byte
		for _, f := range rx.frames(300 * time.Millisecond) {
			if bytes.Equal(f[6:12], plan[0][6:12]) || bytes.Equal(f[6:12], plan[2][6:12]) { // the ring's, not the kernel's own
				got = append(got, f)
			}
		}
		if st.Sent != 30 || len(got) != 30 {
			t.Fatalf("the ring sent %d of 30, %d arrived", st.Sent, len(got))
		}
		for i, f := range got {
			if !bytes.Equal(f, plan[i%3]) {
				t.Fatalf("frame %d arrived as % x, want plan frame %d", i, f, i%3)
			}
		}
		return nil
	})
}
