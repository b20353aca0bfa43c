package dataplane

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"
)

// DefaultPinRoot is where New pins maps, one directory per device id.
const DefaultPinRoot = "/sys/fs/bpf/supergw"

// Config says what one switch instance serves.
type Config struct {
	// DeviceID is the P4Runtime device id; it names the pin directory.
	DeviceID uint64
	// Ports maps P4 port numbers to interface names (-i N@iface).
	Ports map[uint16]string
	// CPUPort is the P4 port of the CPU (never a front port).
	CPUPort uint16
	// PinDir overrides DefaultPinRoot/<DeviceID>.
	PinDir string
	// ReplaceIncompatible: a running predecessor whose maps do not fit this build's pipeline
	// is replaced (those maps re-created empty) instead of refused (ErrIncompatible).
	ReplaceIncompatible bool
}

// EBPF is the Dataplane backed by the tc program in bpf/supergw.c, attached
// with TCX ingress to every front port.
type EBPF struct {
	cfg       Config
	objs      bpfObjects
	ifindex   map[uint16]int
	pins      *pinDir
	links     map[uint16]link.Link
	prevLinks map[uint16]link.Link // the predecessor's live links, until Attach moves them
	adoption  *Adoption
	attached  bool // Attach ran: the ports run our program
	reader    *ringbuf.Reader
	events    chan Event
	done      chan struct{} // closed by teardown; unblocks the event reader
	tx        *transmitter
	readerWG  sync.WaitGroup

	mu        sync.Mutex // serialises read-modify-write sequences below
	closed    bool
	maxGroups uint32
	maxFlood  int

	portRoles     hashMap[uint16, uint8]
	ifindexPort   hashMap[uint32, bpfSgwPortInfo]
	settings      hashMap[uint32, bpfSgwDispatchConfig]
	hostIPs       hashMap[IPv4, MAC]
	nd            ndMaps
	buckets       hashMap[uint32, bpfSgwBucket]
	bucketCounter counterMap
	macTable      hashMap[MAC, bpfSgwL2Entry]
	learned       hashMap[bpfSgwLearnKey, uint64]
	digestSent    hashMap[bpfSgwLearnKey, uint64]
	floodGroups   hashMap[uint32, bpfSgwFloodGroup]
	dropCounter   counterMap
	portTx        counterMap
	ra            raMaps
	liveness      livenessMaps
}

var _ Dataplane = (*EBPF)(nil)

// New is Open and Attach: the pipeline loaded (adopting a running predecessor's maps) and
// on every port. The caller must Close (or Release) it.
func New(cfg Config) (*EBPF, error) {
	e, err := Open(cfg)
	if err != nil {
		return nil, err
	}
	if err := e.Attach(); err != nil {
		return nil, errors.Join(err, e.Close())
	}
	return e, nil
}

// Open loads the pipeline under the device's pin directory, held exclusively. When a
// predecessor's programs still run on our ports (it exited handing over, or crashed), its
// maps are reused where their layout is this build's (Adoption says what happened): the old
// programs keep forwarding on them until Attach moves the ports. Nothing is attached yet,
// so the caller can fill the maps first (the P4Runtime server's journal).
func Open(cfg Config) (_ *EBPF, err error) {
	ifindex, err := resolvePorts(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.PinDir == "" {
		cfg.PinDir = filepath.Join(DefaultPinRoot, strconv.FormatUint(cfg.DeviceID, 10))
	}
	pins, err := lockPinDir(cfg.PinDir)
	if err != nil {
		return nil, err
	}
	adoption, repl, prev, err := inspect(pins.path, ifindex, mapNames(), cfg.ReplaceIncompatible)
	if err != nil {
		pins.unlock()
		return nil, err
	}
	if !adoption.Live {
		// Left over by an instance whose programs no longer run anywhere: nothing to keep.
		if err := pins.removeAll(); err != nil {
			pins.unlock()
			return nil, fmt.Errorf("remove stale pins: %w", err)
		}
	}
	e, err := open(cfg, ifindex, repl)
	if err != nil {
		closeLinks(prev)
		pins.unlock()
		return nil, err
	}
	e.pins, e.prevLinks, e.adoption = pins, prev, adoption
	defer func() {
		if err != nil {
			e.teardown()
		}
	}()
	if e.tx, err = newTransmitter(ifindex); err != nil {
		return nil, err
	}
	return e, nil
}

// Adoption says what Open found of a predecessor and what it did with it.
func (e *EBPF) Adoption() *Adoption { return e.adoption }

// Attach pins the maps this instance created and points every port at its program: a
// predecessor's live link is updated in place (atomically: frames see the old program or
// the new one, never none), other ports get new links; all links are pinned, so the
// programs keep running after this process exits (Release).
func (e *EBPF) Attach() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.pinMaps(); err != nil {
		return err
	}
	e.attached = true
	return e.attachOrUpdate()
}

