package p4rt

import (
	"maps"
	"slices"
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/protobuf/proto"
)

// scanIdle reports, once per idle period, every entry of an idle-timeout
// table that has not been hit for its idle_timeout_ns.
func (s *Server) scanIdle(now time.Time) {
	s.mu.Lock()
	var expired []*p4v1.TableEntry
	for _, tid := range s.sch.tableIDs {
		ti := s.sch.tables[tid]
		if !ti.notifyIdle {
			continue
		}
		entries := s.tables[tid]
		for _, ms := range slices.Sorted(maps.Keys(entries)) {
			se := entries[ms]
			timeout := se.te.GetIdleTimeoutNs()
			if timeout <= 0 {
				continue
			}
			idle, err := s.bind.idle(tid, se.key)
			if err != nil {
				s.log.Debug("idle time", "table", ti.name(), "err", err)
				continue
			}
			if idle.Nanoseconds() < timeout {
				se.notified = false
				continue
			}
			if se.notified {
				continue
			}
			se.notified = true
			te := proto.Clone(se.te).(*p4v1.TableEntry)
			te.TimeSinceLastHit = &p4v1.TableEntry_IdleTimeout{ElapsedNs: idle.Nanoseconds()}
			expired = append(expired, te)
		}
	}
	s.mu.Unlock()
	if len(expired) == 0 {
		return
	}
	msg := &p4v1.StreamMessageResponse{Update: &p4v1.StreamMessageResponse_IdleTimeoutNotification{
		IdleTimeoutNotification: &p4v1.IdleTimeoutNotification{TableEntry: expired, Timestamp: now.UnixNano()},
	}}
	if !s.arb.sendPrimary(msg) {
		s.log.Debug("idle timeout notification dropped: no primary controller", "entries", len(expired))
	}
}
