package dataplane

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// TestAttachOnVeths runs the real thing: the pipeline attached with TCX to
// veths in a switch namespace, a host namespace and a gateway namespace, frames
// sent and received through AF_PACKET, then Close checked to leave nothing.
func TestAttachOnVeths(t *testing.T) {
	requireRoot(t)
	sw, hostNS, gwNS := newNetns(t, "sw"), newNetns(t, "h"), newNetns(t, "g")
	wireSwitch(t, "sgw-dp", sw, hostNS, gwNS)

	deviceID := uint64(900 + os.Getpid()%100)
	var e *EBPF
	sw.do(t, func() error {
		var err error
		e, err = New(Config{DeviceID: deviceID, Ports: map[uint16]string{portH1: "sgw-dp-s1", portG1: "sgw-dp-s3"}, CPUPort: 255})
		return err
	})
	closed := false
	t.Cleanup(func() {
		if !closed {
			e.Close()
		}
	})
	pinDir := e.PinDir()
	if _, err := os.Stat(pinDir + "/sgw_buckets"); err != nil {
		t.Fatalf("maps not pinned: %v", err)
	}

	// A second instance of the same device must not clobber the first.
	sw.do(t, func() error {
		_, err := New(Config{DeviceID: deviceID, Ports: map[uint16]string{portH1: "sgw-dp-s1"}, CPUPort: 255})
		if err == nil || !strings.Contains(err.Error(), "in use") {
			return fmt.Errorf("second New on device %d: %v, want an in-use error", deviceID, err)
		}
		return nil
	})

	must(t, e.SetPortRole(portH1, role(t, "HOST")))
	must(t, e.SetPortRole(portG1, role(t, "GATEWAY")))
	must(t, e.SetDispatchConfig(DispatchConfig{Configured: true, GatewayIP: ipG, VMACBase: vmacBase, BucketMask: kBuckets - 1}))
	must(t, e.SetBucket(bucketOf(t, macH1), portG1, macGW1))
	must(t, e.SetFloodGroup(uint16(p4const(t, "HOST_FLOOD_GROUP")), []uint16{portH1}))

	hostSock := openPacketSocket(t, hostNS, "sgw-dp-h0")
	gwSock := openPacketSocket(t, gwNS, "sgw-dp-g0")
	vH1 := vmacOf(t, macH1, kBuckets, crcHash)

	// Host → gateway: dst rewritten to the gateway's MAC; the unknown source is reported.
	up := ipv4Frame(vH1, macH1, ipH1, ip4("192.0.2.1"))
	sendFrame(t, hostSock, up)
	if got := recvMatching(t, gwSock, func(f []byte) bool { return bytes.Equal(f[12:], up[12:]) }); !bytes.Equal(got[:12], append(macGW1[:], macH1[:]...)) {
		t.Errorf("gateway got %x, want dst %x src %x", got[:12], macGW1, macH1)
	}
	if c, err := e.BucketCounter(bucketOf(t, macH1)); err != nil || c.Packets != 1 {
		t.Errorf("bucket counter %v, %v; want 1 packet", c, err)
	}
	ev := waitEvent(t, e)
	if ev.Kind != EventDigest || ev.SrcMAC != macH1 || ev.Port != portH1 || ev.SrcIP != ipH1 {
		t.Errorf("event %s, want digest of h1", eventString(ev))
	}

	// Host ARP for IP_G: answered from the switch with the host's vmac.
	sendFrame(t, hostSock, arpRequest(macH1, ipH1, ipG))
	reply := recvMatching(t, hostSock, func(f []byte) bool { return len(f) >= 42 && f[12] == 0x08 && f[13] == 0x06 && f[21] == 2 })
	if !bytes.Equal(reply[6:12], vH1[:]) || !bytes.Equal(reply[22:28], vH1[:]) {
		t.Errorf("ARP reply %x, want sender %x", reply, vH1)
	}

	// Gateway → host: src rewritten to the host's vmac, flooded (h1 not in mac_table).
	down := ipv4Frame(macH1, macGW1, ip4("192.0.2.1"), ipH1)
	sendFrame(t, gwSock, down)
	if got := recvMatching(t, hostSock, func(f []byte) bool { return bytes.Equal(f[12:], down[12:]) }); !bytes.Equal(got[6:12], vH1[:]) {
		t.Errorf("host got src %x, want %x", got[6:12], vH1)
	}

	// Gateway ARP reply: a packet-in with the frame.
	gwReply := arpReply(vH1, macGW1, ipGW1, vH1, ipG)
	sendFrame(t, gwSock, gwReply)
	ev = waitEvent(t, e)
	if ev.Kind != EventPacketIn || ev.IngressPort != portG1 || ev.Reason != punt(t, "GATEWAY_ARP_REPLY") || !bytes.Equal(ev.Frame, gwReply) {
		t.Errorf("event %s, want packet-in of the gateway's ARP reply", eventString(ev))
	}

	// Packet-out: the frame leaves the port unchanged.
	out := pad(ethFrame(macGW1, macH2, 0x88b5, []byte("packet-out")))
	must(t, e.Transmit(portG1, out))
	if got := recvMatching(t, gwSock, func(f []byte) bool { return bytes.Contains(f, []byte("packet-out")) }); !bytes.Equal(got, out) {
		t.Errorf("packet-out arrived as %x, want %x", got, out)
	}
	if err := e.Transmit(portG2, out); err == nil {
		t.Error("Transmit on a port that is not attached: want error")
	}
	if err := e.Transmit(portG1, out[:13]); err == nil {
		t.Error("Transmit of a 13-byte frame: want error")
	}

	// Close: no pins, no programs on the ports, event channel closed.
	closed = true
	must(t, e.Close())
	if _, err := os.Stat(pinDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pin directory %s still there after Close: %v", pinDir, err)
	}
	for _, name := range []string{"sgw-dp-s1", "sgw-dp-s3"} {
		idx := sw.ifindex(t, name)
		sw.do(t, func() error {
			res, err := link.QueryPrograms(link.QueryOptions{Target: idx, Attach: ebpf.AttachTCXIngress})
			if err != nil {
				return err
			}
			if len(res.Programs) != 0 {
				return fmt.Errorf("%s still has %d TCX ingress programs after Close", name, len(res.Programs))
			}
			return nil
		})
	}
	if _, ok := <-e.Events(); ok {
		t.Error("event channel still open after Close")
	}
	if err := e.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no ports", Config{}, "no ports"},
		{"CPU port as front port", Config{Ports: map[uint16]string{255: "lo"}, CPUPort: 255}, "CPU port"},
		{"missing interface", Config{Ports: map[uint16]string{1: "sgw-dp-nosuch"}, CPUPort: 255}, "sgw-dp-nosuch"},
		{"interface twice", Config{Ports: map[uint16]string{1: "lo", 2: "lo"}, CPUPort: 255}, "given for ports"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := New(c.cfg)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("New: %v, want error containing %q", err, c.want)
			}
		})
	}
}

