package p4rt

import (
	"testing"
	"time"

	"supergw/targets/ebpf/internal/dataplane"
)

func TestIdleScanPeriod(t *testing.T) {
	for _, c := range []struct{ shortest, interval, want time.Duration }{
		{200 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond},  // a tenth of the timeout
		{200 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond}, // never below the interval
		{300 * time.Second, 100 * time.Millisecond, time.Second},                  // never above a second
	} {
		if got := idleScanPeriod(c.shortest, c.interval); got != c.want {
			t.Errorf("idleScanPeriod(%v, %v) = %v, want %v", c.shortest, c.interval, got, c.want)
		}
	}
}

// A learning table whose entries age after 300 s (the controller's default) is scanned once a
// second, not at every 100 ms tick: each scan reads the whole table under the write lock.
func TestLongIdleTimeoutsAreScannedOncePerPeriod(t *testing.T) {
	fake := dataplane.NewFake(1, 2, 3, 4)
	srv, err := New(Config{DeviceID: testDevice, Dataplane: fake, IdleScanInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	h := harnessFor(t, srv)
	h.fake = fake
	h.primary()
	h.mustWrite(ins(h.learnedEntry(1, 2, 300*time.Second)))
	srv.idleScan = 100 * time.Millisecond // the default tick, driven by hand below
	t0 := time.Now()
	srv.scanIdle(t0)
	first := srv.idleNext[srv.bind.learned]
	if want := t0.Add(time.Second); !first.Equal(want) {
		t.Fatalf("next scan at %v, want %v (a second after the first)", first, want)
	}
	for tick := 1; tick < 10; tick++ {
		srv.scanIdle(t0.Add(time.Duration(tick) * 100 * time.Millisecond))
		if got := srv.idleNext[srv.bind.learned]; !got.Equal(first) {
			t.Fatalf("tick %d scanned the table again (next %v)", tick, got)
		}
	}
	srv.scanIdle(t0.Add(time.Second))
	if got := srv.idleNext[srv.bind.learned]; !got.Equal(t0.Add(2 * time.Second)) {
		t.Fatalf("the scan a second later did not run (next %v)", got)
	}
}
