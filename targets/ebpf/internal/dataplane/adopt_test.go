package dataplane

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// Restart without loss: Release leaves the data plane forwarding; the next Open adopts it
// (maps kept, the old program forwarding until Attach moves the ports), refuses maps that do
// not fit, or replaces them when told; stale pins of a dead data plane are removed.

var adoptSeq atomic.Int32

type adoptRig struct {
	sw, host, gw *netns
	cfg          Config
	hostSock     int
	gwSock       int
}

func newAdoptRig(t *testing.T) *adoptRig {
	requireRoot(t)
	sw, hostNS, gwNS := newNetns(t, "sw"), newNetns(t, "h"), newNetns(t, "g")
	wireSwitch(t, "sgw-dp", sw, hostNS, gwNS)
	dev := uint64(930 + (os.Getpid()+int(adoptSeq.Add(1)))%20)
	cfg := Config{DeviceID: dev, Ports: map[uint16]string{portH1: "sgw-dp-s1", portG1: "sgw-dp-s3"}, CPUPort: 255,
		PinDir: filepath.Join(DefaultPinRoot, fmt.Sprint(dev))}
	t.Cleanup(func() { _ = Teardown(cfg.PinDir) })
	return &adoptRig{sw: sw, host: hostNS, gw: gwNS, cfg: cfg,
		hostSock: openPacketSocket(t, hostNS, "sgw-dp-h0"), gwSock: openPacketSocket(t, gwNS, "sgw-dp-g0")}
}

func (r *adoptRig) open(t *testing.T, cfg Config) (*EBPF, error) {
	var e *EBPF
	var err error
	r.sw.do(t, func() error {
		e, err = Open(cfg)
		return nil
	})
	return e, err
}

// attach runs Attach in the switch's namespace (TCX attaches by ifindex, which is per namespace).
func (r *adoptRig) attach(t *testing.T, e *EBPF) {
	t.Helper()
	r.sw.do(t, e.Attach)
}

// forwards checks that a host frame to its vmac reaches the gateway with the rewrite.
func (r *adoptRig) forwards(t *testing.T, what string) {
	t.Helper()
	up := ipv4Frame(vmacOf(t, macH1, kBuckets, crcHash), macH1, ipH1, ip4("192.0.2.1"))
	sendFrame(t, r.hostSock, up)
	got := recvMatching(t, r.gwSock, func(f []byte) bool { return bytes.Equal(f[12:], up[12:]) })
	if !bytes.Equal(got[:6], macGW1[:]) {
		t.Errorf("%s: gateway got dst %x, want %x", what, got[:6], macGW1)
	}
}

func (r *adoptRig) programIDs(t *testing.T) []ebpf.ProgramID {
	t.Helper()
	var ids []ebpf.ProgramID
	for _, name := range []string{"sgw-dp-s1", "sgw-dp-s3"} {
		idx := r.sw.ifindex(t, name)
		r.sw.do(t, func() error {
			res, err := link.QueryPrograms(link.QueryOptions{Target: idx, Attach: ebpf.AttachTCXIngress})
			if err != nil {
				return err
			}
			for _, p := range res.Programs {
				ids = append(ids, p.ID)
			}
			return nil
		})
	}
	return ids
}

// running starts an instance, configures h1's bucket on g1 and releases it.
func (r *adoptRig) running(t *testing.T) {
	t.Helper()
	e, err := r.open(t, r.cfg)
	if err != nil {
		t.Fatal(err)
	}
	released := false
	t.Cleanup(func() {
		if !released {
			e.Close()
		}
	})
	r.attach(t, e)
	must(t, e.SetPortRole(portH1, role(t, "HOST")))
	must(t, e.SetPortRole(portG1, role(t, "GATEWAY")))
	must(t, e.SetDispatchConfig(DispatchConfig{Configured: true, GatewayIP: ipG, VMACBase: vmacBase, BucketMask: kBuckets - 1}))
	must(t, e.SetBucket(bucketOf(t, macH1), portG1, macGW1))
	r.forwards(t, "first instance")
	released = true
	must(t, e.Release())
}

func TestAdoptRunningDataplane(t *testing.T) {
	r := newAdoptRig(t)
	// Pins of a data plane that runs nowhere are removed by a fresh start.
	must(t, os.MkdirAll(r.cfg.PinDir, 0o700))
	stale, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1})
	must(t, err)
	must(t, stale.Pin(filepath.Join(r.cfg.PinDir, "sgw_stale")))
	stale.Close()

	r.running(t)
	if _, err := os.Stat(filepath.Join(r.cfg.PinDir, "sgw_stale")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a stale pin survived a fresh start: %v", err)
	}
	before := r.programIDs(t)
	if len(before) != 2 {
		t.Fatalf("after Release: %d TCX programs on the 2 ports, want 2", len(before))
	}
	r.forwards(t, "no process")

	e, err := r.open(t, r.cfg)
	if err != nil {
		t.Fatal(err)
	}
	a := e.Adoption()
	if !a.Live || len(a.Created) != 0 || len(a.Replaced) != 0 || len(a.Adopted) != len(mapNames()) || len(a.Links) != 2 {
		t.Fatalf("adoption %+v", a)
	}
	if b, err := e.buckets.get(uint32(bucketOf(t, macH1))); err != nil || b.Port != portG1 {
		t.Errorf("adopted buckets: %+v %v", b, err)
	}
	r.forwards(t, "opened, not attached: the predecessor's program")
	r.attach(t, e)
	after := r.programIDs(t)
	if len(after) != 2 || after[0] == before[0] {
		t.Errorf("programs on the ports %v -> %v: want the new one on both", before, after)
	}
	r.forwards(t, "attached")
	must(t, e.Close())
	if ids := r.programIDs(t); len(ids) != 0 {
		t.Errorf("after Close: programs %v still attached", ids)
	}
	if _, err := os.Stat(r.cfg.PinDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pin directory after Close: %v", err)
	}
}

func TestIncompatibleMapsRefusedOrReplaced(t *testing.T) {
	r := newAdoptRig(t)
	r.running(t)
	// The next build's sgw_buckets has another value size.
	path := filepath.Join(r.cfg.PinDir, "sgw_buckets")
	must(t, os.Remove(path))
	other, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 24, MaxEntries: 4096})
	must(t, err)
	must(t, other.Pin(path))
	other.Close()

	if _, err := r.open(t, r.cfg); !errors.Is(err, ErrIncompatible) || !strings.Contains(err.Error(), "sgw_buckets") ||
		!strings.Contains(err.Error(), "ValueSize") {
		t.Fatalf("open over an incompatible map: %v, want ErrIncompatible naming sgw_buckets and the value size", err)
	}
	r.forwards(t, "refused: the running data plane is untouched")

	cfg := r.cfg
	cfg.ReplaceIncompatible = true
	e, err := r.open(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := e.Adoption().Replaced["sgw_buckets"]; !ok || len(e.Adoption().Replaced) != 1 {
		t.Fatalf("adoption %+v, want sgw_buckets replaced", e.Adoption())
	}
	// Refilled before the ports move (the P4Runtime server replays its journal here).
	must(t, e.SetBucket(bucketOf(t, macH1), portG1, macGW1))
	r.attach(t, e)
	r.forwards(t, "replaced and refilled")
	var info *ebpf.MapInfo
	m, err := ebpf.LoadPinnedMap(path, nil)
	must(t, err)
	info, err = m.Info()
	m.Close()
	must(t, err)
	if info.ValueSize == 24 {
		t.Error("the incompatible map is still pinned after the replacement")
	}
	must(t, e.Close())
}
