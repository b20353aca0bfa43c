package p4rt

import (
	"fmt"
	"slices"

	p4configv1 "github.com/p4lang/p4runtime/go/p4/config/v1"
	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"

	"supergw/targets/ebpf/internal/p4constants"
)

// schema indexes a P4Info by ID for request validation.
type schema struct {
	info           *p4configv1.P4Info
	tables         map[uint32]*tableInfo
	tableIDs       []uint32
	actions        map[uint32]*actionInfo
	counters       map[uint32]*p4configv1.Counter
	counterIDs     []uint32
	directCounters map[uint32]*p4configv1.DirectCounter
	digests        map[uint32]*p4configv1.Digest
	packetIn       *p4configv1.ControllerPacketMetadata
	packetOut      *p4configv1.ControllerPacketMetadata
}

type tableInfo struct {
	t              *p4configv1.Table
	fields         map[uint32]*p4configv1.MatchField
	scopes         map[uint32]p4configv1.ActionRef_Scope
	directCounter  uint32
	initialDefault *p4v1.TableAction
	notifyIdle     bool
}

type actionInfo struct {
	a      *p4configv1.Action
	params map[uint32]*p4configv1.Action_Param
}

func (t *tableInfo) name() string  { return t.t.GetPreamble().GetName() }
func (a *actionInfo) name() string { return a.a.GetPreamble().GetName() }

func newSchema(info *p4configv1.P4Info) (*schema, error) {
	s := &schema{
		info:           info,
		tables:         map[uint32]*tableInfo{},
		actions:        map[uint32]*actionInfo{},
		counters:       map[uint32]*p4configv1.Counter{},
		directCounters: map[uint32]*p4configv1.DirectCounter{},
		digests:        map[uint32]*p4configv1.Digest{},
	}
	for _, a := range info.GetActions() {
		ai := &actionInfo{a: a, params: map[uint32]*p4configv1.Action_Param{}}
		for _, p := range a.GetParams() {
			ai.params[p.GetId()] = p
		}
		s.actions[a.GetPreamble().GetId()] = ai
	}
	for _, dc := range info.GetDirectCounters() {
		s.directCounters[dc.GetPreamble().GetId()] = dc
	}
	for _, t := range info.GetTables() {
		ti := &tableInfo{
			t:          t,
			fields:     map[uint32]*p4configv1.MatchField{},
			scopes:     map[uint32]p4configv1.ActionRef_Scope{},
			notifyIdle: t.GetIdleTimeoutBehavior() == p4configv1.Table_NOTIFY_CONTROL,
		}
		for _, f := range t.GetMatchFields() {
			ti.fields[f.GetId()] = f
		}
		for _, r := range t.GetActionRefs() {
			if _, ok := s.actions[r.GetId()]; !ok {
				return nil, fmt.Errorf("table %q refers to unknown action id %#x", t.GetPreamble().GetName(), r.GetId())
			}
			ti.scopes[r.GetId()] = r.GetScope()
		}
		for _, id := range t.GetDirectResourceIds() {
			if _, ok := s.directCounters[id]; ok {
				ti.directCounter = id
			}
		}
		ti.initialDefault = s.initialDefault(ti)
		id := t.GetPreamble().GetId()
		s.tables[id] = ti
		s.tableIDs = append(s.tableIDs, id)
	}
	slices.Sort(s.tableIDs)
	for _, c := range info.GetCounters() {
		s.counters[c.GetPreamble().GetId()] = c
		s.counterIDs = append(s.counterIDs, c.GetPreamble().GetId())
	}
	slices.Sort(s.counterIDs)
	for _, d := range info.GetDigests() {
		s.digests[d.GetPreamble().GetId()] = d
	}
	for _, m := range info.GetControllerPacketMetadata() {
		switch m.GetPreamble().GetName() {
		case p4constants.CtrlHdrPacketIn:
			s.packetIn = m
		case p4constants.CtrlHdrPacketOut:
			s.packetOut = m
		}
	}
	return s, nil
}

// initialDefault derives the default action a table starts with. p4c does not
// always fill initial_default_action, so fall back to the const default, the
// only @defaultonly action, or NoAction.
func (s *schema) initialDefault(ti *tableInfo) *p4v1.TableAction {
	mk := func(id uint32, args []*p4v1.Action_Param) *p4v1.TableAction {
		return &p4v1.TableAction{Type: &p4v1.TableAction_Action{Action: &p4v1.Action{ActionId: id, Params: args}}}
	}
	if ida := ti.t.GetInitialDefaultAction(); ida != nil && ida.GetActionId() != 0 {
		var params []*p4v1.Action_Param
		for _, a := range ida.GetArguments() {
			params = append(params, &p4v1.Action_Param{ParamId: a.GetParamId(), Value: canonical(a.GetValue())})
		}
		return mk(ida.GetActionId(), params)
	}
	if id := ti.t.GetConstDefaultActionId(); id != 0 {
		return mk(id, nil)
	}
	var only []uint32
	for _, r := range ti.t.GetActionRefs() {
		if r.GetScope() == p4configv1.ActionRef_DEFAULT_ONLY {
			only = append(only, r.GetId())
		}
	}
	if len(only) == 1 && len(s.actions[only[0]].params) == 0 {
		return mk(only[0], nil)
	}
	for _, r := range ti.t.GetActionRefs() {
		if s.actions[r.GetId()].name() == "NoAction" {
			return mk(r.GetId(), nil)
		}
	}
	return nil
}

func (s *schema) tableByName(name string) (*tableInfo, error) {
	for _, t := range s.tables {
		if t.t.GetPreamble().GetName() == name || t.t.GetPreamble().GetAlias() == name {
			return t, nil
		}
	}
	return nil, fmt.Errorf("table %q not in P4Info", name)
}

func (s *schema) actionByName(name string) (*actionInfo, error) {
	for _, a := range s.actions {
		if a.a.GetPreamble().GetName() == name || a.a.GetPreamble().GetAlias() == name {
			return a, nil
		}
	}
	return nil, fmt.Errorf("action %q not in P4Info", name)
}

func (s *schema) directCounterByName(name string) (uint32, bool) {
	for id, dc := range s.directCounters {
		if dc.GetPreamble().GetName() == name || dc.GetPreamble().GetAlias() == name {
			return id, true
		}
	}
	return 0, false
}

func (t *tableInfo) fieldID(name string) (uint32, error) {
	for id, f := range t.fields {
		if f.GetName() == name {
			return id, nil
		}
	}
	return 0, fmt.Errorf("table %q has no match field %q", t.name(), name)
}

func (a *actionInfo) paramID(name string) (uint32, error) {
	for id, p := range a.params {
		if p.GetName() == name {
			return id, nil
		}
	}
	return 0, fmt.Errorf("action %q has no param %q", a.name(), name)
}

func metadataID(m *p4configv1.ControllerPacketMetadata, name string) (uint32, int32, error) {
	if m == nil {
		return 0, 0, fmt.Errorf("controller packet metadata for %q missing from P4Info", name)
	}
	for _, md := range m.GetMetadata() {
		if md.GetName() == name {
			return md.GetId(), md.GetBitwidth(), nil
		}
	}
	return 0, 0, fmt.Errorf("%s has no metadata %q", m.GetPreamble().GetName(), name)
}
