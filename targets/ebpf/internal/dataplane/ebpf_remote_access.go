package dataplane

import (
	"encoding/binary"
	"fmt"

	"github.com/cilium/ebpf"

	"supergw/targets/ebpf/internal/p4constants"
)

// raMaps are the eBPF maps of the remote-access tables and the userspace index of each
// DispatchTable (slots, ternary order).
type raMaps struct {
	settings  hashMap[uint32, bpfSgwRaConfig]
	pools     hashMap[bpfSgwLpmV4, bpfSgwGateway]
	poolCount hashMap[uint32, uint32]
	pins      hashMap[IPv4, bpfSgwGateway]
	ike, esp  hashMap[uint32, bpfSgwTernaryTable]
	counters  map[DispatchTable]counterMap
	index     map[DispatchTable]*dispatchIndex
}

// dispatchLimits are the entries each DispatchTable holds: its P4 size, and no more than
// its eBPF map (a ternary table's array) has room for.
func dispatchLimits(spec func(string) int) map[DispatchTable]int {
	ternary := len(bpfSgwTernaryTable{}.Entries)
	return map[DispatchTable]int{
		ClientPools:  min(p4constants.ClientPoolsTableSize, spec(bpfMapSgwClientPools)),
		ClientPins:   min(p4constants.ClientPinsTableSize, spec(bpfMapSgwClientPins)),
		IKESPILabels: min(p4constants.IKESPILabelsTableSize, ternary),
		ESPSPIRanges: min(p4constants.ESPSPIRangesTableSize, ternary),
	}
}

func (e *EBPF) loadRemoteAccess() error {
	m := &e.objs.bpfMaps
	r := &e.ra
	r.settings = hashMap[uint32, bpfSgwRaConfig]{m.SgwRaSettings, "ra_settings"}
	r.pools = hashMap[bpfSgwLpmV4, bpfSgwGateway]{m.SgwClientPools, "client_pools"}
	r.poolCount = hashMap[uint32, uint32]{m.SgwClientPoolCount, "client_pool_count"}
	r.pins = hashMap[IPv4, bpfSgwGateway]{m.SgwClientPins, "client_pins"}
	r.ike = hashMap[uint32, bpfSgwTernaryTable]{m.SgwIkeSpiLabels, "ike_spi_labels"}
	r.esp = hashMap[uint32, bpfSgwTernaryTable]{m.SgwEspSpiRanges, "esp_spi_ranges"}
	r.counters = map[DispatchTable]counterMap{}
	for t, cm := range map[DispatchTable]*ebpf.Map{
		ClientPools: m.SgwPoolCounter, ClientPins: m.SgwPinCounter,
		IKESPILabels: m.SgwIkeSpiCounter, ESPSPIRanges: m.SgwEspSpiCounter,
	} {
		c, err := newCounterMap(cm, t.String()+" counter")
		if err != nil {
			return err
		}
		r.counters[t] = c
	}
	sizes := map[string]int{bpfMapSgwClientPools: int(m.SgwClientPools.MaxEntries()), bpfMapSgwClientPins: int(m.SgwClientPins.MaxEntries())}
	r.index = map[DispatchTable]*dispatchIndex{}
	for t, n := range dispatchLimits(func(name string) int { return sizes[name] }) {
		// A slot must also exist in the table's counter map.
		r.index[t] = newDispatchIndex(t, min(n, int(r.counters[t].size())))
	}
	return nil
}

func (e *EBPF) raMapsByName() map[string]*ebpf.Map {
	m := &e.objs.bpfMaps
	return map[string]*ebpf.Map{
		bpfMapSgwRaSettings:      m.SgwRaSettings,
		bpfMapSgwClientPools:     m.SgwClientPools,
		bpfMapSgwClientPoolCount: m.SgwClientPoolCount,
		bpfMapSgwPoolCounter:     m.SgwPoolCounter,
		bpfMapSgwClientPins:      m.SgwClientPins,
		bpfMapSgwPinCounter:      m.SgwPinCounter,
		bpfMapSgwIkeSpiLabels:    m.SgwIkeSpiLabels,
		bpfMapSgwIkeSpiCounter:   m.SgwIkeSpiCounter,
		bpfMapSgwEspSpiRanges:    m.SgwEspSpiRanges,
		bpfMapSgwEspSpiCounter:   m.SgwEspSpiCounter,
	}
}

func (e *EBPF) SetRAConfig(cfg RAConfig) error {
	var v bpfSgwRaConfig
	if cfg.Configured {
		v = bpfSgwRaConfig{PublicIp: nativeU32(cfg.PublicIP), Configured: 1, PublicMac: cfg.PublicMAC}
	}
	return e.ra.settings.put(0, v)
}

