package p4rt

import (
	"maps"
	"slices"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// readBatch is how many entities go into one streamed ReadResponse.
const readBatch = 500

// Read implements p4.v1.P4Runtime, with wildcards: table_id 0 reads every
// table, an entry without match reads every entry of its table, and so on for
// counters, multicast groups and digests.
func (s *Server) Read(req *p4v1.ReadRequest, stream p4v1.P4Runtime_ReadServer) error {
	if err := s.checkDevice(req.GetDeviceId()); err != nil {
		return err
	}
	if err := checkRole(req.GetRole(), 0); err != nil {
		return err
	}
	var out []*p4v1.Entity
	err := func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.config == nil {
			return errf(codes.FailedPrecondition, "no forwarding pipeline config set for this device")
		}
		for _, e := range req.GetEntities() {
			got, err := s.readEntity(e)
			if err != nil {
				return err
			}
			out = append(out, got...)
		}
		return nil
	}()
	if err != nil {
		return err
	}
	for len(out) > 0 {
		n := min(readBatch, len(out))
		if err := stream.Send(&p4v1.ReadResponse{Entities: out[:n]}); err != nil {
			return err
		}
		out = out[n:]
	}
	return nil
}

func (s *Server) readEntity(e *p4v1.Entity) ([]*p4v1.Entity, error) {
	switch x := e.GetEntity().(type) {
	case *p4v1.Entity_TableEntry:
		return s.readTableEntries(x.TableEntry)
	case *p4v1.Entity_CounterEntry:
		return s.readCounters(x.CounterEntry)
	case *p4v1.Entity_DirectCounterEntry:
		return s.readDirectCounters(x.DirectCounterEntry)
	case *p4v1.Entity_PacketReplicationEngineEntry:
		return s.readPRE(x.PacketReplicationEngineEntry)
	case *p4v1.Entity_DigestEntry:
		return s.readDigests(x.DigestEntry)
	case nil:
		return nil, errf(codes.InvalidArgument, "read request entity is empty")
	default:
		return nil, errf(codes.Unimplemented, "reading %T is not supported by this target", x)
	}
}

func tableEntity(te *p4v1.TableEntry) *p4v1.Entity {
	return &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: te}}
}

func (s *Server) readTableEntries(req *p4v1.TableEntry) ([]*p4v1.Entity, error) {
	tids := s.sch.tableIDs
	if req.GetTableId() != 0 {
		if _, err := s.table(req.GetTableId()); err != nil {
			return nil, err
		}
		tids = []uint32{req.GetTableId()}
	} else if len(req.GetMatch()) > 0 {
		return nil, errf(codes.InvalidArgument, "a read with table_id 0 cannot have match fields")
	}
	var out []*p4v1.Entity
	for _, tid := range tids {
		ti := s.sch.tables[tid]
		// As p4lang/PI (simple_switch_grpc): asking for time_since_last_hit
		// where no entry can age is an error, wildcard reads included.
		if req.GetIsDefaultAction() {
			if req.GetTimeSinceLastHit() != nil {
				return nil, errf(codes.InvalidArgument, "default entries do not age: do not set time_since_last_hit when reading the default entry of '%s'", ti.name())
			}
			out = append(out, tableEntity(s.defaultEntry(ti)))
			continue
		}
		if req.GetTimeSinceLastHit() != nil && !ti.notifyIdle {
			return nil, errf(codes.InvalidArgument, "table '%s' does not support idle timeout: do not set time_since_last_hit when reading it (wildcard reads included)", ti.name())
		}
		found, err := s.matching(tid, ti, req.GetMatch(), req.GetPriority())
		if err != nil {
			return nil, err
		}
		for _, se := range found {
			te := proto.Clone(se.te).(*p4v1.TableEntry)
			if req.GetCounterData() != nil && ti.directCounter != 0 {
				if te.CounterData, err = s.directCounterData(tid, ti, se.key); err != nil {
					return nil, err
				}
			}
			if req.GetTimeSinceLastHit() != nil {
				d, err := s.bind.idle(tid, se.key)
				if err != nil {
					return nil, dpError("read idle time of '"+ti.name()+"'", err)
				}
				te.TimeSinceLastHit = &p4v1.TableEntry_IdleTimeout{ElapsedNs: d.Nanoseconds()}
			}
			out = append(out, tableEntity(te))
		}
	}
	return out, nil
}

// matching returns the entries of table tid that match the (possibly partial)
// match, in the order of their canonical keys.
func (s *Server) matching(tid uint32, ti *tableInfo, match []*p4v1.FieldMatch, priority int32) ([]*storedEntry, error) {
	filter, err := s.canonicalMatch(ti, match, false)
	if err != nil {
		return nil, err
	}
	filter.priority = priority
	entries := s.tables[tid]
	var out []*storedEntry
	for _, ms := range slices.Sorted(maps.Keys(entries)) {
		if se := entries[ms]; matches(se.key, filter) {
			out = append(out, se)
		}
	}
	return out, nil
}

func (s *Server) directCounterData(tid uint32, ti *tableInfo, key entryKey) (*p4v1.CounterData, error) {
	c, err := s.bind.directCounter(tid, key)
	if err != nil {
		return nil, dpError("read direct counter of '"+ti.name()+"'", err)
	}
	return &p4v1.CounterData{PacketCount: int64(c.Packets), ByteCount: int64(c.Bytes)}, nil
}

