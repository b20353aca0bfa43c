package sim

import (
	"net/netip"
	"sort"
	"sync"
)

type flowKey struct {
	src, dst  netip.Addr
	run, flow uint16
}

// rxFlow is what the receiver knows of one flow of one run.
type rxFlow struct {
	received, lost, reordered, duplicates uint64
	next                                  uint32 // the sequence number expected next
	latMin, latMax, latSum                uint64 // ns
	firstArrival, lastArrival, maxGap     uint64 // ns
	// holes holds the sequence numbers of the holes still open, so a late packet is counted as
	// reordered (and closes its hole) rather than as new, and a repeat as a duplicate.
	holes map[uint32]struct{}
}

// The receiver keeps at most this many open holes per flow; older holes are forgotten (they stay lost).
const maxHoles = 4096

type receiver struct {
	mu    sync.Mutex
	flows map[flowKey]*rxFlow
}

func newReceiver() *receiver { return &receiver{flows: map[flowKey]*rxFlow{}} }

func (r *receiver) record(src, dst netip.Addr, p Probe, now uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := flowKey{src, dst, p.Run, p.Flow}
	f := r.flows[k]
	if f == nil {
		f = &rxFlow{latMin: ^uint64(0)}
		r.flows[k] = f
	}
	switch {
	case p.Seq >= f.next:
		for s := f.next; s < p.Seq && len(f.holes) < maxHoles; s++ {
			if f.holes == nil {
				f.holes = map[uint32]struct{}{}
			}
			f.holes[s] = struct{}{}
		}
		f.lost += uint64(p.Seq - f.next)
		f.next = p.Seq + 1
	default: // an old sequence number: a late packet filling a hole, or a duplicate
		if _, open := f.holes[p.Seq]; open {
			delete(f.holes, p.Seq)
			f.lost--
			f.reordered++
		} else {
			f.duplicates++
		}
	}
	f.received++
	if now > p.TS {
		lat := now - p.TS
		f.latSum += lat
		f.latMin = min(f.latMin, lat)
		f.latMax = max(f.latMax, lat)
	} else {
		f.latMin = 0
	}
	if f.firstArrival == 0 {
		f.firstArrival = now
	}
	if f.lastArrival != 0 && now > f.lastArrival {
		f.maxGap = max(f.maxGap, now-f.lastArrival)
	}
	f.lastArrival = now
}

// RxFlowStats is one flow as the receiver saw it (JSON field names are the control API's).
// MaxGapMs is the longest interval between two arrivals: it cannot see a flow that stopped
// arriving for good (nothing arrives to close that gap); FirstArrivalNs and LastArrivalNs, set
// against the sender's first_sent_ns and last_sent_ns, show the head and the tail
// (bench/gaps.py `hostsim_flows`).
type RxFlowStats struct {
	Src        string    `json:"src"`
	Dst        string    `json:"dst"`
	Flow       uint16    `json:"flow"`
	Run        uint16    `json:"run"`
	Received   uint64    `json:"received"`
	Lost       uint64    `json:"lost"`
	Reordered  uint64    `json:"reordered"`
	Duplicates uint64    `json:"duplicates"`
	Latency    LatencyUs `json:"latency_us"`
	MaxGapMs   float64   `json:"max_gap_ms"`
	LastSeq    int64     `json:"last_seq"`
	// CLOCK_MONOTONIC arrival times of the flow's first and last frame (ns)
	FirstArrivalNs uint64 `json:"first_arrival_ns"`
	LastArrivalNs  uint64 `json:"last_arrival_ns"`
	latSum         uint64
}

// LatencyUs is one-way latency in microseconds.
type LatencyUs struct {
	Min float64 `json:"min"`
	Avg float64 `json:"avg"`
	Max float64 `json:"max"`
}

func (r *receiver) snapshot() []RxFlowStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]RxFlowStats, 0, len(r.flows))
	for k, f := range r.flows {
		st := RxFlowStats{Src: k.src.String(), Dst: k.dst.String(), Flow: k.flow, Run: k.run, Received: f.received,
			Lost: f.lost, Reordered: f.reordered, Duplicates: f.duplicates, MaxGapMs: float64(f.maxGap) / 1e6,
			LastSeq: int64(f.next) - 1, FirstArrivalNs: f.firstArrival, LastArrivalNs: f.lastArrival, latSum: f.latSum}
		if f.received > 0 {
			st.Latency = LatencyUs{Min: float64(f.latMin) / 1e3, Avg: float64(f.latSum) / float64(f.received) / 1e3,
				Max: float64(f.latMax) / 1e3}
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Run != b.Run {
			return a.Run < b.Run
		}
		if a.Flow != b.Flow {
			return a.Flow < b.Flow
		}
		return a.Src < b.Src
	})
	return out
}

func (r *receiver) reset() {
	r.mu.Lock()
	r.flows = map[flowKey]*rxFlow{}
	r.mu.Unlock()
}
