package dataplane

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// hashMap is a typed view of one BPF hash or array map.
type hashMap[K, V any] struct {
	m    *ebpf.Map
	name string
}

func (h hashMap[K, V]) put(k K, v V) error {
	if err := h.m.Update(k, v, ebpf.UpdateAny); err != nil {
		// The kernel answers E2BIG for an array index >= max_entries, and when
		// a hash map already holds max_entries keys.
		if errors.Is(err, unix.E2BIG) {
			if h.m.Type() == ebpf.Array || h.m.Type() == ebpf.PerCPUArray {
				return fmt.Errorf("%s: index %v not in [0, %d): %w", h.name, k, h.m.MaxEntries(), ErrOutOfRange)
			}
			return fmt.Errorf("%s: update %v: map full (%d entries): %w", h.name, k, h.m.MaxEntries(), ErrCapacity)
		}
		return fmt.Errorf("%s: update %v: %w", h.name, k, err)
	}
	return nil
}

func (h hashMap[K, V]) get(k K) (V, error) {
	var v V
	if err := h.m.Lookup(k, &v); err != nil {
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return v, fmt.Errorf("%s: %v: %w", h.name, k, ErrNotFound)
		}
		return v, fmt.Errorf("%s: lookup %v: %w", h.name, k, err)
	}
	return v, nil
}

func (h hashMap[K, V]) del(k K) error {
	if err := h.m.Delete(k); err != nil {
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("%s: %v: %w", h.name, k, ErrNotFound)
		}
		return fmt.Errorf("%s: delete %v: %w", h.name, k, err)
	}
	return nil
}

// batchSize is how many entries one BPF_MAP_LOOKUP_BATCH call reads.
const batchSize = 1024

// readAll hands every entry of a hash map to f, batchSize entries per syscall
// (BPF_MAP_LOOKUP_BATCH), or one by one where the kernel has no batch lookup.
func readAll[K comparable, V any](h hashMap[K, V], f func(K, V)) error {
	keys, vals := make([]K, batchSize), make([]V, batchSize)
	var cursor ebpf.MapBatchCursor
	for {
		n, err := h.m.BatchLookup(&cursor, keys, vals, nil)
		for i := range n {
			f(keys[i], vals[i])
		}
		switch {
		case errors.Is(err, ebpf.ErrKeyNotExist):
			return nil
		case errors.Is(err, ebpf.ErrNotSupported):
			return iterateAll(h, f)
		case err != nil:
			return fmt.Errorf("%s: read all: %w", h.name, err)
		}
	}
}

func iterateAll[K comparable, V any](h hashMap[K, V], f func(K, V)) error {
	var k K
	var v V
	it := h.m.Iterate()
	for it.Next(&k, &v) {
		f(k, v)
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("%s: read all: %w", h.name, err)
	}
	return nil
}

// counterMap is a per-CPU array of packets/bytes counters, summed on read.
type counterMap struct {
	m    *ebpf.Map
	name string
	cpus int
}

func newCounterMap(m *ebpf.Map, name string) (counterMap, error) {
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		return counterMap{}, fmt.Errorf("%s: possible CPUs: %w", name, err)
	}
	return counterMap{m: m, name: name, cpus: cpus}, nil
}

func (c counterMap) size() uint32 { return c.m.MaxEntries() }

func (c counterMap) checkIndex(i uint32) error {
	if i >= c.size() {
		return fmt.Errorf("%s: index %d not in [0, %d): %w", c.name, i, c.size(), ErrOutOfRange)
	}
	return nil
}

func (c counterMap) percpu(i uint32) ([]bpfSgwCounter, error) {
	if err := c.checkIndex(i); err != nil {
		return nil, err
	}
	vals := make([]bpfSgwCounter, c.cpus)
	if err := c.m.Lookup(i, &vals); err != nil {
		return nil, fmt.Errorf("%s: lookup %d: %w", c.name, i, err)
	}
	return vals, nil
}

func (c counterMap) read(i uint32) (Counter, error) {
	vals, err := c.percpu(i)
	if err != nil {
		return Counter{}, err
	}
	var sum Counter
	for _, v := range vals {
		sum.Packets += v.Packets
		sum.Bytes += v.Bytes
	}
	return sum, nil
}

// set stores v on CPU 0 and zeroes the other CPUs, so the sum reads back as v.
func (c counterMap) set(i uint32, v Counter) error {
	if err := c.checkIndex(i); err != nil {
		return err
	}
	vals := make([]bpfSgwCounter, c.cpus)
	vals[0] = bpfSgwCounter{Packets: v.Packets, Bytes: v.Bytes}
	if err := c.m.Update(i, vals, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("%s: update %d: %w", c.name, i, err)
	}
	return nil
}

// add adds to CPU 0's slot. Not atomic against the datapath running on CPU 0
// at the same instant (it may lose that one increment); used for rare
// userspace-decided drops only.
func (c counterMap) add(i uint32, packets, bytes uint64) error {
	vals, err := c.percpu(i)
	if err != nil {
		return err
	}
	vals[0].Packets += packets
	vals[0].Bytes += bytes
	if err := c.m.Update(i, vals, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("%s: update %d: %w", c.name, i, err)
	}
	return nil
}