// defaultEntry is the current default entry of a table.
func (s *Server) defaultEntry(ti *tableInfo) *p4v1.TableEntry {
	tid := ti.t.GetPreamble().GetId()
	te := &p4v1.TableEntry{TableId: tid, IsDefaultAction: true}
	if a := s.defaults[tid]; a != nil {
		te.Action = proto.Clone(a).(*p4v1.TableAction)
	} else if ti.initialDefault != nil {
		te.Action = proto.Clone(ti.initialDefault).(*p4v1.TableAction)
	}
	return te
}

func (s *Server) readCounters(req *p4v1.CounterEntry) ([]*p4v1.Entity, error) {
	ids := s.sch.counterIDs
	if req.GetCounterId() != 0 {
		if _, ok := s.sch.counters[req.GetCounterId()]; !ok {
			return nil, errf(codes.InvalidArgument, "counter id %#x is not in the P4Info", req.GetCounterId())
		}
		ids = []uint32{req.GetCounterId()}
	} else if req.GetIndex() != nil {
		return nil, errf(codes.InvalidArgument, "a counter read with counter_id 0 cannot have an index")
	}
	var out []*p4v1.Entity
	for _, id := range ids {
		c := s.sch.counters[id]
		idx, err := counterIndices(c, req.GetIndex())
		if err != nil {
			return nil, err
		}
		for _, i := range idx {
			v, err := s.bind.counter(id, i)
			if err != nil {
				return nil, dpError("read counter '"+c.GetPreamble().GetName()+"'", err)
			}
			out = append(out, &p4v1.Entity{Entity: &p4v1.Entity_CounterEntry{CounterEntry: &p4v1.CounterEntry{
				CounterId: id,
				Index:     &p4v1.Index{Index: i},
				Data:      &p4v1.CounterData{PacketCount: int64(v.Packets), ByteCount: int64(v.Bytes)},
			}}})
		}
	}
	return out, nil
}

func (s *Server) readDirectCounters(req *p4v1.DirectCounterEntry) ([]*p4v1.Entity, error) {
	te := req.GetTableEntry()
	var tids []uint32
	if te.GetTableId() == 0 {
		for _, tid := range s.sch.tableIDs {
			if s.sch.tables[tid].directCounter != 0 {
				tids = append(tids, tid)
			}
		}
	} else {
		ti, err := s.table(te.GetTableId())
		if err != nil {
			return nil, err
		}
		if ti.directCounter == 0 {
			return nil, errf(codes.InvalidArgument, "table '%s' has no direct counter", ti.name())
		}
		tids = []uint32{te.GetTableId()}
	}
	var out []*p4v1.Entity
	for _, tid := range tids {
		ti := s.sch.tables[tid]
		found, err := s.matching(tid, ti, te.GetMatch(), te.GetPriority())
		if err != nil {
			return nil, err
		}
		for _, se := range found {
			data, err := s.directCounterData(tid, ti, se.key)
			if err != nil {
				return nil, err
			}
			out = append(out, &p4v1.Entity{Entity: &p4v1.Entity_DirectCounterEntry{DirectCounterEntry: &p4v1.DirectCounterEntry{
				TableEntry: &p4v1.TableEntry{TableId: tid, Match: proto.Clone(se.te).(*p4v1.TableEntry).GetMatch(), Priority: se.key.priority},
				Data:       data,
			}}})
		}
	}
	return out, nil
}

func (s *Server) readPRE(req *p4v1.PacketReplicationEngineEntry) ([]*p4v1.Entity, error) {
	mg, ok := req.GetType().(*p4v1.PacketReplicationEngineEntry_MulticastGroupEntry)
	if !ok {
		return nil, errf(codes.Unimplemented, "reading %T is not supported: only multicast groups", req.GetType())
	}
	ids := slices.Sorted(maps.Keys(s.mcast))
	if id := mg.MulticastGroupEntry.GetMulticastGroupId(); id != 0 {
		ids = nil
		if s.mcast[id] != nil {
			ids = []uint32{id}
		}
	}
	var out []*p4v1.Entity
	for _, id := range ids {
		out = append(out, &p4v1.Entity{Entity: &p4v1.Entity_PacketReplicationEngineEntry{PacketReplicationEngineEntry: &p4v1.PacketReplicationEngineEntry{
			Type: &p4v1.PacketReplicationEngineEntry_MulticastGroupEntry{MulticastGroupEntry: proto.Clone(s.mcast[id]).(*p4v1.MulticastGroupEntry)},
		}}})
	}
	return out, nil
}

func (s *Server) readDigests(req *p4v1.DigestEntry) ([]*p4v1.Entity, error) {
	var ids []uint32
	if id := req.GetDigestId(); id != 0 {
		if _, ok := s.sch.digests[id]; !ok {
			return nil, errf(codes.InvalidArgument, "digest id %#x is not in the P4Info", id)
		}
		ids = []uint32{id}
	} else {
		ids = slices.Sorted(maps.Keys(s.sch.digests))
	}
	var out []*p4v1.Entity
	for _, id := range ids {
		if cfg := s.digests.config(id); cfg != nil {
			out = append(out, &p4v1.Entity{Entity: &p4v1.Entity_DigestEntry{DigestEntry: &p4v1.DigestEntry{DigestId: id, Config: cfg}}})
		}
	}
	return out, nil
}