// open loads the pipeline, fills the port maps and starts the event reader,
// without pinning, attaching or opening packet sockets (BPF_PROG_RUN tests use
// it directly).
func open(cfg Config, ifindex map[uint16]int, repl map[string]*ebpf.Map) (_ *EBPF, err error) {
	e := &EBPF{cfg: cfg, ifindex: ifindex, links: map[uint16]link.Link{}, events: make(chan Event, 4096), done: make(chan struct{}),
		adoption: &Adoption{Created: mapNames()}}
	defer func() {
		if err != nil {
			e.teardown()
		}
	}()
	if err = e.load(repl); err != nil {
		return nil, err
	}
	for port, idx := range ifindex {
		// An adopted port_roles map already says each port's role: keep it, or the
		// predecessor's program (still running on these maps) would drop everything.
		role, _ := e.portRoles.get(port)
		if err = e.ifindexPort.put(uint32(idx), bpfSgwPortInfo{Port: port, Role: role}); err != nil {
			return nil, err
		}
	}
	if e.reader, err = ringbuf.NewReader(e.objs.SgwEvents); err != nil {
		return nil, fmt.Errorf("open event ring buffer: %w", err)
	}
	e.readerWG.Add(1)
	go e.readEvents()
	return e, nil
}

func resolvePorts(cfg Config) (map[uint16]int, error) {
	if len(cfg.Ports) == 0 {
		return nil, errors.New("dataplane config: no ports")
	}
	ifindex := make(map[uint16]int, len(cfg.Ports))
	seen := map[string]uint16{}
	for port, name := range cfg.Ports {
		if port == cfg.CPUPort {
			return nil, fmt.Errorf("dataplane config: port %d@%s is the CPU port", port, name)
		}
		if other, dup := seen[name]; dup {
			return nil, fmt.Errorf("dataplane config: interface %s given for ports %d and %d", name, other, port)
		}
		seen[name] = port
		ifc, err := net.InterfaceByName(name)
		if err != nil {
			return nil, fmt.Errorf("dataplane config: port %d: interface %q: %w", port, name, err)
		}
		ifindex[port] = ifc.Index
	}
	return ifindex, nil
}

func (e *EBPF) load(repl map[string]*ebpf.Map) error {
	err := loadBpfObjects(&e.objs, &ebpf.CollectionOptions{MapReplacements: repl})
	closeMaps(repl) // the objects hold their own references now
	if err != nil {
		var verr *ebpf.VerifierError
		if errors.As(err, &verr) {
			return fmt.Errorf("load eBPF pipeline: %+v", verr)
		}
		return fmt.Errorf("load eBPF pipeline: %w", err)
	}
	m := &e.objs.bpfMaps
	e.portRoles = hashMap[uint16, uint8]{m.SgwPortRoles, "port_roles"}
	e.ifindexPort = hashMap[uint32, bpfSgwPortInfo]{m.SgwIfindexPort, "ifindex_port"}
	e.settings = hashMap[uint32, bpfSgwDispatchConfig]{m.SgwSettings, "settings"}
	e.hostIPs = hashMap[IPv4, MAC]{m.SgwHostIps, "host_ips"}
	e.buckets = hashMap[uint32, bpfSgwBucket]{m.SgwBuckets, "buckets"}
	e.macTable = hashMap[MAC, bpfSgwL2Entry]{m.SgwMacTable, "mac_table"}
	e.learned = hashMap[bpfSgwLearnKey, uint64]{m.SgwLearnedSources, "learned_sources"}
	e.digestSent = hashMap[bpfSgwLearnKey, uint64]{m.SgwDigestSent, "digest_sent"}
	e.floodGroups = hashMap[uint32, bpfSgwFloodGroup]{m.SgwFloodGroups, "flood_groups"}
	e.maxGroups = m.SgwFloodGroups.MaxEntries()
	e.maxFlood = len(bpfSgwFloodGroup{}.Members)
	if e.bucketCounter, err = newCounterMap(m.SgwBucketCounter, "bucket_counter"); err != nil {
		return err
	}
	if e.dropCounter, err = newCounterMap(m.SgwDropCounter, "drop_counter"); err != nil {
		return err
	}
	if e.portTx, err = newCounterMap(m.SgwPortTx, "port_tx"); err != nil {
		return err
	}
	e.loadND()
	if err := e.loadLiveness(); err != nil {
		return err
	}
	return e.loadRemoteAccess()
}

