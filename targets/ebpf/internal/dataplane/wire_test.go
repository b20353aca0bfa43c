package dataplane

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BPF_PROG_RUN refuses IPv4 frames without a full IPv4 header (see
// FuzzDatapath), but such frames do arrive on a real link. This sends them
// through the attached program: like the P4 parser, the program must not take
// a source IP from a truncated header (the digest carries 0), and it forwards
// the frame like any other. Namespaces sgw-hd-wire-*, pins in
// /sys/fs/bpf/sgw-hd-wire-<pid>.
func TestTruncatedIPv4OnTheWire(t *testing.T) {
	requireRoot(t)
	sw, hostNS, gwNS := newNetnsPrefix(t, "sgw-hd", "wsw"), newNetnsPrefix(t, "sgw-hd", "wh"), newNetnsPrefix(t, "sgw-hd", "wg")
	wireSwitch(t, "sgw-hd", sw, hostNS, gwNS)

	var e *EBPF
	sw.do(t, func() error {
		var err error
		e, err = New(Config{DeviceID: 951, Ports: map[uint16]string{portH1: "sgw-hd-s1", portG1: "sgw-hd-s3"}, CPUPort: 255,
			PinDir: filepath.Join("/sys/fs/bpf", fmt.Sprintf("sgw-hd-wire-%d", os.Getpid()))})
		return err
	})
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	must(t, e.SetPortRole(portH1, role(t, "HOST")))
	must(t, e.SetPortRole(portG1, role(t, "GATEWAY")))
	must(t, e.SetDispatchConfig(DispatchConfig{Configured: true, GatewayIP: ipG, VMACBase: vmacBase, BucketMask: kBuckets - 1}))
	must(t, e.SetBucket(bucketOf(t, macH3), portG1, macGW1))

	hostSock := openPacketSocket(t, hostNS, "sgw-hd-h0")
	gwSock := openPacketSocket(t, gwNS, "sgw-hd-g0")
	vH3 := vmacOf(t, macH3, kBuckets, crcHash)
	for i, n := range []int{14, 20, 33} {
		// A distinct source per frame, so that each one is a new (mac, port).
		src := macH3
		src[0] = 0x02
		src[5] = byte(i)
		frame := make([]byte, n)
		copy(frame, ethFrame(vH3, src, 0x0800, nil))
		for j := 14; j < n; j++ {
			frame[j] = 0x45 // anything a source IP could be read from
		}
		sendFrame(t, hostSock, frame)
		got := recvMatching(t, gwSock, func(f []byte) bool { return bytes.Equal(f[6:12], src[:]) })
		if len(got) != n || !bytes.Equal(got[:6], macGW1[:]) {
			t.Errorf("%d-byte IPv4 frame arrived as %x, want %d bytes to %x", n, got, n, macGW1)
		}
		ev := waitEvent(t, e)
		if ev.Kind != EventDigest || ev.SrcMAC != src || ev.Port != portH1 || ev.SrcIP != (IPv4{}) {
			t.Errorf("%d-byte IPv4 frame: event %s, want a digest with source IP 0", n, eventString(ev))
		}
	}
}
