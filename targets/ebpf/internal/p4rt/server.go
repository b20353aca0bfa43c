// Package p4rt is the P4Runtime server of the eBPF target: a drop-in for
// simple_switch_grpc that serves only the supergw pipeline (P4Runtime v1.4).
package p4rt

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	p4configv1 "github.com/p4lang/p4runtime/go/p4/config/v1"
	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"supergw/targets/ebpf/internal/dataplane"
	"supergw/targets/ebpf/internal/pipeline"
)

// APIVersion is the P4Runtime version this server implements.
const APIVersion = "1.4.1"

// Config configures a Server.
type Config struct {
	DeviceID  uint64
	Dataplane dataplane.Dataplane
	Logger    *slog.Logger
	// P4Info overrides the embedded supergw P4Info (tests only).
	P4Info *p4configv1.P4Info
	// IdleScanInterval is how often idle timeouts are checked (default 100 ms).
	IdleScanInterval time.Duration
}

// Server implements p4.v1.P4Runtime for one device.
type Server struct {
	p4v1.UnimplementedP4RuntimeServer

	deviceID uint64
	dp       dataplane.Dataplane
	log      *slog.Logger
	p4info   *p4configv1.P4Info
	sch      *schema
	bind     *binding
	idleScan time.Duration
	arb      *arbiter

	// mu guards the pipeline and all forwarding state below.
	mu       sync.Mutex
	config   *p4v1.ForwardingPipelineConfig // committed; nil before the first commit
	saved    *p4v1.ForwardingPipelineConfig // VERIFY_AND_SAVE, waiting for COMMIT
	tables   map[uint32]map[string]*storedEntry
	defaults map[uint32]*p4v1.TableAction // only tables whose default was modified
	mcast    map[uint32]*p4v1.MulticastGroupEntry

	digests *digestEngine
	// idleNext: when each idle-timeout table is scanned next (idle.go); guarded by mu.
	idleNext map[uint32]time.Time
	journal *Journal // nil: the state lives in memory only
}

// New builds a server for the supergw pipeline on dp.
func New(cfg Config) (*Server, error) {
	info := cfg.P4Info
	if info == nil {
		var err error
		if info, err = pipeline.P4Info(); err != nil {
			return nil, err
		}
	}
	sch, err := newSchema(info)
	if err != nil {
		return nil, fmt.Errorf("index P4Info: %w", err)
	}
	b, err := newBinding(sch, cfg.Dataplane)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	scan := cfg.IdleScanInterval
	if scan <= 0 {
		scan = 100 * time.Millisecond
	}
	s := &Server{
		deviceID: cfg.DeviceID,
		dp:       cfg.Dataplane,
		log:      log,
		p4info:   info,
		sch:      sch,
		bind:     b,
		idleScan: scan,
		tables:   map[uint32]map[string]*storedEntry{},
		defaults: map[uint32]*p4v1.TableAction{},
		mcast:    map[uint32]*p4v1.MulticastGroupEntry{},
	}
	s.arb = newArbiter(cfg.DeviceID, log)
	s.digests = newDigestEngine(s.arb, log)
	return s, nil
}

// Run forwards data-plane events (packet-ins, digests) and drives digest and
// idle timers until ctx ends or the data plane closes its event channel.
func (s *Server) Run(ctx context.Context) {
	tick := time.NewTicker(s.idleScan)
	defer tick.Stop()
	events := s.dp.Events()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			s.handleEvent(ev)
		case now := <-tick.C:
			s.digests.tick(now)
			s.scanIdle(now)
		}
	}
}

func (s *Server) handleEvent(ev dataplane.Event) {
	switch ev.Kind {
	case dataplane.EventPacketIn:
		if !s.pipelineSet() {
			return
		}
		pi := s.bind.packetIn(ev)
		if !s.arb.sendPrimary(&p4v1.StreamMessageResponse{Update: &p4v1.StreamMessageResponse_Packet{Packet: pi}}) {
			s.log.Debug("packet-in dropped: no primary controller", "port", ev.IngressPort, "reason", ev.Reason)
		}
	case dataplane.EventDigest, dataplane.EventDigestIP6:
		id, data := s.bind.digestData(ev)
		s.digests.add(id, data, time.Now())
	default:
		s.log.Warn("unknown data-plane event", "kind", ev.Kind)
	}
}