func openPacketSocket(t *testing.T, ns *netns, ifname string) int {
	t.Helper()
	var fd int
	ns.do(t, func() error {
		idx, err := Ifindex(ifname)
		if err != nil {
			return err
		}
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return err
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: idx}); err != nil {
			return err
		}
		tv := unix.Timeval{Usec: 100000}
		return unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	})
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func sendFrame(t *testing.T, fd int, frame []byte) {
	t.Helper()
	if _, err := unix.Write(fd, frame); err != nil {
		t.Fatalf("send: %v", err)
	}
}

// recvMatching returns the first incoming frame (not one this socket sent) that
// satisfies match, within two seconds.
func recvMatching(t *testing.T, fd int, match func([]byte) bool) []byte {
	t.Helper()
	buf := make([]byte, 4096)
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		n, from, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			continue
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		if n >= 14 && match(buf[:n]) {
			return append([]byte(nil), buf[:n]...)
		}
	}
	t.Fatal("no matching frame within 2 s")
	return nil
}

func waitEvent(t *testing.T, e *EBPF) Event {
	t.Helper()
	select {
	case ev, ok := <-e.Events():
		if !ok {
			t.Fatal("event channel closed")
		}
		return ev
	case <-time.After(2 * time.Second):
		t.Fatal("no event within 2 s")
	}
	return Event{}
}

func TestPinDirMustBeOnBPFFS(t *testing.T) {
	dir := t.TempDir()
	err := ensureBPFFS(dir + "/supergw/900")
	if err == nil || !strings.Contains(err.Error(), "not on a bpffs") {
		t.Fatalf("ensureBPFFS on tmpfs: %v, want a not-on-bpffs error", err)
	}
}
