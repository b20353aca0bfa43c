package dataplane

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"supergw/targets/ebpf/internal/p4constants"
)

// BPF_PROG_RUN rows for docs/pipeline-contract.md, "Gateway liveness": a gateway's liveness
// frame is consumed and refreshes its port's timestamp; the buckets' frames for a gateway
// heard longer ago than its backup entry's timeout go to the backup.

// ktimeNow reads the clock of bpf_ktime_get_ns (CLOCK_MONOTONIC).
func ktimeNow(t testing.TB) uint64 {
	t.Helper()
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	return uint64(ts.Nano())
}

// heardAgo sets port's last liveness frame to `ago` before now (what the program writes).
func heardAgo(t testing.TB, e *EBPF, port uint16, ago time.Duration) error {
	v := ktimeNow(t) - uint64(ago.Nanoseconds())
	return e.objs.SgwGatewayLastSeen.Put(uint32(port), v)
}

func lastSeen(t testing.TB, e *EBPF, port uint16) uint64 {
	t.Helper()
	var v uint64
	if err := e.objs.SgwGatewayLastSeen.Lookup(uint32(port), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestLivenessDatapath(t *testing.T) {
	r := newRig(t)
	vH1 := vmacOf(t, macH1, kBuckets, crcHash)
	upFrame := ipv4Frame(vH1, macH1, ipH1, ip4("192.0.2.1"))
	liveness := pad(ethFrame(mac("01:80:c2:00:00:0e"), macGW1, p4constants.EthertypeLiveness, []byte("SGWL")))
	backupTo := func(port uint16, m MAC, timeout time.Duration) func(*EBPF) error {
		return func(e *EBPF) error {
			return e.SetGatewayBackup(portG1, GatewayBackup{Port: port, MAC: m, Timeout: timeout})
		}
	}
	all := func(steps ...func(*EBPF) error) func(*EBPF) error {
		return func(e *EBPF) error {
			for _, s := range steps {
				if err := s(e); err != nil {
					return err
				}
			}
			return nil
		}
	}
	heard := func(ago time.Duration) func(*EBPF) error {
		return func(e *EBPF) error { return heardAgo(t, e, portG1, ago) }
	}
	failover := func(e *EBPF) (Counter, error) { return e.PortCounter(FailoverFrames, portG1) }
	cases := []dpCase{
		{name: "liveness frame from a gateway: consumed, not a drop, counted", port: portG1, frame: liveness, verdict: tcActShot,
			counter: func(e *EBPF) (Counter, error) { return e.PortCounter(LivenessFrames, portG1) }},
		{name: "liveness frame from a host port is an ordinary frame", port: portH1, frame: withMACs(liveness, &broadcast, &macH1), verdict: tcActShot, tx: []uint16{portH2}},
		{name: "liveness frame on an unconfigured switch is NOT_CONFIGURED", noConfig: true, port: portG1, frame: liveness, verdict: tcActShot, drop: "NOT_CONFIGURED"},
		{name: "gateway heard within its timeout: its own port", setup: all(backupTo(portG2, macGW2, 30*time.Millisecond), heard(time.Millisecond)),
			port: portH1, frame: upFrame, verdict: tcActRedirect, out: withMACs(upFrame, &macGW1, nil), tx: []uint16{portG1}, bucketHit: true},
		{name: "stale gateway: the backup's port and MAC, counted per gateway", setup: all(backupTo(portG2, macGW2, 30*time.Millisecond), heard(time.Second)),
			port: portH1, frame: upFrame, verdict: tcActRedirect, out: withMACs(upFrame, &macGW2, nil), tx: []uint16{portG2}, counter: failover},
		{name: "stale gateway: the bucket's counter still counts", setup: all(backupTo(portG2, macGW2, 30*time.Millisecond), heard(time.Second)),
			port: portH1, frame: upFrame, verdict: tcActRedirect, out: withMACs(upFrame, &macGW2, nil), tx: []uint16{portG2}, bucketHit: true},
		{name: "never heard since the start: not judged", setup: backupTo(portG2, macGW2, 30*time.Millisecond),
			port: portH1, frame: upFrame, verdict: tcActRedirect, out: withMACs(upFrame, &macGW1, nil), tx: []uint16{portG1}},
		{name: "stale gateway without a backup entry: its own port", setup: heard(time.Second),
			port: portH1, frame: upFrame, verdict: tcActRedirect, out: withMACs(upFrame, &macGW1, nil), tx: []uint16{portG1}},
		{name: "backup entry deleted: its own port", setup: all(backupTo(portG2, macGW2, 30*time.Millisecond), heard(time.Second),
			func(e *EBPF) error { return e.DeleteGatewayBackup(portG1) }),
			port: portH1, frame: upFrame, verdict: tcActRedirect, out: withMACs(upFrame, &macGW1, nil), tx: []uint16{portG1}},
		{name: "the timeout is the entry's: 2 s is not stale after 1 s", setup: all(backupTo(portG2, macGW2, 2*time.Second), heard(time.Second)),
			port: portH1, frame: upFrame, verdict: tcActRedirect, out: withMACs(upFrame, &macGW1, nil), tx: []uint16{portG1}},
		{name: "a backup on the ingress port is a HAIRPIN", setup: all(backupTo(portH1, macH2, 30*time.Millisecond), heard(time.Second)),
			port: portH1, frame: upFrame, verdict: tcActShot, out: withMACs(upFrame, &macH2, nil), drop: "HAIRPIN"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { runCase(t, r, c) })
	}
}

// The frame's own effect: the port's timestamp goes from "never" to about now.
func TestLivenessFrameRefreshesTimestamp(t *testing.T) {
	r := newRig(t)
	e := r.pipeline(t, true)
	if got := lastSeen(t, e, portG1); got != 0 {
		t.Fatalf("last seen before any frame: %d, want 0 (never)", got)
	}
	before := ktimeNow(t)
	r.runOn(t, e, r.ifindex[portG1], pad(ethFrame(mac("01:80:c2:00:00:0e"), macGW1, p4constants.EthertypeLiveness, nil)))
	after := ktimeNow(t)
	if got := lastSeen(t, e, portG1); got < before || got > after {
		t.Errorf("last seen %d, want within [%d, %d]", got, before, after)
	}
	if got := lastSeen(t, e, portG2); got != 0 {
		t.Errorf("another port's timestamp moved: %d", got)
	}
	// A stale gateway comes back with its next frame.
	must(t, e.SetGatewayBackup(portG1, GatewayBackup{Port: portG2, MAC: macGW2, Timeout: 30 * time.Millisecond}))
	must(t, heardAgo(t, e, portG1, time.Second))
	vH1 := vmacOf(t, macH1, kBuckets, crcHash)
	up := ipv4Frame(vH1, macH1, ipH1, ip4("192.0.2.1"))
	if res := r.runOn(t, e, r.ifindex[portH1], up); string(res.out[:6]) != string(macGW2[:]) {
		t.Fatalf("stale: dst %x, want the backup's %x", res.out[:6], macGW2)
	}
	r.runOn(t, e, r.ifindex[portG1], pad(ethFrame(mac("01:80:c2:00:00:0e"), macGW1, p4constants.EthertypeLiveness, nil)))
	if res := r.runOn(t, e, r.ifindex[portH1], up); string(res.out[:6]) != string(macGW1[:]) {
		t.Errorf("heard again: dst %x, want the gateway's own %x", res.out[:6], macGW1)
	}
}