func (s *Server) pipelineSet() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.config != nil
}

func (s *Server) checkDevice(id uint64) error {
	if id != s.deviceID {
		return status.Errorf(codes.NotFound, "device id %d unknown: this switch is device %d", id, s.deviceID)
	}
	return nil
}

func checkRole(role string, roleID uint64) error {
	if role != "" || roleID != 0 {
		return status.Errorf(codes.Unimplemented, "roles are not supported: use the default role")
	}
	return nil
}

// Capabilities implements p4.v1.P4Runtime.
func (s *Server) Capabilities(context.Context, *p4v1.CapabilitiesRequest) (*p4v1.CapabilitiesResponse, error) {
	return &p4v1.CapabilitiesResponse{P4RuntimeApiVersion: APIVersion}, nil
}

// verifyConfig checks that cfg carries the supergw P4Info.
func (s *Server) verifyConfig(cfg *p4v1.ForwardingPipelineConfig) error {
	if cfg == nil || cfg.GetP4Info() == nil {
		return status.Error(codes.InvalidArgument, "pipeline rejected: config.p4info is missing")
	}
	if d := diffP4Info(s.p4info, cfg.GetP4Info()); d != "" {
		return status.Errorf(codes.InvalidArgument, "pipeline rejected: %s; this target runs only the supergw pipeline", d)
	}
	return nil
}

// SetForwardingPipelineConfig implements p4.v1.P4Runtime. The pipeline is
// fixed; a config is accepted when its P4Info equals the embedded one.
func (s *Server) SetForwardingPipelineConfig(_ context.Context, req *p4v1.SetForwardingPipelineConfigRequest) (*p4v1.SetForwardingPipelineConfigResponse, error) {
	if err := s.checkDevice(req.GetDeviceId()); err != nil {
		return nil, err
	}
	if err := checkRole(req.GetRole(), req.GetRoleId()); err != nil {
		return nil, err
	}
	if !s.arb.mayWrite(req.GetElectionId()) {
		return nil, status.Error(codes.PermissionDenied, "not primary: only the primary controller may set the pipeline")
	}
	action := req.GetAction()
	if action != p4v1.SetForwardingPipelineConfigRequest_COMMIT {
		if err := s.verifyConfig(req.GetConfig()); err != nil {
			return nil, err
		}
	}
	cfg := proto.Clone(req.GetConfig()).(*p4v1.ForwardingPipelineConfig)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch action {
	case p4v1.SetForwardingPipelineConfigRequest_VERIFY:
	case p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_SAVE:
		s.saved = cfg
	case p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT:
		if err := s.resetLocked(); err != nil {
			return nil, status.Errorf(codes.Internal, "reset forwarding state: %v", err)
		}
		s.config, s.saved = cfg, nil
	case p4v1.SetForwardingPipelineConfigRequest_COMMIT:
		if s.saved == nil {
			return nil, status.Error(codes.FailedPrecondition, "COMMIT without a config saved by VERIFY_AND_SAVE")
		}
		if err := s.resetLocked(); err != nil {
			return nil, status.Errorf(codes.Internal, "reset forwarding state: %v", err)
		}
		s.config, s.saved = s.saved, nil
	case p4v1.SetForwardingPipelineConfigRequest_RECONCILE_AND_COMMIT:
		// Same pipeline, so every installed entry stays valid.
		if s.config == nil {
			if err := s.resetLocked(); err != nil {
				return nil, status.Errorf(codes.Internal, "reset forwarding state: %v", err)
			}
		}
		s.config, s.saved = cfg, nil
	default:
		return nil, status.Errorf(codes.InvalidArgument, "unknown SetForwardingPipelineConfig action %v", action)
	}
	if action != p4v1.SetForwardingPipelineConfigRequest_VERIFY && action != p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_SAVE {
		s.journalSnapshot()
	}
	s.log.Info("pipeline config", "action", action.String(), "cookie", cfg.GetCookie().GetCookie())
	return &p4v1.SetForwardingPipelineConfigResponse{}, nil
}