// mapNames are the names under which the maps are pinned.
func mapNames() []string {
	var e EBPF
	return slices.Sorted(maps.Keys(e.mapsByName()))
}

func (e *EBPF) mapsByName() map[string]*ebpf.Map {
	m := &e.objs.bpfMaps
	all := e.raMapsByName()
	maps.Copy(all, e.ndMapsByName())
	maps.Copy(all, e.livenessMapsByName())
	maps.Copy(all, map[string]*ebpf.Map{
		bpfMapSgwBucketCounter:  m.SgwBucketCounter,
		bpfMapSgwBuckets:        m.SgwBuckets,
		bpfMapSgwDigestSent:     m.SgwDigestSent,
		bpfMapSgwDropCounter:    m.SgwDropCounter,
		bpfMapSgwEvents:         m.SgwEvents,
		bpfMapSgwFloodGroups:    m.SgwFloodGroups,
		bpfMapSgwHostIps:        m.SgwHostIps,
		bpfMapSgwIfindexPort:    m.SgwIfindexPort,
		bpfMapSgwLearnedSources: m.SgwLearnedSources,
		bpfMapSgwMacTable:       m.SgwMacTable,
		bpfMapSgwPortRoles:      m.SgwPortRoles,
		bpfMapSgwPortTx:         m.SgwPortTx,
		bpfMapSgwSettings:       m.SgwSettings,
	})
	return all
}

// PinDir is the directory holding this instance's pinned maps.
func (e *EBPF) PinDir() string { return e.cfg.PinDir }

// Ports returns the P4 port numbers this target was started with.
func (e *EBPF) Ports() []uint16 { return slices.Sorted(maps.Keys(e.ifindex)) }

func (e *EBPF) SetPortRole(port uint16, role uint8) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.portRoles.put(port, role); err != nil {
		return err
	}
	return e.copyRole(port, role)
}

func (e *EBPF) DeletePortRole(port uint16) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.portRoles.del(port); err != nil {
		return err
	}
	return e.copyRole(port, 0)
}

// copyRole puts port's role (0: none) next to its ifindex, where the program
// reads it; a port this switch was not started with has no ifindex entry.
func (e *EBPF) copyRole(port uint16, role uint8) error {
	idx, ok := e.ifindex[port]
	if !ok {
		return nil
	}
	return e.ifindexPort.put(uint32(idx), bpfSgwPortInfo{Port: port, Role: role})
}

func (e *EBPF) SetDispatchConfig(cfg DispatchConfig) error {
	var v bpfSgwDispatchConfig
	if cfg.Configured {
		v = bpfSgwDispatchConfig{
			GatewayIp:  nativeU32(cfg.GatewayIP),
			BucketMask: cfg.BucketMask,
			Configured: 1,
			BucketHash: uint8(cfg.BucketHash),
			VmacBase:   cfg.VMACBase,
		}
	}
	return e.settings.put(0, v)
}

func (e *EBPF) SetHostIP(ip IPv4, mac MAC) error { return e.hostIPs.put(ip, mac) }

func (e *EBPF) DeleteHostIP(ip IPv4) error { return e.hostIPs.del(ip) }

func (e *EBPF) bucketEntry(bucket uint16) (bpfSgwBucket, error) {
	if uint32(bucket) >= e.objs.SgwBuckets.MaxEntries() {
		return bpfSgwBucket{}, fmt.Errorf("buckets: bucket %d not in [0, %d): %w", bucket, e.objs.SgwBuckets.MaxEntries(), ErrOutOfRange)
	}
	return e.buckets.get(uint32(bucket))
}

// SetBucket inserts or modifies a buckets entry; an insert starts its direct
// counter at zero, a modify keeps it.
func (e *EBPF) SetBucket(bucket uint16, port uint16, gatewayMAC MAC) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	old, err := e.bucketEntry(bucket)
	if err != nil {
		return err
	}
	if old.Valid == 0 {
		if err := e.bucketCounter.set(uint32(bucket), Counter{}); err != nil {
			return err
		}
	}
	return e.buckets.put(uint32(bucket), bpfSgwBucket{
		Ifindex:    uint32(e.ifindex[port]),
		Port:       port,
		Valid:      1,
		GatewayMac: gatewayMAC,
	})
}

