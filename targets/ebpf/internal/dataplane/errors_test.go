package dataplane

import (
	"errors"
	"testing"
)

// Both Dataplanes report their limits with the same sentinel errors, which the
// P4Runtime server maps to OUT_OF_RANGE and RESOURCE_EXHAUSTED.
func TestSentinelErrors(t *testing.T) {
	t.Run("fake", func(t *testing.T) {
		l, err := specLimits()
		if err != nil {
			t.Fatal(err)
		}
		checkSentinels(t, NewFake(portH1, portH2, portG1, portG2), l)
	})
	t.Run("ebpf", func(t *testing.T) {
		r := newRigIn(t, newNetnsPrefix(t, "sgw-hd", "err"))
		l, err := specLimits()
		if err != nil {
			t.Fatal(err)
		}
		checkSentinels(t, r.pipeline(t, true), l)
	})
}

func checkSentinels(t *testing.T, dp Dataplane, l fakeLimits) {
	want := func(what string, err, sentinel error) {
		t.Helper()
		if !errors.Is(err, sentinel) {
			t.Errorf("%s: %v, want %v", what, err, sentinel)
		}
	}
	nb := uint16(l.buckets)
	want("SetBucket(MAX_BUCKETS)", dp.SetBucket(nb, portG1, macGW1), ErrOutOfRange)
	want("DeleteBucket(MAX_BUCKETS)", dp.DeleteBucket(nb), ErrOutOfRange)
	_, err := dp.BucketCounter(nb)
	want("BucketCounter(MAX_BUCKETS)", err, ErrOutOfRange)
	want("SetBucketCounter(MAX_BUCKETS)", dp.SetBucketCounter(nb, Counter{}), ErrOutOfRange)
	nd := uint16(l.drops)
	_, err = dp.DropCounter(nd)
	want("DropCounter(size)", err, ErrOutOfRange)
	want("SetDropCounter(size)", dp.SetDropCounter(nd, Counter{}), ErrOutOfRange)
	want("CountDrop(size)", dp.CountDrop(nd, 60), ErrOutOfRange)
	want("SetFloodGroup(groups)", dp.SetFloodGroup(uint16(l.groups), []uint16{portH1}), ErrOutOfRange)
	want("SetFloodGroup(too many replicas)", dp.SetFloodGroup(1, make([]uint16, l.replicas+1)), ErrCapacity)
	if err := dp.SetFloodGroup(1, make([]uint16, l.replicas)); err != nil {
		t.Errorf("SetFloodGroup(%d replicas): %v", l.replicas, err)
	}

	// Fill host_ips: the next new key is ErrCapacity, an existing key may still change.
	if err := dp.DeleteHostIP(ipH1); err != nil && !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		ip := IPv4{10, byte(99 + i>>16), byte(i >> 8), byte(i)} // 65,536 and more keys: no wrap onto a held one
		err := dp.SetHostIP(ip, macH1)
		if i < l.hostIPs {
			if err != nil {
				t.Fatalf("SetHostIP #%d of %d: %v", i, l.hostIPs, err)
			}
			continue
		}
		want("SetHostIP into a full map", err, ErrCapacity)
		break
	}
	if err := dp.SetHostIP(IPv4{10, 99, 0, 0}, macH2); err != nil {
		t.Errorf("modify in a full map: %v", err)
	}
	checkDispatchSentinels(t, dp, l)
}

// The remote-access tables: keys that break their match kind are ErrBadKey, absent keys
// ErrNotFound, and a full table ErrCapacity (an existing key may still change).
func checkDispatchSentinels(t *testing.T, dp Dataplane, l fakeLimits) {
	want := func(what string, err, sentinel error) {
		t.Helper()
		if !errors.Is(err, sentinel) {
			t.Errorf("%s: %v, want %v", what, err, sentinel)
		}
	}
	gw := Gateway{portG1, macGW1}
	for what, c := range map[string]struct {
		t DispatchTable
		k DispatchKey
	}{
		"pool with host bits":      {ClientPools, DispatchKey{Value: 0x0a000001, PrefixLen: 24}},
		"pool prefix 33":           {ClientPools, DispatchKey{PrefixLen: 33}},
		"pool with a priority":     {ClientPools, DispatchKey{Value: 0x0a000000, PrefixLen: 8, Priority: 1}},
		"pin wider than IPv4":      {ClientPins, DispatchKey{Value: 1 << 32}},
		"pin with a mask":          {ClientPins, DispatchKey{Value: 1, Mask: 1}},
		"ternary without priority": {ESPSPIRanges, DispatchKey{Value: 1, Mask: 1}},
		"ternary value outside":    {IKESPILabels, DispatchKey{Value: 3, Mask: 1, Priority: 1}},
		"ESP SPI wider than 32":    {ESPSPIRanges, DispatchKey{Value: 1 << 32, Mask: 1 << 32, Priority: 1}},
		"not a dispatch table":     {DispatchTable(9), DispatchKey{}},
	} {
		want("SetDispatchEntry "+what, dp.SetDispatchEntry(c.t, c.k, gw), ErrBadKey)
	}
	absent := DispatchKey{Value: 7, Mask: 0xff, Priority: 1}
	want("DeleteDispatchEntry of an absent key", dp.DeleteDispatchEntry(IKESPILabels, absent), ErrNotFound)
	_, err := dp.DispatchCounter(IKESPILabels, absent)
	want("DispatchCounter of an absent key", err, ErrNotFound)
	want("SetDispatchCounter of an absent key", dp.SetDispatchCounter(IKESPILabels, absent, Counter{}), ErrNotFound)
	n := l.dispatch[ESPSPIRanges]
	for i := 0; i < n; i++ {
		if err := dp.SetDispatchEntry(ESPSPIRanges, DispatchKey{Value: uint64(i), Mask: 0xffffffff, Priority: 1}, gw); err != nil {
			t.Fatalf("esp_spi_ranges entry #%d of %d: %v", i, n, err)
		}
	}
	want("SetDispatchEntry into a full table", dp.SetDispatchEntry(ESPSPIRanges, DispatchKey{Value: uint64(n), Mask: 0xffffffff, Priority: 1}, gw), ErrCapacity)
	if err := dp.SetDispatchEntry(ESPSPIRanges, DispatchKey{Value: 0, Mask: 0xffffffff, Priority: 1}, Gateway{portG2, macGW2}); err != nil {
		t.Errorf("modify in a full table: %v", err)
	}
}
