package p4rt

import (
	"log/slog"
	"sync"
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/protobuf/proto"
)

// digestEngine batches digest data into DigestLists (P4Runtime spec, "Digest
// messages"): a list goes out when it holds max_list_size entries or its
// oldest entry is max_timeout_ns old (a timer armed by that entry, so a
// batching controller waits max_timeout_ns for a lone host, not the idle
// scan's tick); data already pending or sent and not yet acked (or timed out
// after ack_timeout_ns) is suppressed.
type digestEngine struct {
	arb *arbiter
	log *slog.Logger

	mu     sync.Mutex
	states map[uint32]*digestState
	nextID uint64
}

// configs returns every configured digest's config (a copy).
func (d *digestEngine) configs() map[uint32]*p4v1.DigestEntry_Config {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[uint32]*p4v1.DigestEntry_Config{}
	for id, st := range d.states {
		if st.cfg != nil {
			out[id] = proto.Clone(st.cfg).(*p4v1.DigestEntry_Config)
		}
	}
	return out
}

type digestState struct {
	cfg         *p4v1.DigestEntry_Config
	pending     []*p4v1.P4Data
	pendingKeys []string
	first       time.Time
	suppressed  map[string]bool
	outstanding map[uint64]*sentList
}

type sentList struct {
	keys   []string
	sentAt time.Time
}

func newDigestEngine(arb *arbiter, log *slog.Logger) *digestEngine {
	return &digestEngine{arb: arb, log: log, states: map[uint32]*digestState{}}
}

func (d *digestEngine) config(id uint32) *p4v1.DigestEntry_Config {
	d.mu.Lock()
	defer d.mu.Unlock()
	if st := d.states[id]; st != nil {
		return proto.Clone(st.cfg).(*p4v1.DigestEntry_Config)
	}
	return nil
}

// configure sets (or with nil removes) a digest's config. Pending data
// survives a MODIFY and is dropped by a DELETE.
func (d *digestEngine) configure(id uint32, cfg *p4v1.DigestEntry_Config) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if cfg == nil {
		delete(d.states, id)
		return
	}
	if st := d.states[id]; st != nil {
		st.cfg = cfg
		return
	}
	d.states[id] = &digestState{cfg: cfg, suppressed: map[string]bool{}, outstanding: map[uint64]*sentList{}}
}

func (d *digestEngine) reset() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.states = map[uint32]*digestState{}
}

// add queues one digest; digests that are not configured are dropped.
func (d *digestEngine) add(id uint32, data *p4v1.P4Data, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.states[id]
	if st == nil {
		return
	}
	raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(data)
	if err != nil {
		d.log.Warn("encode digest", "err", err)
		return
	}
	key := string(raw)
	if st.suppressed[key] {
		return
	}
	st.suppressed[key] = true
	if len(st.pending) == 0 {
		st.first = now
		if timeout := time.Duration(st.cfg.GetMaxTimeoutNs()); timeout > 0 {
			d.flushAfter(id, timeout)
		}
	}
	st.pending = append(st.pending, data)
	st.pendingKeys = append(st.pendingKeys, key)
	if st.cfg.GetMaxTimeoutNs() == 0 || (st.cfg.GetMaxListSize() > 0 && len(st.pending) >= int(st.cfg.GetMaxListSize())) {
		d.flush(id, st, now)
	}
}

// flushAfter sends digest id's pending list once its oldest entry is
// max_timeout_ns old. A list flushed earlier (full) leaves the timer nothing
// to do, or a younger list, for which it waits again.
func (d *digestEngine) flushAfter(id uint32, after time.Duration) {
	time.AfterFunc(after, func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		st := d.states[id]
		if st == nil || len(st.pending) == 0 {
			return
		}
		now := time.Now()
		if due := st.first.Add(time.Duration(st.cfg.GetMaxTimeoutNs())); now.Before(due) {
			d.flushAfter(id, due.Sub(now))
			return
		}
		d.flush(id, st, now)
	})
}

func (d *digestEngine) flush(id uint32, st *digestState, now time.Time) {
	for len(st.pending) > 0 {
		n := len(st.pending)
		if m := int(st.cfg.GetMaxListSize()); m > 0 && n > m {
			n = m
		}
		d.nextID++
		list := &p4v1.DigestList{DigestId: id, ListId: d.nextID, Data: st.pending[:n], Timestamp: now.UnixNano()}
		keys := st.pendingKeys[:n]
		st.pending, st.pendingKeys = st.pending[n:], st.pendingKeys[n:]
		if st.cfg.GetAckTimeoutNs() > 0 {
			st.outstanding[list.ListId] = &sentList{keys: keys, sentAt: now}
		} else {
			for _, k := range keys {
				delete(st.suppressed, k)
			}
		}
		if !d.arb.sendPrimary(&p4v1.StreamMessageResponse{Update: &p4v1.StreamMessageResponse_Digest{Digest: list}}) {
			d.log.Debug("digest list dropped: no primary controller", "list_id", list.ListId)
		}
	}
}

// tick flushes lists whose oldest entry reached max_timeout_ns and forgets
// lists whose ack did not come within ack_timeout_ns.
func (d *digestEngine) tick(now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for id, st := range d.states {
		if len(st.pending) > 0 && now.Sub(st.first) >= time.Duration(st.cfg.GetMaxTimeoutNs()) {
			d.flush(id, st, now)
		}
		for lid, l := range st.outstanding {
			if now.Sub(l.sentAt) >= time.Duration(st.cfg.GetAckTimeoutNs()) {
				d.release(st, lid)
			}
		}
	}
}

func (d *digestEngine) release(st *digestState, listID uint64) {
	l := st.outstanding[listID]
	if l == nil {
		return
	}
	for _, k := range l.keys {
		delete(st.suppressed, k)
	}
	delete(st.outstanding, listID)
}

// ack releases the data of an acked list so it can be reported again.
func (d *digestEngine) ack(id uint32, listID uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if st := d.states[id]; st != nil {
		d.release(st, listID)
	}
}