func (e *EBPF) DeleteBucket(bucket uint16) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	old, err := e.bucketEntry(bucket)
	if err != nil {
		return err
	}
	if old.Valid == 0 {
		return fmt.Errorf("buckets: bucket %d: %w", bucket, ErrNotFound)
	}
	if err := e.buckets.put(uint32(bucket), bpfSgwBucket{}); err != nil {
		return err
	}
	return e.bucketCounter.set(uint32(bucket), Counter{})
}

func (e *EBPF) BucketCounter(bucket uint16) (Counter, error) {
	old, err := e.bucketEntry(bucket)
	if err != nil {
		return Counter{}, err
	}
	if old.Valid == 0 {
		return Counter{}, fmt.Errorf("bucket_counter: bucket %d: %w", bucket, ErrNotFound)
	}
	return e.bucketCounter.read(uint32(bucket))
}

func (e *EBPF) SetBucketCounter(bucket uint16, c Counter) error {
	old, err := e.bucketEntry(bucket)
	if err != nil {
		return err
	}
	if old.Valid == 0 {
		return fmt.Errorf("bucket_counter: bucket %d: %w", bucket, ErrNotFound)
	}
	return e.bucketCounter.set(uint32(bucket), c)
}

func (e *EBPF) SetL2(mac MAC, port uint16, role uint8) error {
	return e.macTable.put(mac, bpfSgwL2Entry{Ifindex: uint32(e.ifindex[port]), Port: port, Role: role})
}

func (e *EBPF) DeleteL2(mac MAC) error { return e.macTable.del(mac) }

func (e *EBPF) SetLearned(mac MAC, port uint16) error {
	now, err := monotonicNow()
	if err != nil {
		return err
	}
	return e.learned.put(bpfSgwLearnKey{Mac: mac, Port: port}, now)
}

// DeleteLearned also forgets the digest hold-off, so the next frame from the
// source is reported at once.
func (e *EBPF) DeleteLearned(mac MAC, port uint16) error {
	k := bpfSgwLearnKey{Mac: mac, Port: port}
	if err := e.learned.del(k); err != nil {
		return err
	}
	if err := e.digestSent.del(k); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	return nil
}

func (e *EBPF) LearnedIdle(mac MAC, port uint16) (time.Duration, error) {
	last, err := e.learned.get(bpfSgwLearnKey{Mac: mac, Port: port})
	if err != nil {
		return 0, err
	}
	now, err := monotonicNow()
	if err != nil {
		return 0, err
	}
	if now < last {
		return 0, nil
	}
	return time.Duration(now - last), nil
}

func (e *EBPF) LearnedIdleAll() (map[LearnedKey]time.Duration, error) {
	now, err := monotonicNow()
	if err != nil {
		return nil, err
	}
	out := make(map[LearnedKey]time.Duration)
	err = readAll(e.learned, func(k bpfSgwLearnKey, last uint64) {
		out[LearnedKey{MAC: k.Mac, Port: k.Port}] = time.Duration(now - min(now, last))
	})
	return out, err
}

// SetFloodGroup stores the replicas of group id; ports not attached here are
// kept with ifindex 0 and skipped by the datapath.
func (e *EBPF) SetFloodGroup(id uint16, ports []uint16) error {
	if uint32(id) >= e.maxGroups {
		return fmt.Errorf("flood_groups: group %d not in [0, %d): %w", id, e.maxGroups, ErrOutOfRange)
	}
	if len(ports) > e.maxFlood {
		return fmt.Errorf("flood_groups: group %d has %d replicas, at most %d supported: %w", id, len(ports), e.maxFlood, ErrCapacity)
	}
	var g bpfSgwFloodGroup
	g.Count = uint32(len(ports))
	for i, p := range ports {
		g.Members[i] = bpfSgwFloodMember{Ifindex: uint32(e.ifindex[p]), Port: p}
	}
	return e.floodGroups.put(uint32(id), g)
}

func (e *EBPF) DropCounter(reason uint16) (Counter, error) {
	return e.dropCounter.read(uint32(reason))
}

func (e *EBPF) SetDropCounter(reason uint16, c Counter) error {
	return e.dropCounter.set(uint32(reason), c)
}

