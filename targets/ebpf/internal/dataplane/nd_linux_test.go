package dataplane

import (
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestNDWithLinuxHost lets a real Linux IPv6 stack resolve the gateway through the
// attached program: the kernel accepts an NA only with a correct ICMPv6 checksum, hop
// limit 255 and a consistent target (RFC 4861 7.1.2), so its neighbour table is an
// independent check of the NA the switch builds. The host resolves both gateway
// addresses to its vmac with the router flag, its unicast reachability probe (NUD to the
// vmac) is answered by the switch, and its DAD for a gateway address fails, as RFC 4862
// expects for a defended address.
func TestNDWithLinuxHost(t *testing.T) {
	requireRoot(t)
	sw, hostNS, gwNS := newNetns(t, "nsw"), newNetns(t, "nh"), newNetns(t, "ng")
	wireSwitch(t, "sgw-nd", sw, hostNS, gwNS)
	const hostIf = "sgw-nd-h0"
	sysctl := func(kv string) { run(t, "ip", "netns", "exec", hostNS.name, "sysctl", "-qw", kv) }
	sysctl("net.ipv6.conf." + hostIf + ".disable_ipv6=0")
	hostNS.ip(t, "link", "set", hostIf, "down")
	hostNS.ip(t, "link", "set", hostIf, "address", net.HardwareAddr(macH1[:]).String())
	hostNS.ip(t, "link", "set", hostIf, "up")
	hostNS.ip(t, "-6", "addr", "add", "2001:db8::11/64", "dev", hostIf, "nodad")

	var e *EBPF
	sw.do(t, func() error {
		var err error
		e, err = New(Config{DeviceID: uint64(800 + os.Getpid()%100), Ports: map[uint16]string{portH1: "sgw-nd-s1", portG1: "sgw-nd-s3"}, CPUPort: 255})
		return err
	})
	t.Cleanup(func() { e.Close() })
	go func() { // nobody reads the digests here
		for range e.Events() {
		}
	}()
	must(t, e.SetPortRole(portH1, role(t, "HOST")))
	must(t, e.SetPortRole(portG1, role(t, "GATEWAY")))
	must(t, e.SetDispatchConfig(DispatchConfig{Configured: true, GatewayIP: ipG, VMACBase: vmacBase, BucketMask: kBuckets - 1}))
	must(t, e.SetNDConfig(NDConfig{Configured: true, LinkLocal: llG, Global: guaG}))
	must(t, e.SetBucket(bucketOf(t, macH1), portG1, macGW1))
	must(t, e.SetFloodGroup(uint16(p4const(t, "HOST_FLOOD_GROUP")), []uint16{portH1}))
	vH1 := vmacOf(t, macH1, kBuckets, crcHash)

	neigh := func(addr string) string {
		return strings.TrimSpace(run(t, "ip", "-n", hostNS.name, "-6", "neigh", "show", addr, "dev", hostIf))
	}
	resolve := func(addr string) {
		t.Helper()
		// The echo goes to the gateway, which does not answer: only the resolution counts.
		_ = exec.Command("ip", "netns", "exec", hostNS.name, "ping", "-6", "-c", "1", "-W", "1", addr).Run()
		got := neigh(strings.TrimSuffix(addr, "%"+hostIf))
		if !strings.Contains(got, "lladdr "+net.HardwareAddr(vH1[:]).String()) || !strings.Contains(got, "router") ||
			(!strings.Contains(got, "REACHABLE") && !strings.Contains(got, "DELAY")) {
			t.Errorf("neighbour %s: %q, want lladdr %s router REACHABLE", addr, got, net.HardwareAddr(vH1[:]))
		}
	}
	resolve("2001:db8::1")
	resolve("fe80::1%" + hostIf)

	// NUD: a probe is a unicast NS to the cached vmac, answered by the switch.
	out, err := exec.Command("ip", "-n", hostNS.name, "-6", "neigh", "replace", "2001:db8::1", "lladdr", net.HardwareAddr(vH1[:]).String(),
		"nud", "probe", "dev", hostIf).CombinedOutput()
	if err != nil {
		t.Logf("ip neigh replace nud probe not supported here (%v: %s); NUD is covered by TestNDDatapath", err, out)
	} else {
		deadline := time.Now().Add(3 * time.Second)
		for !strings.Contains(neigh("2001:db8::1"), "REACHABLE") && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if got := neigh("2001:db8::1"); !strings.Contains(got, "REACHABLE") || !strings.Contains(got, net.HardwareAddr(vH1[:]).String()) {
			t.Errorf("after a unicast probe: %q, want REACHABLE at %s", got, net.HardwareAddr(vH1[:]))
		}
	}

	// DAD for the gateway's global address: the switch defends it.
	sysctl("net.ipv6.conf." + hostIf + ".accept_dad=1")
	hostNS.ip(t, "-6", "addr", "add", "2001:db8::1/64", "dev", hostIf)
	deadline := time.Now().Add(5 * time.Second)
	addr := ""
	for time.Now().Before(deadline) {
		addr = hostNS.ip(t, "-6", "addr", "show", "dev", hostIf, "to", "2001:db8::1/128")
		if strings.Contains(addr, "dadfailed") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(addr, "dadfailed") {
		t.Errorf("DAD for 2001:db8::1 did not fail: %q", addr)
	}
}