// GetForwardingPipelineConfig implements p4.v1.P4Runtime.
func (s *Server) GetForwardingPipelineConfig(_ context.Context, req *p4v1.GetForwardingPipelineConfigRequest) (*p4v1.GetForwardingPipelineConfigResponse, error) {
	if err := s.checkDevice(req.GetDeviceId()); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.config == nil {
		return nil, status.Error(codes.FailedPrecondition, "no forwarding pipeline config set for this device")
	}
	out := &p4v1.ForwardingPipelineConfig{Cookie: proto.Clone(s.config.GetCookie()).(*p4v1.ForwardingPipelineConfig_Cookie)}
	if s.config.GetCookie() == nil {
		out.Cookie = nil
	}
	rt := req.GetResponseType()
	if rt == p4v1.GetForwardingPipelineConfigRequest_ALL || rt == p4v1.GetForwardingPipelineConfigRequest_P4INFO_AND_COOKIE {
		out.P4Info = proto.Clone(s.config.GetP4Info()).(*p4configv1.P4Info)
	}
	if rt == p4v1.GetForwardingPipelineConfigRequest_ALL || rt == p4v1.GetForwardingPipelineConfigRequest_DEVICE_CONFIG_AND_COOKIE {
		out.P4DeviceConfig = append([]byte(nil), s.config.GetP4DeviceConfig()...)
	}
	return &p4v1.GetForwardingPipelineConfigResponse{Config: out}, nil
}

// defaultEntries are the tables whose default action was modified, as entries.
func (s *Server) defaultEntries() []*p4v1.TableEntry {
	out := make([]*p4v1.TableEntry, 0, len(s.defaults))
	for tid, ta := range s.defaults {
		out = append(out, &p4v1.TableEntry{TableId: tid, IsDefaultAction: true, Action: proto.Clone(ta).(*p4v1.TableAction)})
	}
	return out
}

// resetLocked returns the forwarding state to that of a freshly loaded
// pipeline: no entries, initial defaults, no groups, zero counters, no digests.
func (s *Server) resetLocked() error {
	for tid, entries := range s.tables {
		for _, e := range entries {
			if err := s.bind.deleteEntry(tid, e.key); err != nil {
				return fmt.Errorf("delete entry of table %#x: %w", tid, err)
			}
		}
	}
	s.tables = map[uint32]map[string]*storedEntry{}
	for tid := range s.defaults {
		if init := s.sch.tables[tid].initialDefault; init != nil {
			if err := s.bind.setDefault(tid, init.GetAction(), true); err != nil {
				return fmt.Errorf("reset default of table %#x: %w", tid, err)
			}
		}
	}
	s.defaults = map[uint32]*p4v1.TableAction{}
	for _, tid := range []uint32{s.bind.settings, s.bind.raSettings} {
		if init := s.sch.tables[tid].initialDefault; init != nil {
			if err := s.bind.setDefault(tid, init.GetAction(), true); err != nil {
				return fmt.Errorf("reset default of table %#x: %w", tid, err)
			}
		}
	}
	for id := range s.mcast {
		if err := s.bind.setGroup(id, nil); err != nil {
			return fmt.Errorf("delete multicast group %d: %w", id, err)
		}
	}
	s.mcast = map[uint32]*p4v1.MulticastGroupEntry{}
	for _, id := range s.sch.counterIDs {
		for i := int64(0); i < s.sch.counters[id].GetSize(); i++ {
			if err := s.bind.setCounter(id, i, dataplane.Counter{}); err != nil {
				return fmt.Errorf("reset counter %s[%d]: %w", s.sch.counters[id].GetPreamble().GetName(), i, err)
			}
		}
	}
	s.digests.reset()
	return nil
}
