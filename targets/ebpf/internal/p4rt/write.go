package p4rt

import (
	"context"
	"errors"
	"fmt"
	"slices"

	p4configv1 "github.com/p4lang/p4runtime/go/p4/config/v1"
	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"supergw/targets/ebpf/internal/dataplane"
)

// storedEntry is one installed table entry in canonical form (match sorted by
// field id, values stripped of leading zeros, params sorted by id).
type storedEntry struct {
	key      entryKey
	te       *p4v1.TableEntry
	notified bool // idle timeout already reported for the current idle period
	dpKey    any  // the binding's data-plane key of the entry, once it computed it
}

func errf(c codes.Code, format string, args ...any) error {
	return status.Errorf(c, format, args...)
}

// Write implements p4.v1.P4Runtime with CONTINUE_ON_ERROR semantics: every
// update is tried; on any failure the RPC fails with UNKNOWN and one p4.v1.Error
// per update, in order.
func (s *Server) Write(_ context.Context, req *p4v1.WriteRequest) (*p4v1.WriteResponse, error) {
	if err := s.checkDevice(req.GetDeviceId()); err != nil {
		return nil, err
	}
	if err := checkRole(req.GetRole(), req.GetRoleId()); err != nil {
		return nil, err
	}
	if req.GetAtomicity() != p4v1.WriteRequest_CONTINUE_ON_ERROR {
		return nil, errf(codes.Unimplemented, "atomicity %v is not supported: only CONTINUE_ON_ERROR", req.GetAtomicity())
	}
	if !s.arb.mayWrite(req.GetElectionId()) {
		return nil, errf(codes.PermissionDenied, "not primary: the election id does not match the primary controller's")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.config == nil {
		return nil, errf(codes.FailedPrecondition, "no forwarding pipeline config set for this device")
	}
	results := make([]error, len(req.GetUpdates()))
	failed := 0
	for i, u := range req.GetUpdates() {
		results[i] = s.applyUpdate(u)
		if results[i] != nil {
			failed++
			s.log.Debug("write update failed", "index", i, "err", results[i])
		}
	}
	s.journalWrite(req.GetUpdates(), results)
	if failed == 0 {
		return &p4v1.WriteResponse{}, nil
	}
	st := &spb.Status{Code: int32(codes.Unknown), Message: fmt.Sprintf("%d of %d updates failed", failed, len(results))}
	for _, err := range results {
		e := &p4v1.Error{CanonicalCode: int32(codes.OK)}
		if err != nil {
			se := status.Convert(err)
			e.CanonicalCode, e.Message = int32(se.Code()), se.Message()
		}
		a, aerr := anypb.New(e)
		if aerr != nil {
			return nil, errf(codes.Internal, "encode error details: %v", aerr)
		}
		st.Details = append(st.Details, a)
	}
	return nil, status.FromProto(st).Err()
}

func (s *Server) applyUpdate(u *p4v1.Update) error {
	typ := u.GetType()
	if typ == p4v1.Update_UNSPECIFIED || typ > p4v1.Update_DELETE {
		return errf(codes.InvalidArgument, "update type %v is not INSERT, MODIFY or DELETE", typ)
	}
	switch e := u.GetEntity().GetEntity().(type) {
	case *p4v1.Entity_TableEntry:
		return s.writeTableEntry(typ, e.TableEntry)
	case *p4v1.Entity_CounterEntry:
		return s.writeCounter(typ, e.CounterEntry)
	case *p4v1.Entity_DirectCounterEntry:
		return s.writeDirectCounter(typ, e.DirectCounterEntry)
	case *p4v1.Entity_PacketReplicationEngineEntry:
		return s.writePRE(typ, e.PacketReplicationEngineEntry)
	case *p4v1.Entity_DigestEntry:
		return s.writeDigest(typ, e.DigestEntry)
	case nil:
		return errf(codes.InvalidArgument, "update has no entity")
	default:
		return errf(codes.Unimplemented, "entity %T is not supported by this target", e)
	}
}

func (s *Server) table(id uint32) (*tableInfo, error) {
	ti, ok := s.sch.tables[id]
	if !ok {
		return nil, errf(codes.InvalidArgument, "table id %#x is not in the P4Info", id)
	}
	return ti, nil
}

// canonicalAction validates a direct action for a table entry (isDefault
// selects the default-entry scope rules) and returns it in canonical form.
func (s *Server) canonicalAction(ti *tableInfo, ta *p4v1.TableAction, isDefault bool) (*p4v1.Action, error) {
	if ta == nil {
		return nil, errf(codes.InvalidArgument, "table '%s': entry has no action", ti.name())
	}
	a, ok := ta.GetType().(*p4v1.TableAction_Action)
	if !ok {
		return nil, errf(codes.InvalidArgument, "table '%s' has no action profile: use a direct action", ti.name())
	}
	id := a.Action.GetActionId()
	ai, ok := s.sch.actions[id]
	if !ok {
		return nil, errf(codes.InvalidArgument, "action id %#x is not in the P4Info", id)
	}
	scope, ok := ti.scopes[id]
	if !ok {
		return nil, errf(codes.InvalidArgument, "action '%s' is not an action of table '%s'", ai.name(), ti.name())
	}
	// The P4Runtime specification names no code for an action used against its scope;
	// p4lang/PI (simple_switch_grpc) answers PERMISSION_DENIED, and so do we.
	if scope == p4configv1.ActionRef_DEFAULT_ONLY && !isDefault {
		return nil, errf(codes.PermissionDenied, "action '%s' is @defaultonly in table '%s': it can only be the default action", ai.name(), ti.name())
	}
	if scope == p4configv1.ActionRef_TABLE_ONLY && isDefault {
		return nil, errf(codes.PermissionDenied, "action '%s' is @tableonly in table '%s': it cannot be the default action", ai.name(), ti.name())
	}
	out := &p4v1.Action{ActionId: id}
	seen := map[uint32]bool{}
	for _, p := range a.Action.GetParams() {
		pi, ok := ai.params[p.GetParamId()]
		if !ok {
			return nil, errf(codes.InvalidArgument, "action '%s' has no param id %d", ai.name(), p.GetParamId())
		}
		if seen[p.GetParamId()] {
			return nil, errf(codes.InvalidArgument, "action '%s': param '%s' given twice", ai.name(), pi.GetName())
		}
		seen[p.GetParamId()] = true
		if len(p.GetValue()) == 0 {
			return nil, errf(codes.InvalidArgument, "action '%s': param '%s' has an empty value", ai.name(), pi.GetName())
		}
		if !fits(p.GetValue(), pi.GetBitwidth()) {
			return nil, errf(codes.InvalidArgument, "action '%s': param '%s' value 0x%x does not fit in %d bits", ai.name(), pi.GetName(), p.GetValue(), pi.GetBitwidth())
		}
		out.Params = append(out.Params, &p4v1.Action_Param{ParamId: p.GetParamId(), Value: canonical(p.GetValue())})
	}
	for _, pi := range ai.a.GetParams() {
		if !seen[pi.GetId()] {
			return nil, errf(codes.InvalidArgument, "action '%s': param '%s' (id %d) is missing", ai.name(), pi.GetName(), pi.GetId())
		}
	}
	slices.SortFunc(out.Params, func(a, b *p4v1.Action_Param) int { return int(a.GetParamId()) - int(b.GetParamId()) })
	return out, nil
}

// dpError maps a data-plane error to its P4Runtime code: the data plane's
// sentinel errors are the caller's problem (a key it cannot hold), anything
// else is the switch's.
func dpError(what string, err error) error {
	switch {
	case errors.Is(err, errUnsupported):
		return errf(codes.Unimplemented, "%s: %v", what, err)
	case errors.Is(err, errBadValue), errors.Is(err, dataplane.ErrBadKey):
		return errf(codes.InvalidArgument, "%s: %v", what, err)
	case errors.Is(err, dataplane.ErrNotFound):
		return errf(codes.NotFound, "%s: %v", what, err)
	case errors.Is(err, dataplane.ErrCapacity):
		return errf(codes.ResourceExhausted, "%s: %v", what, err)
	case errors.Is(err, dataplane.ErrOutOfRange):
		return errf(codes.OutOfRange, "%s: %v", what, err)
	}
	return errf(codes.Internal, "%s: data plane: %v", what, err)
}

func (s *Server) writeTableEntry(typ p4v1.Update_Type, te *p4v1.TableEntry) error {
	ti, err := s.table(te.GetTableId())
	if err != nil {
		return err
	}
	if te.GetIsDefaultAction() {
		return s.writeDefault(typ, ti, te)
	}
	if len(ti.t.GetMatchFields()) == 0 {
		return errf(codes.InvalidArgument, "table '%s' is keyless: it only has a default entry (MODIFY with is_default_action)", ti.name())
	}
	if ti.needsPriority() && te.GetPriority() <= 0 {
		return errf(codes.InvalidArgument, "table '%s' has a ternary match field: priority must be > 0, got %d", ti.name(), te.GetPriority())
	}
	if !ti.needsPriority() && te.GetPriority() != 0 {
		return errf(codes.InvalidArgument, "table '%s' has only exact and lpm match fields: priority must be 0, got %d", ti.name(), te.GetPriority())
	}
	if te.GetMeterConfig() != nil || te.GetMeterCounterData() != nil {
		return errf(codes.InvalidArgument, "table '%s' has no direct meter", ti.name())
	}
	if te.GetCounterData() != nil && ti.directCounter == 0 && typ != p4v1.Update_DELETE {
		return errf(codes.InvalidArgument, "table '%s' has no direct counter: counter_data must be unset", ti.name())
	}
	if te.GetIdleTimeoutNs() < 0 {
		return errf(codes.InvalidArgument, "idle_timeout_ns must not be negative")
	}
	if te.GetIdleTimeoutNs() > 0 && !ti.notifyIdle {
		return errf(codes.InvalidArgument, "table '%s' does not support idle timeout", ti.name())
	}
	key, err := s.canonicalMatch(ti, te.GetMatch(), true)
	if err != nil {
		return err
	}
	key.priority = te.GetPriority()
	tid := te.GetTableId()
	ms := matchString(key)
	existing := s.tables[tid][ms]
	what := fmt.Sprintf("%v on table '%s'", typ, ti.name())
	switch typ {
	case p4v1.Update_INSERT, p4v1.Update_MODIFY:
		action, err := s.canonicalAction(ti, te.GetAction(), false)
		if err != nil {
			return err
		}
		if typ == p4v1.Update_INSERT && existing != nil {
			return errf(codes.AlreadyExists, "table '%s': an entry with this match already exists", ti.name())
		}
		if typ == p4v1.Update_MODIFY && existing == nil {
			return errf(codes.NotFound, "table '%s': no entry with this match", ti.name())
		}
		if typ == p4v1.Update_INSERT && ti.t.GetSize() > 0 && int64(len(s.tables[tid])) >= ti.t.GetSize() {
			return errf(codes.ResourceExhausted, "table '%s' is full (%d entries)", ti.name(), ti.t.GetSize())
		}
		if err := s.bind.setEntry(tid, key, action); err != nil {
			return dpError(what, err)
		}
		if ti.directCounter != 0 && (typ == p4v1.Update_INSERT || te.GetCounterData() != nil) {
			c := dataplane.Counter{Packets: uint64(te.GetCounterData().GetPacketCount()), Bytes: uint64(te.GetCounterData().GetByteCount())}
			if err := s.bind.setDirectCounter(tid, key, c); err != nil {
				return dpError(what+": direct counter", err)
			}
		}
		stored := &p4v1.TableEntry{
			TableId:            tid,
			Match:              fieldMatches(key),
			Priority:           key.priority,
			Action:             &p4v1.TableAction{Type: &p4v1.TableAction_Action{Action: action}},
			ControllerMetadata: te.GetControllerMetadata(),
			IdleTimeoutNs:      te.GetIdleTimeoutNs(),
			Metadata:           slices.Clone(te.GetMetadata()),
		}
		if s.tables[tid] == nil {
			s.tables[tid] = map[string]*storedEntry{}
		}
		s.tables[tid][ms] = &storedEntry{key: key, te: stored}
	case p4v1.Update_DELETE:
		if existing == nil {
			return errf(codes.NotFound, "table '%s': no entry with this match", ti.name())
		}
		if err := s.bind.deleteEntry(tid, key); err != nil && !errors.Is(err, dataplane.ErrNotFound) {
			return dpError(what, err)
		}
		delete(s.tables[tid], ms)
	}
	return nil
}

func (s *Server) writeDefault(typ p4v1.Update_Type, ti *tableInfo, te *p4v1.TableEntry) error {
	if typ != p4v1.Update_MODIFY {
		return errf(codes.InvalidArgument, "table '%s': the default entry cannot be inserted or deleted, only modified (MODIFY with is_default_action)", ti.name())
	}
	if len(te.GetMatch()) > 0 {
		return errf(codes.InvalidArgument, "table '%s': a default entry has no match fields", ti.name())
	}
	if te.GetPriority() != 0 || te.GetIdleTimeoutNs() != 0 {
		return errf(codes.InvalidArgument, "table '%s': a default entry has no priority and no idle timeout", ti.name())
	}
	if ti.t.GetConstDefaultActionId() != 0 {
		return errf(codes.PermissionDenied, "table '%s' has a const default action: it cannot be modified", ti.name())
	}
	tid := ti.t.GetPreamble().GetId()
	if te.GetAction() == nil {
		// Reset to the P4 program's initial default action.
		if init := ti.initialDefault; init != nil {
			if err := s.bind.setDefault(tid, init.GetAction(), true); err != nil {
				return dpError("reset default of '"+ti.name()+"'", err)
			}
		}
		delete(s.defaults, tid)
		return nil
	}
	action, err := s.canonicalAction(ti, te.GetAction(), true)
	if err != nil {
		return err
	}
	isInitial := ti.initialDefault != nil && proto.Equal(ti.initialDefault.GetAction(), action)
	if err := s.bind.setDefault(tid, action, isInitial); err != nil {
		return dpError(fmt.Sprintf("default action '%s' of table '%s'", s.sch.actions[action.GetActionId()].name(), ti.name()), err)
	}
	s.defaults[tid] = &p4v1.TableAction{Type: &p4v1.TableAction_Action{Action: action}}
	return nil
}

// counterIndices resolves an optional index to the list it designates.
func counterIndices(c *p4configv1.Counter, idx *p4v1.Index) ([]int64, error) {
	if idx == nil {
		out := make([]int64, c.GetSize())
		for i := range out {
			out[i] = int64(i)
		}
		return out, nil
	}
	if idx.GetIndex() < 0 || idx.GetIndex() >= c.GetSize() {
		return nil, errf(codes.OutOfRange, "counter '%s': index %d out of range [0, %d)", c.GetPreamble().GetName(), idx.GetIndex(), c.GetSize())
	}
	return []int64{idx.GetIndex()}, nil
}

func (s *Server) writeCounter(typ p4v1.Update_Type, ce *p4v1.CounterEntry) error {
	if typ != p4v1.Update_MODIFY {
		return errf(codes.InvalidArgument, "counter entries can only be modified")
	}
	c, ok := s.sch.counters[ce.GetCounterId()]
	if !ok {
		return errf(codes.InvalidArgument, "counter id %#x is not in the P4Info", ce.GetCounterId())
	}
	idx, err := counterIndices(c, ce.GetIndex())
	if err != nil {
		return err
	}
	v := dataplane.Counter{Packets: uint64(ce.GetData().GetPacketCount()), Bytes: uint64(ce.GetData().GetByteCount())}
	for _, i := range idx {
		if err := s.bind.setCounter(ce.GetCounterId(), i, v); err != nil {
			return dpError("counter '"+c.GetPreamble().GetName()+"'", err)
		}
	}
	return nil
}

func (s *Server) writeDirectCounter(typ p4v1.Update_Type, dce *p4v1.DirectCounterEntry) error {
	if typ != p4v1.Update_MODIFY {
		return errf(codes.InvalidArgument, "direct counter entries can only be modified")
	}
	te := dce.GetTableEntry()
	if te == nil {
		return errf(codes.InvalidArgument, "direct counter entry has no table_entry")
	}
	ti, err := s.table(te.GetTableId())
	if err != nil {
		return err
	}
	if ti.directCounter == 0 {
		return errf(codes.InvalidArgument, "table '%s' has no direct counter", ti.name())
	}
	if te.GetIsDefaultAction() {
		return errf(codes.Unimplemented, "table '%s': the default entry has no direct counter on this target", ti.name())
	}
	key, err := s.canonicalMatch(ti, te.GetMatch(), true)
	if err != nil {
		return err
	}
	key.priority = te.GetPriority()
	if s.tables[te.GetTableId()][matchString(key)] == nil {
		return errf(codes.NotFound, "table '%s': no entry with this match", ti.name())
	}
	v := dataplane.Counter{Packets: uint64(dce.GetData().GetPacketCount()), Bytes: uint64(dce.GetData().GetByteCount())}
	if err := s.bind.setDirectCounter(te.GetTableId(), key, v); err != nil {
		return dpError("direct counter of '"+ti.name()+"'", err)
	}
	return nil
}

func (s *Server) writePRE(typ p4v1.Update_Type, pre *p4v1.PacketReplicationEngineEntry) error {
	mg, ok := pre.GetType().(*p4v1.PacketReplicationEngineEntry_MulticastGroupEntry)
	if !ok {
		return errf(codes.Unimplemented, "packet replication entry %T is not supported: only multicast groups", pre.GetType())
	}
	g := mg.MulticastGroupEntry
	id := g.GetMulticastGroupId()
	if id == 0 || id > 0xffff {
		return errf(codes.InvalidArgument, "multicast group id %d out of range [1, 65535]", id)
	}
	existing := s.mcast[id]
	switch typ {
	case p4v1.Update_DELETE:
		if existing == nil {
			return errf(codes.NotFound, "multicast group %d does not exist", id)
		}
		if err := s.bind.setGroup(id, nil); err != nil {
			return dpError(fmt.Sprintf("delete multicast group %d", id), err)
		}
		delete(s.mcast, id)
		return nil
	case p4v1.Update_INSERT:
		if existing != nil {
			return errf(codes.AlreadyExists, "multicast group %d already exists", id)
		}
	case p4v1.Update_MODIFY:
		if existing == nil {
			return errf(codes.NotFound, "multicast group %d does not exist", id)
		}
	}
	known := s.dp.Ports()
	type rep struct {
		port     uint64
		instance uint32
	}
	seen := map[rep]bool{}
	var ports []uint16
	stored := &p4v1.MulticastGroupEntry{MulticastGroupId: id, Metadata: slices.Clone(g.GetMetadata())}
	for _, r := range g.GetReplicas() {
		var port uint64
		switch pk := r.GetPortKind().(type) {
		case *p4v1.Replica_EgressPort:
			port = uint64(pk.EgressPort)
		case *p4v1.Replica_Port:
			if len(pk.Port) == 0 || bitLen(pk.Port) > 16 {
				return errf(codes.InvalidArgument, "multicast group %d: replica port 0x%x is not a 16-bit port", id, pk.Port)
			}
			port = toUint(pk.Port)
		default:
			return errf(codes.InvalidArgument, "multicast group %d: replica without a port", id)
		}
		if port > 0xffff || !slices.Contains(known, uint16(port)) {
			return errf(codes.InvalidArgument, "multicast group %d: replica port %d is not a port of this switch (ports %v)", id, port, known)
		}
		k := rep{port, r.GetInstance()}
		if seen[k] {
			return errf(codes.InvalidArgument, "multicast group %d: replica (port %d, instance %d) given twice", id, port, r.GetInstance())
		}
		seen[k] = true
		if !slices.Contains(ports, uint16(port)) {
			ports = append(ports, uint16(port))
		}
		stored.Replicas = append(stored.Replicas, &p4v1.Replica{PortKind: &p4v1.Replica_Port{Port: fromUint(port)}, Instance: r.GetInstance()})
	}
	if err := s.bind.setGroup(id, ports); err != nil {
		return dpError(fmt.Sprintf("multicast group %d", id), err)
	}
	s.mcast[id] = stored
	return nil
}

func (s *Server) writeDigest(typ p4v1.Update_Type, de *p4v1.DigestEntry) error {
	d, ok := s.sch.digests[de.GetDigestId()]
	if !ok {
		return errf(codes.InvalidArgument, "digest id %#x is not in the P4Info", de.GetDigestId())
	}
	name := d.GetPreamble().GetName()
	configured := s.digests.config(de.GetDigestId()) != nil
	switch typ {
	case p4v1.Update_DELETE:
		if !configured {
			return errf(codes.NotFound, "digest '%s' is not configured", name)
		}
		s.digests.configure(de.GetDigestId(), nil)
		return nil
	case p4v1.Update_INSERT:
		if configured {
			return errf(codes.AlreadyExists, "digest '%s' is already configured (use MODIFY)", name)
		}
	case p4v1.Update_MODIFY:
		if !configured {
			return errf(codes.NotFound, "digest '%s' is not configured (use INSERT)", name)
		}
	}
	cfg := de.GetConfig()
	if cfg == nil {
		return errf(codes.InvalidArgument, "digest '%s': config is missing", name)
	}
	if cfg.GetMaxTimeoutNs() < 0 || cfg.GetMaxListSize() < 0 || cfg.GetAckTimeoutNs() < 0 {
		return errf(codes.InvalidArgument, "digest '%s': config values must not be negative", name)
	}
	s.digests.configure(de.GetDigestId(), proto.Clone(cfg).(*p4v1.DigestEntry_Config))
	return nil
}
