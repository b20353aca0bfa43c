package p4rt

import (
	"log/slog"
	"sync"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/genproto/googleapis/rpc/code"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

type u128 struct{ high, low uint64 }

func (a u128) less(b u128) bool { return a.high < b.high || (a.high == b.high && a.low < b.low) }

func toU128(e *p4v1.Uint128) u128 { return u128{e.GetHigh(), e.GetLow()} }

// conn is one StreamChannel. Messages to the client go through out, drained
// by the stream's single sender goroutine.
type conn struct {
	out         chan *p4v1.StreamMessageResponse
	registered  bool
	hasElection bool
	election    u128
}

const streamQueue = 4096

func newConn() *conn { return &conn{out: make(chan *p4v1.StreamMessageResponse, streamQueue)} }

// arbiter elects the primary controller: the connected stream with the
// highest election id (p4lang/PI semantics: when the primary goes away the
// next-highest takes over and every stream is told).
type arbiter struct {
	deviceID uint64
	log      *slog.Logger

	mu      sync.Mutex
	conns   map[*conn]struct{}
	primary *conn
	highest u128 // highest election id ever seen
	seen    bool
}

func newArbiter(deviceID uint64, log *slog.Logger) *arbiter {
	return &arbiter{deviceID: deviceID, log: log, conns: map[*conn]struct{}{}}
}

// update registers c or changes its election id, then notifies: everybody when
// the primary changed, only c otherwise.
func (a *arbiter) update(c *conn, e *p4v1.Uint128) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	has, id := e != nil, toU128(e)
	if has {
		for o := range a.conns {
			if o != c && o.hasElection && o.election == id {
				return status.Errorf(codes.InvalidArgument, "election id {high: %d, low: %d} is already used by another controller", id.high, id.low)
			}
		}
	}
	if c.registered && c.hasElection == has && c.election == id {
		a.notify(c)
		return nil
	}
	c.registered, c.hasElection, c.election = true, has, id
	a.conns[c] = struct{}{}
	if has && (!a.seen || a.highest.less(id)) {
		a.highest, a.seen = id, true
	}
	// The primary's election id is in every update, so a change of the
	// primary or of its id is news for every stream.
	if a.elect() || c == a.primary {
		a.notifyAll()
	} else {
		a.notify(c)
	}
	return nil
}

// remove forgets c (its stream ended).
func (a *arbiter) remove(c *conn) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.conns[c]; !ok {
		return
	}
	delete(a.conns, c)
	if a.elect() {
		a.notifyAll()
	}
}

// elect recomputes the primary and reports whether it changed.
func (a *arbiter) elect() bool {
	var best *conn
	for c := range a.conns {
		if c.hasElection && (best == nil || best.election.less(c.election)) {
			best = c
		}
	}
	changed := best != a.primary
	if changed {
		a.log.Info("primary changed", "has_primary", best != nil)
	}
	a.primary = best
	return changed
}

func (a *arbiter) notifyAll() {
	for c := range a.conns {
		a.notify(c)
	}
}

func (a *arbiter) notify(c *conn) {
	upd := &p4v1.MasterArbitrationUpdate{DeviceId: a.deviceID}
	switch {
	case a.primary != nil:
		upd.ElectionId = &p4v1.Uint128{High: a.primary.election.high, Low: a.primary.election.low}
	case a.seen:
		upd.ElectionId = &p4v1.Uint128{High: a.highest.high, Low: a.highest.low}
	}
	switch {
	case c == a.primary:
		upd.Status = &spb.Status{Code: int32(code.Code_OK), Message: "is primary"}
	case a.primary != nil:
		upd.Status = &spb.Status{Code: int32(code.Code_ALREADY_EXISTS), Message: "is backup: a controller with a higher election id is primary"}
	default:
		upd.Status = &spb.Status{Code: int32(code.Code_NOT_FOUND), Message: "is backup: there is no primary"}
	}
	send(c, &p4v1.StreamMessageResponse{Update: &p4v1.StreamMessageResponse_Arbitration{Arbitration: upd}})
}

// send queues m for c without blocking; a client that does not read its
// stream loses messages rather than stalling the switch.
func send(c *conn, m *p4v1.StreamMessageResponse) bool {
	select {
	case c.out <- m:
		return true
	default:
		return false
	}
}

func (a *arbiter) isPrimary(c *conn) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return c == a.primary && c != nil
}

// mayWrite reports whether a Write/SetForwardingPipelineConfig carrying
// election id e is from the primary. Like simple_switch_grpc, a request
// without election id is accepted while no stream is open (handy for
// debugging clients); one with an election id needs a matching primary.
func (a *arbiter) mayWrite(e *p4v1.Uint128) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.conns) == 0 {
		return e == nil
	}
	return e != nil && a.primary != nil && a.primary.election == toU128(e)
}

// sendPrimary queues m for the primary; false when there is none or its
// queue is full.
func (a *arbiter) sendPrimary(m *p4v1.StreamMessageResponse) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.primary == nil {
		return false
	}
	return send(a.primary, m)
}
