package dataplane

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// Test objects are named sgw-dp-* (namespaces, links) and removed by the test
// that made them.

func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (CAP_BPF, CAP_NET_ADMIN) to load eBPF programs and create namespaces")
	}
}

func run(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// netns is a named network namespace owned by one test.
type netns struct {
	name string
}

var netnsSeq atomic.Int32

func newNetns(t testing.TB, suffix string) *netns {
	t.Helper()
	return newNetnsPrefix(t, "sgw-dp", suffix)
}

// newNetnsPrefix makes namespace <prefix>-<suffix>-<pid>-<seq>.
func newNetnsPrefix(t testing.TB, prefix, suffix string) *netns {
	t.Helper()
	name := fmt.Sprintf("%s-%s-%d-%d", prefix, suffix, os.Getpid(), netnsSeq.Add(1))
	run(t, "ip", "netns", "add", name)
	ns := &netns{name: name}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	run(t, "ip", "-n", name, "link", "set", "lo", "up")
	return ns
}

func (ns *netns) ip(t testing.TB, args ...string) string {
	t.Helper()
	return run(t, append([]string{"ip", "-n", ns.name}, args...)...)
}

// vethPair creates name <-> name+"p" inside the namespace, both up, and
// returns name's ifindex.
func (ns *netns) vethPair(t testing.TB, name string) int {
	t.Helper()
	ns.ip(t, "link", "add", name, "type", "veth", "peer", "name", name+"p")
	ns.ip(t, "link", "set", name, "up")
	ns.ip(t, "link", "set", name+"p", "up")
	return ns.ifindex(t, name)
}

// ifindex returns the index of a link inside the namespace.
func (ns *netns) ifindex(t testing.TB, name string) int {
	t.Helper()
	var idx int
	ns.do(t, func() error {
		var err error
		idx, err = Ifindex(name)
		return err
	})
	return idx
}

// do runs fn on an OS thread that has entered the namespace. Sockets, links
// and BPF_PROG_RUN devices created by fn belong to the namespace.
func (ns *netns) do(t testing.TB, fn func() error) {
	t.Helper()
	if err := ns.try(fn); err != nil {
		t.Fatal(err)
	}
}

func (ns *netns) try(fn func() error) error {
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer orig.Close()
	target, err := os.Open("/run/netns/" + ns.name)
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("setns %s: %w", ns.name, err)
	}
	fnErr := fn()
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		// Leave the thread locked: Go retires it when this goroutine ends.
		return fmt.Errorf("restore netns: %w", err)
	}
	runtime.UnlockOSThread()
	return fnErr
}

// wireSwitch turns IPv6 off in the three namespaces and links them with two
// veth pairs, up: <prefix>-s1 (sw) to <prefix>-h0 (host) and <prefix>-s3 (sw)
// to <prefix>-g0 (gw).
func wireSwitch(t testing.TB, prefix string, sw, hostNS, gwNS *netns) {
	t.Helper()
	for _, ns := range []*netns{sw, hostNS, gwNS} {
		run(t, "ip", "netns", "exec", ns.name, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
	}
	sw.ip(t, "link", "add", prefix+"-s1", "type", "veth", "peer", "name", prefix+"-h0", "netns", hostNS.name)
	sw.ip(t, "link", "add", prefix+"-s3", "type", "veth", "peer", "name", prefix+"-g0", "netns", gwNS.name)
	sw.ip(t, "link", "set", prefix+"-s1", "up")
	sw.ip(t, "link", "set", prefix+"-s3", "up")
	hostNS.ip(t, "link", "set", prefix+"-h0", "up")
	gwNS.ip(t, "link", "set", prefix+"-g0", "up")
}
