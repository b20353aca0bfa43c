package dataplane

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
)

// String is the P4 table's name, for errors.
func (t DispatchTable) String() string {
	switch t {
	case ClientPools:
		return "client_pools"
	case ClientPins:
		return "client_pins"
	case IKESPILabels:
		return "ike_spi_labels"
	case ESPSPIRanges:
		return "esp_spi_ranges"
	}
	return fmt.Sprintf("dispatch table %d", uint8(t))
}

// keyBits is the width of the table's key.
func (t DispatchTable) keyBits() (uint, error) {
	switch t {
	case ClientPools, ClientPins, ESPSPIRanges:
		return 32, nil
	case IKESPILabels:
		return 64, nil
	}
	return 0, fmt.Errorf("%v: %w", t, ErrBadKey)
}

// checkKey enforces DispatchKey's rules for t.
func (t DispatchTable) checkKey(k DispatchKey) error {
	bits, err := t.keyBits()
	if err != nil {
		return err
	}
	if bits < 64 && (k.Value>>bits != 0 || k.Mask>>bits != 0) {
		return fmt.Errorf("%v: key %#x/%#x wider than %d bits: %w", t, k.Value, k.Mask, bits, ErrBadKey)
	}
	switch t {
	case ClientPools:
		if k.PrefixLen > 32 || k.Mask != 0 || k.Priority != 0 {
			return fmt.Errorf("%v: key %+v is not an IPv4 prefix: %w", t, k, ErrBadKey)
		}
		if k.Value&^prefixMask(k.PrefixLen) != 0 {
			return fmt.Errorf("%v: %#x has bits below its /%d: %w", t, k.Value, k.PrefixLen, ErrBadKey)
		}
	case ClientPins:
		if k.Mask != 0 || k.PrefixLen != 0 || k.Priority != 0 {
			return fmt.Errorf("%v: key %+v is not an exact key: %w", t, k, ErrBadKey)
		}
	case IKESPILabels, ESPSPIRanges:
		if k.PrefixLen != 0 || k.Priority <= 0 || k.Value&^k.Mask != 0 {
			return fmt.Errorf("%v: key %+v is not a ternary key with a priority: %w", t, k, ErrBadKey)
		}
	}
	return nil
}

// prefixMask is the 32-bit mask of an IPv4 prefix of length n.
func prefixMask(n uint8) uint64 {
	return (0xffffffff << (32 - uint(n))) & 0xffffffff
}

// dispatchIndex holds one DispatchTable's entries in userspace: each entry's gateway and
// the slot of its direct counter, and, for a ternary table, the order the data plane
// scans them in. The eBPF and the fake data plane share it.
type dispatchIndex struct {
	table   DispatchTable
	limit   int
	entries map[DispatchKey]*dispatchEntry
	free    []uint16 // unused counter slots, the lowest last
	seq     uint64
}

type dispatchEntry struct {
	key  DispatchKey
	gw   Gateway
	slot uint16
	seq  uint64 // insertion order: among equal priorities the older entry wins
}

func newDispatchIndex(t DispatchTable, limit int) *dispatchIndex {
	x := &dispatchIndex{table: t, limit: limit, entries: map[DispatchKey]*dispatchEntry{}}
	for s := limit - 1; s >= 0; s-- {
		x.free = append(x.free, uint16(s))
	}
	return x
}

// set inserts or modifies k; inserted says which.
func (x *dispatchIndex) set(k DispatchKey, gw Gateway) (e *dispatchEntry, inserted bool, err error) {
	if err := x.table.checkKey(k); err != nil {
		return nil, false, err
	}
	if e := x.entries[k]; e != nil {
		e.gw = gw
		return e, false, nil
	}
	if len(x.free) == 0 {
		return nil, false, fmt.Errorf("%v: table full (%d entries): %w", x.table, x.limit, ErrCapacity)
	}
	slot := x.free[len(x.free)-1]
	x.free = x.free[:len(x.free)-1]
	x.seq++
	e = &dispatchEntry{key: k, gw: gw, slot: slot, seq: x.seq}
	x.entries[k] = e
	return e, true, nil
}

// undoInsert forgets an entry set has just inserted (its data-plane write failed).
func (x *dispatchIndex) undoInsert(e *dispatchEntry) {
	delete(x.entries, e.key)
	x.free = append(x.free, e.slot)
}

func (x *dispatchIndex) get(k DispatchKey) (*dispatchEntry, error) {
	if err := x.table.checkKey(k); err != nil {
		return nil, err
	}
	e := x.entries[k]
	if e == nil {
		return nil, fmt.Errorf("%v: %+v: %w", x.table, k, ErrNotFound)
	}
	return e, nil
}

func (x *dispatchIndex) del(k DispatchKey) (*dispatchEntry, error) {
	e, err := x.get(k)
	if err != nil {
		return nil, err
	}
	delete(x.entries, k)
	x.free = append(x.free, e.slot)
	return e, nil
}

// ordered lists the entries as a ternary lookup must try them: priority high to low,
// then oldest first.
func (x *dispatchIndex) ordered() []*dispatchEntry {
	out := slices.Collect(maps.Values(x.entries))
	slices.SortFunc(out, func(a, b *dispatchEntry) int {
		if c := cmp.Compare(b.key.Priority, a.key.Priority); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	})
	return out
}
