package p4rt

// journal.go keeps the server's P4Runtime state on disk, so that a new supergw-switch that
// adopts the running data plane of its predecessor (dataplane.Open) serves the same pipeline,
// cookie and entries: the controller's session reconnects, sees its cookie, pushes nothing
// and its reconcile finds what it wrote (docs: targets/ebpf/README.md, "Restart without
// loss").
//
// One file of records, each a kind byte, a 4-byte big-endian length and a protobuf: a
// snapshot ('S', a WriteRequest whose first update is not used: the config travels as
// kindConfig first) and then every accepted Write's updates ('W'). Counter values are not
// journaled: they live in the maps. Appends are plain write(2) calls (the page cache
// survives a crash of the process; a crash of the machine takes the pinned maps with it).
// The file is rewritten as a snapshot at every pipeline commit and when it has grown past
// compactBytes.

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/protobuf/proto"
)

const (
	kindConfig   byte = 'C'
	kindUpdates  byte = 'W'
	compactBytes      = 8 << 20
	journalName       = "p4runtime.journal"
	maxRecord         = 256 << 20
)

// Journal is the server's state file in its state directory.
type Journal struct {
	path string
	f    *os.File
	size int64
}

// OpenJournal opens (creating) the journal in dir, keeping what it holds for Replay.
func OpenJournal(dir string) (*Journal, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	path := filepath.Join(dir, journalName)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("journal: %w", err)
	}
	return &Journal{path: path, f: f, size: st.Size()}, nil
}

// Path is the journal's file.
func (j *Journal) Path() string { return j.path }

// Close closes the file (keeping it).
func (j *Journal) Close() error { return j.f.Close() }

// Remove closes and deletes the file (a switch that tears its data plane down).
func (j *Journal) Remove() error {
	j.f.Close()
	if err := os.Remove(j.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

func record(kind byte, m proto.Message) ([]byte, error) {
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 5, 5+len(b))
	out[0] = kind
	binary.BigEndian.PutUint32(out[1:], uint32(len(b)))
	return append(out, b...), nil
}

func (j *Journal) append(kind byte, m proto.Message) error {
	rec, err := record(kind, m)
	if err != nil {
		return fmt.Errorf("journal: encode: %w", err)
	}
	n, err := j.f.Write(rec)
	j.size += int64(n)
	if err != nil {
		return fmt.Errorf("journal: append: %w", err)
	}
	return nil
}

// Updates records the updates of one accepted Write.
func (j *Journal) Updates(updates []*p4v1.Update) error {
	if len(updates) == 0 {
		return nil
	}
	return j.append(kindUpdates, &p4v1.WriteRequest{Updates: updates})
}

// NeedsCompaction says the file has grown enough to be rewritten as a snapshot.
func (j *Journal) NeedsCompaction() bool { return j.size > compactBytes }

// Snapshot replaces the file with the config and the state as updates (written to a new
// file that is renamed over the old one, so a crash leaves one or the other).
func (j *Journal) Snapshot(cfg *p4v1.ForwardingPipelineConfig, state []*p4v1.Update) error {
	tmp := j.path + ".new"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("journal snapshot: %w", err)
	}
	next := &Journal{path: j.path, f: f}
	err = errors.Join(next.append(kindConfig, cfg), next.Updates(state))
	if err == nil {
		err = os.Rename(tmp, j.path)
	}
	if err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("journal snapshot: %w", err)
	}
	j.f.Close()
	j.f, j.size = f, next.size
	return nil
}

// Replayed is what a journal held: the last committed config and every update after it.
type Replayed struct {
	Config  *p4v1.ForwardingPipelineConfig
	Updates []*p4v1.Update
	// Torn is set when the file ended inside a record (a crash while appending): the
	// records before it are replayed.
	Torn bool
}

// Read returns what the journal holds (Config nil: nothing usable).
func (j *Journal) Read() (*Replayed, error) {
	f, err := os.Open(j.path)
	if err != nil {
		return nil, fmt.Errorf("read journal: %w", err)
	}
	defer f.Close()
	r := bufio.NewReader(f)
	out := &Replayed{}
	for {
		var hdr [5]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			out.Torn = true
			return out, nil
		}
		n := binary.BigEndian.Uint32(hdr[1:])
		if n > maxRecord {
			return nil, fmt.Errorf("read journal %s: a record of %d bytes: not a journal of this switch", j.path, n)
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(r, body); err != nil {
			out.Torn = true
			return out, nil
		}
		switch hdr[0] {
		case kindConfig:
			cfg := &p4v1.ForwardingPipelineConfig{}
			if err := proto.Unmarshal(body, cfg); err != nil {
				return nil, fmt.Errorf("read journal %s: config record: %w", j.path, err)
			}
			out.Config, out.Updates = cfg, nil
		case kindUpdates:
			w := &p4v1.WriteRequest{}
			if err := proto.Unmarshal(body, w); err != nil {
				return nil, fmt.Errorf("read journal %s: update record: %w", j.path, err)
			}
			out.Updates = append(out.Updates, w.GetUpdates()...)
		default:
			return nil, fmt.Errorf("read journal %s: record kind %q: not a journal of this switch", j.path, hdr[0])
		}
	}
}