func (e *EBPF) dispatchIndex(t DispatchTable) (*dispatchIndex, error) {
	x := e.ra.index[t]
	if x == nil {
		return nil, fmt.Errorf("%v: %w", t, ErrBadKey)
	}
	return x, nil
}

func (e *EBPF) gatewayValue(gw Gateway, slot uint16) bpfSgwGateway {
	return bpfSgwGateway{Ifindex: uint32(e.ifindex[gw.Port]), Port: gw.Port, Slot: slot, GatewayMac: gw.MAC}
}

func ipv4Key(v uint64) IPv4 {
	var ip IPv4
	binary.BigEndian.PutUint32(ip[:], uint32(v))
	return ip
}

func lpmKey(k DispatchKey) bpfSgwLpmV4 {
	return bpfSgwLpmV4{Prefixlen: uint32(k.PrefixLen), Addr: ipv4Key(k.Value)}
}

// SetDispatchEntry writes the entry to its map (a ternary table is rewritten whole, in
// lookup order); an insert zeroes the entry's counter slot first.
func (e *EBPF) SetDispatchEntry(t DispatchTable, k DispatchKey, gw Gateway) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, err := e.dispatchIndex(t)
	if err != nil {
		return err
	}
	var old Gateway
	if prev := x.entries[k]; prev != nil {
		old = prev.gw
	}
	ent, inserted, err := x.set(k, gw)
	if err != nil {
		return err
	}
	undo := func() {
		if inserted {
			x.undoInsert(ent)
		} else {
			ent.gw = old
		}
	}
	if inserted {
		if err := e.ra.counters[t].set(uint32(ent.slot), Counter{}); err != nil {
			undo()
			return err
		}
	}
	if err := e.writeDispatch(t, x, ent, inserted); err != nil {
		undo()
		return err
	}
	return nil
}

// writeDispatch puts one entry (or the whole ternary table) into the data plane.
func (e *EBPF) writeDispatch(t DispatchTable, x *dispatchIndex, ent *dispatchEntry, inserted bool) error {
	switch t {
	case ClientPools:
		if err := e.ra.pools.put(lpmKey(ent.key), e.gatewayValue(ent.gw, ent.slot)); err != nil {
			return err
		}
		if inserted {
			return e.ra.poolCount.put(0, uint32(len(x.entries)))
		}
		return nil
	case ClientPins:
		return e.ra.pins.put(ipv4Key(ent.key.Value), e.gatewayValue(ent.gw, ent.slot))
	}
	return e.writeTernary(t, x)
}

func (e *EBPF) writeTernary(t DispatchTable, x *dispatchIndex) error {
	var tbl bpfSgwTernaryTable
	for i, ent := range x.ordered() {
		tbl.Entries[i] = bpfSgwTernaryEntry{Value: ent.key.Value, Mask: ent.key.Mask, Gw: e.gatewayValue(ent.gw, ent.slot)}
		tbl.Count++
	}
	if t == IKESPILabels {
		return e.ra.ike.put(0, tbl)
	}
	return e.ra.esp.put(0, tbl)
}

func (e *EBPF) DeleteDispatchEntry(t DispatchTable, k DispatchKey) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, err := e.dispatchIndex(t)
	if err != nil {
		return err
	}
	ent, err := x.del(k)
	if err != nil {
		return err
	}
	switch t {
	case ClientPools:
		if err = e.ra.pools.del(lpmKey(k)); err == nil {
			err = e.ra.poolCount.put(0, uint32(len(x.entries)))
		}
	case ClientPins:
		err = e.ra.pins.del(ipv4Key(k.Value))
	default:
		err = e.writeTernary(t, x)
	}
	if err != nil {
		// Keep the index true to the data plane: the entry is still there.
		x.entries[k] = ent
		x.free = x.free[:len(x.free)-1]
		return err
	}
	return e.ra.counters[t].set(uint32(ent.slot), Counter{})
}

func (e *EBPF) DispatchCounter(t DispatchTable, k DispatchKey) (Counter, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, err := e.dispatchIndex(t)
	if err != nil {
		return Counter{}, err
	}
	ent, err := x.get(k)
	if err != nil {
		return Counter{}, err
	}
	return e.ra.counters[t].read(uint32(ent.slot))
}

func (e *EBPF) SetDispatchCounter(t DispatchTable, k DispatchKey, c Counter) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, err := e.dispatchIndex(t)
	if err != nil {
		return err
	}
	ent, err := x.get(k)
	if err != nil {
		return err
	}
	return e.ra.counters[t].set(uint32(ent.slot), c)
}
