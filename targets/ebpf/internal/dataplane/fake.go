package dataplane

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// Fake is an in-memory Dataplane for unit tests of the P4Runtime server. It
// records every call's effect in plain maps that tests inspect through the
// accessor methods, and lets tests inject events and idle times. It enforces
// the real data plane's limits (map sizes of the compiled eBPF object) with the
// same errors: ErrOutOfRange, ErrCapacity.
type Fake struct {
	mu          sync.Mutex
	limits      fakeLimits
	ports       []uint16
	portRoles   map[uint16]uint8
	dispatch    DispatchConfig
	hostIPs     map[IPv4]MAC
	buckets     map[uint16]BucketEntry
	bucketCtr   map[uint16]Counter
	l2          map[MAC]L2Entry
	learned     map[LearnedKey]time.Time
	floodGroups map[uint16][]uint16
	drops       map[uint16]Counter
	transmitted []Transmitted
	events      chan Event
	closed      bool
	now         func() time.Time
	ra          RAConfig
	dispatchTbl map[DispatchTable]*dispatchIndex
	dispatchCtr map[DispatchTable]map[uint16]Counter
	nd          NDConfig
	hostIP6s    map[IPv6]MAC
	learnedIP6s map[LearnedIP6Key]time.Time
	backups     map[uint16]GatewayBackup
	portCtr     map[PortCounter]map[uint16]Counter
}

// BucketEntry is what SetBucket stored for one bucket.
type BucketEntry struct {
	Port       uint16
	GatewayMAC MAC
}

// Transmitted is one frame sent with Transmit.
type Transmitted struct {
	Port  uint16
	Frame []byte
}

// fakeLimits are the max_entries of the eBPF maps (and the flood group size).
type fakeLimits struct {
	portRoles, hostIPs, buckets, l2, learned, groups, replicas, drops int
	hostIP6s, learnedIP6s                                             int
	backups, livenessPorts                                            int
	dispatch                                                          map[DispatchTable]int
}

var (
	limitsOnce sync.Once
	limits     fakeLimits
	limitsErr  error
)

// specLimits reads the limits from the embedded eBPF object without loading it.
func specLimits() (fakeLimits, error) {
	limitsOnce.Do(func() {
		spec, err := loadBpf()
		if err != nil {
			limitsErr = fmt.Errorf("fake data plane: read eBPF map sizes: %w", err)
			return
		}
		size := func(name string) int {
			if m := spec.Maps[name]; m != nil {
				return int(m.MaxEntries)
			}
			limitsErr = fmt.Errorf("fake data plane: eBPF object has no map %s", name)
			return 0
		}
		limits = fakeLimits{
			portRoles: size(bpfMapSgwPortRoles),
			hostIPs:   size(bpfMapSgwHostIps),
			buckets:   size(bpfMapSgwBuckets),
			l2:        size(bpfMapSgwMacTable),
			learned:   size(bpfMapSgwLearnedSources),
			groups:    size(bpfMapSgwFloodGroups),
			replicas:  len(bpfSgwFloodGroup{}.Members),
			drops:     size(bpfMapSgwDropCounter),
			dispatch:  dispatchLimits(size),

			hostIP6s:    size(bpfMapSgwHostIp6s),
			learnedIP6s: size(bpfMapSgwLearnedIp6s),

			backups:       size(bpfMapSgwGatewayBackups),
			livenessPorts: size(bpfMapSgwLivenessFrames),
		}
	})
	return limits, limitsErr
}

// NewFake returns a fake data plane with the given front ports. It panics if
// the embedded eBPF object cannot be parsed (a broken build).
func NewFake(ports ...uint16) *Fake {
	l, err := specLimits()
	if err != nil {
		panic(err)
	}
	f := &Fake{
		limits:      l,
		ports:       slices.Clone(ports),
		portRoles:   map[uint16]uint8{},
		hostIPs:     map[IPv4]MAC{},
		buckets:     map[uint16]BucketEntry{},
		bucketCtr:   map[uint16]Counter{},
		l2:          map[MAC]L2Entry{},
		learned:     map[LearnedKey]time.Time{},
		floodGroups: map[uint16][]uint16{},
		drops:       map[uint16]Counter{},
		events:      make(chan Event, 1024),
		now:         time.Now,
		dispatchTbl: map[DispatchTable]*dispatchIndex{},
		dispatchCtr: map[DispatchTable]map[uint16]Counter{},
		hostIP6s:    map[IPv6]MAC{},
		learnedIP6s: map[LearnedIP6Key]time.Time{},
		backups:     map[uint16]GatewayBackup{},
		portCtr:     map[PortCounter]map[uint16]Counter{LivenessFrames: {}, FailoverFrames: {}},
	}
	for t, n := range l.dispatch {
		f.dispatchTbl[t] = newDispatchIndex(t, n)
		f.dispatchCtr[t] = map[uint16]Counter{}
	}
	return f
}