// stateUpdates is the server's state as the updates that recreate it. Hold s.mu.
func (s *Server) stateUpdates() []*p4v1.Update {
	var out []*p4v1.Update
	ins := func(e *p4v1.Entity) { out = append(out, &p4v1.Update{Type: p4v1.Update_INSERT, Entity: e}) }
	tids := make([]uint32, 0, len(s.tables))
	for tid := range s.tables {
		tids = append(tids, tid)
	}
	sort.Slice(tids, func(a, b int) bool { return tids[a] < tids[b] })
	for _, tid := range tids {
		for _, e := range s.tables[tid] {
			te := proto.Clone(e.te).(*p4v1.TableEntry)
			te.CounterData, te.TimeSinceLastHit = nil, nil
			ins(&p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: te}})
		}
	}
	for _, te := range s.defaultEntries() {
		out = append(out, &p4v1.Update{Type: p4v1.Update_MODIFY, Entity: &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: te}}})
	}
	for _, g := range s.mcast {
		ins(&p4v1.Entity{Entity: &p4v1.Entity_PacketReplicationEngineEntry{PacketReplicationEngineEntry: &p4v1.PacketReplicationEngineEntry{
			Type: &p4v1.PacketReplicationEngineEntry_MulticastGroupEntry{MulticastGroupEntry: proto.Clone(g).(*p4v1.MulticastGroupEntry)}}}})
	}
	for id, cfg := range s.digests.configs() {
		ins(&p4v1.Entity{Entity: &p4v1.Entity_DigestEntry{DigestEntry: &p4v1.DigestEntry{DigestId: id, Config: cfg}}})
	}
	return out
}

// journaled is an update whose effect the journal must keep: counter values live in the maps.
func journaled(u *p4v1.Update) bool {
	switch u.GetEntity().GetEntity().(type) {
	case *p4v1.Entity_CounterEntry, *p4v1.Entity_DirectCounterEntry:
		return false
	}
	return true
}

// RestoreReport says what Restore did.
type RestoreReport struct {
	Cookie  uint64
	Applied int
	// Failed holds one line per update the data plane or the P4Info refused.
	Failed []string
	Torn   bool
}

// Restore makes the server's state the journal's: its committed config (refused when its
// P4Info is not this build's: the controller then pushes its own), then every update,
// applied through the data plane again (the same values the adopted maps already hold, or
// hold again: an update the previous instance applied but had not journaled yet before a
// crash is the controller's reconcile's to redo). Call before serving.
func (s *Server) Restore(j *Journal) (*RestoreReport, error) {
	rep, err := j.Read()
	if err != nil {
		return nil, err
	}
	if rep.Config == nil {
		return nil, fmt.Errorf("journal %s holds no pipeline config", j.Path())
	}
	if err := s.verifyConfig(rep.Config); err != nil {
		return nil, fmt.Errorf("journal %s: the previous instance ran another pipeline: %v", j.Path(), err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.config, s.saved = rep.Config, nil
	out := &RestoreReport{Cookie: rep.Config.GetCookie().GetCookie(), Torn: rep.Torn}
	for i, u := range rep.Updates {
		if err := s.applyUpdate(u); err != nil {
			out.Failed = append(out.Failed, fmt.Sprintf("update %d (%v %T): %v", i, u.GetType(), u.GetEntity().GetEntity(), err))
			continue
		}
		out.Applied++
	}
	// From here on the journal is this instance's: start it afresh from what was restored.
	if err := j.Snapshot(s.config, s.stateUpdates()); err != nil {
		return nil, err
	}
	s.journal = j
	return out, nil
}

// UseJournal makes s write its state to j from now on (a fresh start: j is emptied).
func (s *Server) UseJournal(j *Journal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := j.Snapshot(&p4v1.ForwardingPipelineConfig{}, nil); err != nil {
		return err
	}
	s.journal = j
	return nil
}

// journalWrite records the accepted updates of a Write. Hold s.mu.
func (s *Server) journalWrite(updates []*p4v1.Update, results []error) {
	if s.journal == nil {
		return
	}
	var keep []*p4v1.Update
	for i, u := range updates {
		if results[i] == nil && journaled(u) {
			keep = append(keep, u)
		}
	}
	if err := s.journal.Updates(keep); err != nil {
		s.log.Error("journal append failed: a restart would not find this write", "err", err)
	}
	if s.journal.NeedsCompaction() {
		s.journalSnapshot()
	}
}

// journalSnapshot rewrites the journal from the state. Hold s.mu.
func (s *Server) journalSnapshot() {
	if s.journal == nil {
		return
	}
	cfg := s.config
	if cfg == nil {
		cfg = &p4v1.ForwardingPipelineConfig{}
	}
	if err := s.journal.Snapshot(cfg, s.stateUpdates()); err != nil {
		s.log.Error("journal snapshot failed: a restart would not find the current state", "err", err)
	}
}
