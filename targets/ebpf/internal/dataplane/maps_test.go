package dataplane

import (
	"errors"
	"testing"
)

// The Dataplane contract of the map wrappers: ErrNotFound on absent keys,
// direct counters reset on insert and delete but kept on modify, range errors.
func TestMapSemantics(t *testing.T) {
	r := newRig(t)
	e := r.pipeline(t, true)
	notFound := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("%s: %v, want ErrNotFound", what, err)
		}
	}
	notFound("DeletePortRole(absent)", e.DeletePortRole(portNR))
	notFound("DeleteHostIP(absent)", e.DeleteHostIP(ipH3))
	notFound("DeleteL2(absent)", e.DeleteL2(macH3))
	notFound("DeleteLearned(absent)", e.DeleteLearned(macH3, portH1))
	notFound("DeleteBucket(absent)", e.DeleteBucket(7))
	_, err := e.BucketCounter(7)
	notFound("BucketCounter(absent)", err)
	notFound("SetBucketCounter(absent)", e.SetBucketCounter(7, Counter{1, 1}))

	b := bucketOf(t, macH1)
	if err := e.SetBucketCounter(b, Counter{5, 500}); err != nil {
		t.Fatal(err)
	}
	if err := e.SetBucket(b, portG2, macGW2); err != nil { // modify
		t.Fatal(err)
	}
	if c, _ := e.BucketCounter(b); c != (Counter{5, 500}) {
		t.Errorf("counter after modify %v, want kept", c)
	}
	if err := e.DeleteBucket(b); err != nil {
		t.Fatal(err)
	}
	if err := e.SetBucket(b, portG1, macGW1); err != nil { // insert
		t.Fatal(err)
	}
	if c, _ := e.BucketCounter(b); c != (Counter{}) {
		t.Errorf("counter after delete+insert %v, want zero", c)
	}
	if err := e.SetBucket(uint16(e.objs.SgwBuckets.MaxEntries()), portG1, macGW1); err == nil {
		t.Error("SetBucket beyond MAX_BUCKETS: want error")
	}

	if err := e.SetDropCounter(3, Counter{2, 200}); err != nil {
		t.Fatal(err)
	}
	if err := e.CountDrop(3, 60); err != nil {
		t.Fatal(err)
	}
	if c, _ := e.DropCounter(3); c != (Counter{3, 260}) {
		t.Errorf("drop counter %v, want {3 260}", c)
	}
	if n := uint16(p4const(t, "DROP_COUNTER_SIZE")); true {
		if _, err := e.DropCounter(n); err == nil {
			t.Errorf("DropCounter(%d): want out-of-range error", n)
		}
	}
	if err := e.CountDrop(3, -1); err == nil {
		t.Error("CountDrop with a negative length: want error")
	}

	many := make([]uint16, 33)
	if err := e.SetFloodGroup(1, many); err == nil {
		t.Error("SetFloodGroup with 33 replicas: want error")
	}
	if err := e.SetFloodGroup(8, []uint16{1}); err == nil {
		t.Error("SetFloodGroup(8): want out-of-range error")
	}
	if got := e.Ports(); len(got) != len(rigLinks) || got[0] != portH1 {
		t.Errorf("Ports() = %v", got)
	}
}
