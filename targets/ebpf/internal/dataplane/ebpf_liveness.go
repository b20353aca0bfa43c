package dataplane

import (
	"fmt"

	"github.com/cilium/ebpf"
)

// The gateway liveness maps (bpf/supergw_liveness.h): gateway_backups, the per-port time of
// the last liveness frame (written by the program only), and the two per-port counters.
type livenessMaps struct {
	backups  hashMap[uint32, bpfSgwGatewayBackup]
	frames   counterMap
	failover counterMap
}

func (e *EBPF) loadLiveness() error {
	m := &e.objs.bpfMaps
	e.liveness.backups = hashMap[uint32, bpfSgwGatewayBackup]{m.SgwGatewayBackups, "gateway_backups"}
	var err error
	if e.liveness.frames, err = newCounterMap(m.SgwLivenessFrames, "liveness_frames"); err != nil {
		return err
	}
	e.liveness.failover, err = newCounterMap(m.SgwFailoverFrames, "failover_frames")
	return err
}

func (e *EBPF) livenessMapsByName() map[string]*ebpf.Map {
	m := &e.objs.bpfMaps
	return map[string]*ebpf.Map{
		bpfMapSgwGatewayBackups:  m.SgwGatewayBackups,
		bpfMapSgwGatewayLastSeen: m.SgwGatewayLastSeen,
		bpfMapSgwLivenessFrames:  m.SgwLivenessFrames,
		bpfMapSgwFailoverFrames:  m.SgwFailoverFrames,
	}
}

func (e *EBPF) backupSlot(gateway uint16) (uint32, error) {
	if n := e.objs.SgwGatewayBackups.MaxEntries(); uint32(gateway) >= n {
		return 0, fmt.Errorf("gateway_backups: port %d not in [0, %d): %w", gateway, n, ErrOutOfRange)
	}
	return uint32(gateway), nil
}

func (e *EBPF) SetGatewayBackup(gateway uint16, b GatewayBackup) error {
	slot, err := e.backupSlot(gateway)
	if err != nil {
		return err
	}
	if b.Timeout <= 0 {
		return fmt.Errorf("gateway_backups: port %d: timeout %v must be positive", gateway, b.Timeout)
	}
	return e.liveness.backups.put(slot, bpfSgwGatewayBackup{
		TimeoutNs:  uint64(b.Timeout.Nanoseconds()),
		Ifindex:    uint32(e.ifindex[b.Port]),
		Port:       b.Port,
		Valid:      1,
		GatewayMac: b.MAC,
	})
}

func (e *EBPF) DeleteGatewayBackup(gateway uint16) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	slot, err := e.backupSlot(gateway)
	if err != nil {
		return err
	}
	old, err := e.liveness.backups.get(slot)
	if err != nil {
		return err
	}
	if old.Valid == 0 {
		return fmt.Errorf("gateway_backups: port %d: %w", gateway, ErrNotFound)
	}
	return e.liveness.backups.put(slot, bpfSgwGatewayBackup{})
}

func (e *EBPF) portCounterMap(c PortCounter) (counterMap, error) {
	switch c {
	case LivenessFrames:
		return e.liveness.frames, nil
	case FailoverFrames:
		return e.liveness.failover, nil
	}
	return counterMap{}, fmt.Errorf("port counter %d: %w", c, ErrNotFound)
}

func (e *EBPF) PortCounter(c PortCounter, port uint16) (Counter, error) {
	m, err := e.portCounterMap(c)
	if err != nil {
		return Counter{}, err
	}
	return m.read(uint32(port))
}

func (e *EBPF) SetPortCounter(c PortCounter, port uint16, v Counter) error {
	m, err := e.portCounterMap(c)
	if err != nil {
		return err
	}
	return m.set(uint32(port), v)
}
