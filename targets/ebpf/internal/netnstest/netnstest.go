// Package netnstest builds the throwaway namespaces of the traffic tests.
package netnstest

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// SinkMAC is the MAC of the receiving end of a VethPair.
const SinkMAC = "02:00:00:00:00:99"

// VethPair is a namespace <prefix>-<pid> holding a veth pair gen0 -> sink0 (sink0 has
// SinkMAC, GRO on so it runs NAPI), with IPv6 off so that no autoconfiguration frame
// (MLD, DAD) reaches sink0 without having been sent by the test. Skips without root;
// removed when the test ends.
func VethPair(t testing.TB, prefix string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (namespaces, eBPF, AF_PACKET)")
	}
	ns := fmt.Sprintf("%s-%d", prefix, os.Getpid())
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", args, err, out)
		}
	}
	run("ip", "netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	for _, k := range []string{"net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"} {
		run("ip", "netns", "exec", ns, "sysctl", "-qw", k)
	}
	run("ip", "-n", ns, "link", "add", "gen0", "type", "veth", "peer", "name", "sink0")
	run("ip", "-n", ns, "link", "set", "sink0", "address", SinkMAC)
	run("ip", "-n", ns, "link", "set", "gen0", "up")
	run("ip", "-n", ns, "link", "set", "sink0", "up")
	// Live frames need the receiving veth to run NAPI (GRO gives it one).
	run("ip", "netns", "exec", ns, "ethtool", "-K", "sink0", "gro", "on")
	return ns
}