var _ Dataplane = (*Fake)(nil)

func (f *Fake) Ports() []uint16 { return slices.Clone(f.ports) }

// full reports ErrCapacity when adding a new key to a map of n entries.
func full[K comparable, V any](name string, m map[K]V, k K, limit int) error {
	if _, ok := m[k]; !ok && len(m) >= limit {
		return fmt.Errorf("%s: map full (%d entries): %w", name, limit, ErrCapacity)
	}
	return nil
}

// remove deletes k from m, or says that what is not installed.
func remove[K comparable, V any](m map[K]V, k K, what string) error {
	if _, ok := m[k]; !ok {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	delete(m, k)
	return nil
}

// installedBucket checks that bucket is in range and has an entry.
func (f *Fake) installedBucket(bucket uint16) error {
	if err := f.checkBucket(bucket); err != nil {
		return err
	}
	if _, ok := f.buckets[bucket]; !ok {
		return fmt.Errorf("bucket %d: %w", bucket, ErrNotFound)
	}
	return nil
}

func (f *Fake) checkBucket(bucket uint16) error {
	if int(bucket) >= f.limits.buckets {
		return fmt.Errorf("buckets: bucket %d not in [0, %d): %w", bucket, f.limits.buckets, ErrOutOfRange)
	}
	return nil
}

func (f *Fake) checkDrop(reason uint16) error {
	if int(reason) >= f.limits.drops {
		return fmt.Errorf("drop_counter: index %d not in [0, %d): %w", reason, f.limits.drops, ErrOutOfRange)
	}
	return nil
}

func (f *Fake) SetPortRole(port uint16, role uint8) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := full("port_roles", f.portRoles, port, f.limits.portRoles); err != nil {
		return err
	}
	f.portRoles[port] = role
	return nil
}

func (f *Fake) DeletePortRole(port uint16) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return remove(f.portRoles, port, fmt.Sprintf("port role %d", port))
}

func (f *Fake) SetDispatchConfig(cfg DispatchConfig) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dispatch = cfg
	return nil
}

func (f *Fake) SetHostIP(ip IPv4, mac MAC) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := full("host_ips", f.hostIPs, ip, f.limits.hostIPs); err != nil {
		return err
	}
	f.hostIPs[ip] = mac
	return nil
}

func (f *Fake) DeleteHostIP(ip IPv4) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return remove(f.hostIPs, ip, fmt.Sprintf("host ip %v", ip))
}

func (f *Fake) SetBucket(bucket uint16, port uint16, gatewayMAC MAC) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.checkBucket(bucket); err != nil {
		return err
	}
	f.buckets[bucket] = BucketEntry{Port: port, GatewayMAC: gatewayMAC}
	return nil
}

func (f *Fake) DeleteBucket(bucket uint16) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.installedBucket(bucket); err != nil {
		return err
	}
	delete(f.buckets, bucket)
	delete(f.bucketCtr, bucket)
	return nil
}

func (f *Fake) BucketCounter(bucket uint16) (Counter, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.installedBucket(bucket); err != nil {
		return Counter{}, err
	}
	return f.bucketCtr[bucket], nil
}

func (f *Fake) SetBucketCounter(bucket uint16, c Counter) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.installedBucket(bucket); err != nil {
		return err
	}
	f.bucketCtr[bucket] = c
	return nil
}

func (f *Fake) SetL2(mac MAC, port uint16, role uint8) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := full("mac_table", f.l2, mac, f.limits.l2); err != nil {
		return err
	}
	f.l2[mac] = L2Entry{Port: port, Role: role}
	return nil
}

func (f *Fake) DeleteL2(mac MAC) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return remove(f.l2, mac, fmt.Sprintf("l2 %v", mac))
}

func (f *Fake) SetLearned(mac MAC, port uint16) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := full("learned_sources", f.learned, LearnedKey{mac, port}, f.limits.learned); err != nil {
		return err
	}
	f.learned[LearnedKey{mac, port}] = f.now()
	return nil
}

func (f *Fake) DeleteLearned(mac MAC, port uint16) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return remove(f.learned, LearnedKey{mac, port}, fmt.Sprintf("learned %v@%d", mac, port))
}

func (f *Fake) LearnedIdle(mac MAC, port uint16) (time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return idleOf(f.learned, LearnedKey{mac, port}, f.now())
}

func (f *Fake) LearnedIdleAll() (map[LearnedKey]time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return idleOfAll(f.learned, f.now()), nil
}