func (e *EBPF) CountDrop(reason uint16, n int) error {
	if n < 0 {
		return fmt.Errorf("drop_counter: negative length %d", n)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.dropCounter.add(uint32(reason), 1, uint64(n))
}

// PortTxCounter reads the frames the datapath sent out of a port (not a P4
// object; for benchmarks and debugging).
func (e *EBPF) PortTxCounter(port uint16) (Counter, error) {
	return e.portTx.read(uint32(port))
}

// RunIngress runs the ingress program repeat times with BPF_PROG_RUN on frame,
// as if it had arrived on port, and returns the last verdict (a TC_ACT_*
// value) and the wall-clock time per run. Maps change exactly as with real
// traffic. The calling OS thread must be in the ports' network namespace
// (runtime.LockOSThread). Meant for benchmarks (cmd/sgw-dpbench).
func (e *EBPF) RunIngress(port uint16, frame []byte, repeat uint32) (uint32, time.Duration, error) {
	idx, ok := e.ifindex[port]
	if !ok {
		return 0, 0, fmt.Errorf("run ingress: port %d is not attached", port)
	}
	if repeat == 0 {
		repeat = 1
	}
	ctx := make([]byte, skbCtxSize)
	binary.LittleEndian.PutUint32(ctx[skbCtxIfindexOff:], uint32(idx))
	start := time.Now()
	ret, err := e.objs.SgwIngress.Run(&ebpf.RunOptions{Data: frame, Context: ctx, Repeat: repeat})
	elapsed := time.Since(start)
	if err != nil {
		return 0, 0, fmt.Errorf("run ingress on port %d: %w", port, err)
	}
	return ret, elapsed / time.Duration(repeat), nil
}

// struct __sk_buff as BPF_PROG_RUN takes it: only ifindex is set.
const (
	skbCtxSize       = 192
	skbCtxIfindexOff = 40
)

func (e *EBPF) Transmit(port uint16, frame []byte) error {
	return e.tx.send(port, frame)
}

func (e *EBPF) Events() <-chan Event { return e.events }

// Close detaches the program from every port, removes the pinned maps and
// stops the event reader: the data plane is gone. It is safe to call more than once.
func (e *EBPF) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	return e.teardown()
}

// Release ends this process's hold on the data plane and leaves it running: the pinned
// links keep the program on every port and the pinned maps keep the state, for the next
// instance to adopt (a restart or an upgrade). Digests and packet-ins wait in the event
// ring buffer meanwhile. Safe to call more than once; Close after Release does nothing.
func (e *EBPF) Release() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	var errs []error
	for _, l := range e.links {
		errs = append(errs, l.Close()) // closes our descriptor; the pin keeps the link
	}
	e.links = nil
	errs = append(errs, e.stopReader())
	if e.tx != nil {
		errs = append(errs, e.tx.close())
	}
	errs = append(errs, e.objs.Close())
	if e.pins != nil {
		e.pins.unlock()
	}
	return errors.Join(errs...)
}

func (e *EBPF) stopReader() error {
	close(e.done)
	if e.reader == nil {
		close(e.events)
		return nil
	}
	err := e.reader.Close()
	e.readerWG.Wait()
	if err != nil {
		return fmt.Errorf("close event reader: %w", err)
	}
	return nil
}

func (e *EBPF) teardown() error {
	var errs []error
	for _, l := range e.links {
		errs = append(errs, l.Unpin())
		if err := l.Close(); err != nil {
			errs = append(errs, fmt.Errorf("detach: %w", err))
		}
	}
	e.links = nil
	closeLinks(e.prevLinks) // a predecessor's links never moved: its programs keep running
	e.prevLinks = nil
	errs = append(errs, e.stopReader())
	if e.tx != nil {
		errs = append(errs, e.tx.close())
	}
	// Before Attach a live predecessor still runs on its pins: they stay.
	ours := e.attached || e.adoption == nil || !e.adoption.Live
	if e.pins != nil && ours {
		errs = append(errs, e.pins.removeAll())
	}
	if err := e.objs.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close eBPF objects: %w", err))
	}
	if e.pins != nil {
		if ours {
			errs = append(errs, e.pins.unlockAndRemove())
		} else {
			e.pins.unlock()
		}
	}
	return errors.Join(errs...)
}

// monotonicNow reads the clock of bpf_ktime_get_coarse_ns.
func monotonicNow() (uint64, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC_COARSE, &ts); err != nil {
		return 0, fmt.Errorf("clock_gettime: %w", err)
	}
	return uint64(ts.Nano()), nil
}

// nativeU32 reinterprets network-order bytes as the integer the C struct holds
// in a __be32 field (bpf2go only generates little-endian bindings).
func nativeU32(b [4]byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}