// idleOf is how long ago the entry k of a learned table was last hit.
func idleOf[K comparable](m map[K]time.Time, k K, now time.Time) (time.Duration, error) {
	last, ok := m[k]
	if !ok {
		return 0, fmt.Errorf("learned %+v: %w", k, ErrNotFound)
	}
	return now.Sub(last), nil
}

func idleOfAll[K comparable](m map[K]time.Time, now time.Time) map[K]time.Duration {
	out := make(map[K]time.Duration, len(m))
	for k, last := range m {
		out[k] = now.Sub(last)
	}
	return out
}

func (f *Fake) SetFloodGroup(id uint16, ports []uint16) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if int(id) >= f.limits.groups {
		return fmt.Errorf("flood_groups: group %d not in [0, %d): %w", id, f.limits.groups, ErrOutOfRange)
	}
	if len(ports) > f.limits.replicas {
		return fmt.Errorf("flood_groups: group %d has %d replicas, at most %d supported: %w", id, len(ports), f.limits.replicas, ErrCapacity)
	}
	if len(ports) == 0 {
		delete(f.floodGroups, id)
		return nil
	}
	f.floodGroups[id] = slices.Clone(ports)
	return nil
}

func (f *Fake) DropCounter(reason uint16) (Counter, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.checkDrop(reason); err != nil {
		return Counter{}, err
	}
	return f.drops[reason], nil
}

func (f *Fake) SetDropCounter(reason uint16, c Counter) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.checkDrop(reason); err != nil {
		return err
	}
	f.drops[reason] = c
	return nil
}

func (f *Fake) CountDrop(reason uint16, n int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n < 0 {
		return fmt.Errorf("drop_counter: negative length %d", n)
	}
	if err := f.checkDrop(reason); err != nil {
		return err
	}
	c := f.drops[reason]
	c.Packets++
	c.Bytes += uint64(n)
	f.drops[reason] = c
	return nil
}

func (f *Fake) Transmit(port uint16, frame []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !slices.Contains(f.ports, port) {
		return fmt.Errorf("transmit on port %d: no such port", port)
	}
	f.transmitted = append(f.transmitted, Transmitted{Port: port, Frame: slices.Clone(frame)})
	return nil
}

func (f *Fake) Events() <-chan Event { return f.events }

func (f *Fake) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.closed {
		f.closed = true
		close(f.events)
	}
	return nil
}

// Emit injects an event as if the data plane had produced it.
func (f *Fake) Emit(e Event) { f.events <- e }

// Touch marks (mac, port) as hit at now-idle, so LearnedIdle reports idle.
func (f *Fake) Touch(mac MAC, port uint16, idle time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := LearnedKey{mac, port}
	if _, ok := f.learned[k]; ok {
		f.learned[k] = f.now().Add(-idle)
	}
}

// PortRoles returns a copy of the installed port roles.
func (f *Fake) PortRoles() map[uint16]uint8 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return cloneMap(f.portRoles)
}

// Dispatch returns the current dispatch configuration.
func (f *Fake) Dispatch() DispatchConfig {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dispatch
}

// HostIPs returns a copy of the host_ips entries.
func (f *Fake) HostIPs() map[IPv4]MAC {
	f.mu.Lock()
	defer f.mu.Unlock()
	return cloneMap(f.hostIPs)
}

// Buckets returns a copy of the bucket entries.
func (f *Fake) Buckets() map[uint16]BucketEntry {
	f.mu.Lock()
	defer f.mu.Unlock()
	return cloneMap(f.buckets)
}

// L2Entry is what SetL2 stored for one MAC.
type L2Entry struct {
	Port uint16
	Role uint8
}

// L2 returns a copy of the mac_table entries.
func (f *Fake) L2() map[MAC]L2Entry {
	f.mu.Lock()
	defer f.mu.Unlock()
	return cloneMap(f.l2)
}

// Learned returns the installed learned_sources keys.
func (f *Fake) Learned() []LearnedKey {
	f.mu.Lock()
	defer f.mu.Unlock()
	keys := make([]LearnedKey, 0, len(f.learned))
	for k := range f.learned {
		keys = append(keys, k)
	}
	return keys
}

// FloodGroups returns a copy of the multicast groups.
func (f *Fake) FloodGroups() map[uint16][]uint16 {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[uint16][]uint16, len(f.floodGroups))
	for k, v := range f.floodGroups {
		out[k] = slices.Clone(v)
	}
	return out
}

// Sent returns the frames transmitted so far.
func (f *Fake) Sent() []Transmitted {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.transmitted)
}

func cloneMap[K comparable, V any](m map[K]V) map[K]V {
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
