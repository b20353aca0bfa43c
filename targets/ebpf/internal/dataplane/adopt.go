package dataplane

// adopt.go: a new switch takes over the running data plane of its predecessor (the same
// device's pin directory) without a moment in which a port has no program: its maps are
// reused where their layout is this build's, its pinned TCX links are pointed at the new
// program (BPF_LINK_UPDATE, atomic per port), and only then does anything of the old one go.
// What does not fit is refused, or with Config.ReplaceIncompatible re-created empty (the
// P4Runtime server's journal fills it before the links move). See targets/ebpf/README.md,
// "Restart without loss".

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// ErrIncompatible is returned by Open when the predecessor's maps do not fit this build's
// pipeline and Config.ReplaceIncompatible is not set: the predecessor keeps forwarding.
var ErrIncompatible = errors.New("the running data plane's maps do not fit this build's pipeline")

const linkPinPrefix = "link_port_"

// Adoption says what Open found of a predecessor and what it did with it.
type Adoption struct {
	// Live: the predecessor's programs were still attached to at least one of our ports.
	Live bool
	// Adopted are the maps reused as they are; Created the maps new to this build (or all of
	// them without a live predecessor); Replaced the incompatible ones re-created empty
	// (Config.ReplaceIncompatible), with the reason.
	Adopted, Created []string
	Replaced         map[string]string
	// Links are the ports whose pinned link will be pointed at the new program by Attach.
	Links []uint16
}

func (a *Adoption) String() string {
	if !a.Live {
		return "fresh start (no running data plane of this device)"
	}
	s := fmt.Sprintf("adopted the running data plane: %d maps kept, links of ports %v moved to the new program", len(a.Adopted), a.Links)
	if len(a.Created) > 0 {
		s += fmt.Sprintf("; new maps %v", a.Created)
	}
	if len(a.Replaced) > 0 {
		names := slices.Sorted(mapsKeys(a.Replaced))
		s += fmt.Sprintf("; REPLACED (their state lost, refilled from the P4Runtime journal) %v", names)
	}
	return s
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func linkPin(dir string, port uint16) string {
	return filepath.Join(dir, linkPinPrefix+strconv.Itoa(int(port)))
}

// pinnedLinks opens every link pinned in dir, by port.
func pinnedLinks(dir string) (map[uint16]link.Link, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read pin directory: %w", err)
	}
	out := map[uint16]link.Link{}
	for _, ent := range entries {
		rest, ok := strings.CutPrefix(ent.Name(), linkPinPrefix)
		if !ok {
			continue
		}
		port, err := strconv.ParseUint(rest, 10, 16)
		if err != nil {
			continue
		}
		l, err := link.LoadPinnedLink(filepath.Join(dir, ent.Name()), nil)
		if err != nil {
			closeLinks(out)
			return nil, fmt.Errorf("open pinned link %s: %w", ent.Name(), err)
		}
		out[uint16(port)] = l
	}
	return out, nil
}

func closeLinks(ls map[uint16]link.Link) {
	for _, l := range ls {
		l.Close()
	}
}

// linkIfindex is the interface a TCX link is attached to (0: detached, its device gone).
func linkIfindex(l link.Link) uint32 {
	info, err := l.Info()
	if err != nil || info.TCX() == nil {
		return 0
	}
	return info.TCX().Ifindex
}

// inspect decides what to reuse of the predecessor in pins.path: its links still attached
// to our ports make it live; then each of our maps pinned there is adopted when compatible.
// The returned replacements feed the object load; prev holds the live links (the caller
// closes or updates them).
func inspect(dir string, ifindex map[uint16]int, names []string, replace bool) (*Adoption, map[string]*ebpf.Map, map[uint16]link.Link, error) {
	a := &Adoption{Replaced: map[string]string{}}
	links, err := pinnedLinks(dir)
	if err != nil {
		return nil, nil, nil, err
	}
	live := map[uint16]link.Link{}
	for port, l := range links {
		if idx, ok := ifindex[port]; ok && idx != 0 && linkIfindex(l) == uint32(idx) {
			live[port] = l
			a.Links = append(a.Links, port)
		} else {
			l.Close()
		}
	}
	slices.Sort(a.Links)
	a.Live = len(live) > 0
	if !a.Live {
		a.Created = names
		return a, nil, nil, nil
	}
	spec, err := loadBpf()
	if err != nil {
		closeLinks(live)
		return nil, nil, nil, fmt.Errorf("read eBPF object: %w", err)
	}
	repl := map[string]*ebpf.Map{}
	var refused []string
	for _, name := range names {
		m, err := ebpf.LoadPinnedMap(filepath.Join(dir, name), nil)
		if errors.Is(err, os.ErrNotExist) {
			a.Created = append(a.Created, name)
			continue
		}
		if err != nil {
			closeMaps(repl)
			closeLinks(live)
			return nil, nil, nil, fmt.Errorf("open pinned map %s: %w", name, err)
		}
		if err := spec.Maps[name].Compatible(m); err != nil {
			m.Close()
			if !replace {
				refused = append(refused, fmt.Sprintf("%s (%v)", name, err))
				continue
			}
			a.Replaced[name] = err.Error()
			continue
		}
		repl[name] = m
		a.Adopted = append(a.Adopted, name)
	}
	if len(refused) > 0 {
		closeMaps(repl)
		closeLinks(live)
		return nil, nil, nil, fmt.Errorf("%w: %s; the running data plane keeps forwarding (its programs stay attached). "+
			"To replace it anyway, start with --replace-incompatible: the listed maps are re-created and refilled from "+
			"the P4Runtime journal before the ports move to the new program (their counters restart at 0; entries the "+
			"new pipeline refuses are logged and dropped)", ErrIncompatible, strings.Join(refused, "; "))
	}
	return a, repl, live, nil
}

func closeMaps(ms map[string]*ebpf.Map) {
	for _, m := range ms {
		m.Close()
	}
}

// attachOrUpdate points every port at the loaded program: a live pinned link is updated in
// place (no moment without a program), any other port gets a new TCX link, pinned. Pinned
// links of ports no longer ours are detached.
func (e *EBPF) attachOrUpdate() error {
	for _, port := range slices.Sorted(mapsKeysU16(e.ifindex)) {
		if l, ok := e.prevLinks[port]; ok {
			if err := l.Update(e.objs.SgwIngress); err != nil {
				return fmt.Errorf("move port %d (%s) to the new program: %w", port, e.cfg.Ports[port], err)
			}
			e.links[port] = l
			delete(e.prevLinks, port)
			continue
		}
		path := linkPin(e.pins.path, port)
		if old, err := link.LoadPinnedLink(path, nil); err == nil {
			// A stale pin (its device gone and back): drop it, it holds nothing live.
			old.Unpin()
			old.Close()
		}
		l, err := link.AttachTCX(link.TCXOptions{
			Interface: e.ifindex[port],
			Program:   e.objs.SgwIngress,
			Attach:    ebpf.AttachTCXIngress,
		})
		if err != nil {
			return fmt.Errorf("attach tcx ingress to %s (port %d): %w", e.cfg.Ports[port], port, err)
		}
		e.links[port] = l
		if err := l.Pin(path); err != nil {
			return fmt.Errorf("pin link of port %d: %w", port, err)
		}
	}
	return e.dropStalePins()
}

func mapsKeysU16[V any](m map[uint16]V) func(func(uint16) bool) {
	return func(yield func(uint16) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// dropStalePins removes pins of links to ports we do not serve and of maps this build has
// not (their objects go with the last reference).
func (e *EBPF) dropStalePins() error {
	entries, err := os.ReadDir(e.pins.path)
	if err != nil {
		return fmt.Errorf("read pin directory: %w", err)
	}
	ours := e.mapsByName()
	var errs []error
	for _, ent := range entries {
		name := ent.Name()
		if rest, ok := strings.CutPrefix(name, linkPinPrefix); ok {
			port, perr := strconv.ParseUint(rest, 10, 16)
			if _, served := e.ifindex[uint16(port)]; perr == nil && served {
				continue
			}
		} else if _, ok := ours[name]; ok {
			continue
		}
		if err := os.Remove(filepath.Join(e.pins.path, name)); err != nil {
			errs = append(errs, err)
		}
	}
	for _, l := range e.prevLinks {
		l.Close()
	}
	e.prevLinks = nil
	return errors.Join(errs...)
}

// pinMaps pins the maps that are not pinned yet (new or re-created; an adopted map keeps
// its pin), replacing a pin of an incompatible predecessor's map.
func (e *EBPF) pinMaps() error {
	for name, m := range e.mapsByName() {
		if slices.Contains(e.adoption.Adopted, name) {
			continue
		}
		path := filepath.Join(e.pins.path, name)
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove the pin of the replaced map %s: %w", name, err)
		}
		if err := m.Pin(path); err != nil {
			return fmt.Errorf("pin map %s: %w", name, err)
		}
	}
	return nil
}

// Teardown removes what an instance left in pinDir (a switch that exited handing its data
// plane over): its links (the programs leave the ports) and its maps. No instance may hold
// the directory. A directory that does not exist is nothing to do.
func Teardown(pinDir string) error {
	if _, err := os.Stat(pinDir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	p, err := lockPinDir(pinDir)
	if err != nil {
		return err
	}
	links, err := pinnedLinks(pinDir)
	if err != nil {
		p.unlockAndRemove()
		return err
	}
	var errs []error
	for _, l := range links {
		errs = append(errs, l.Unpin(), l.Close())
	}
	errs = append(errs, p.removeAll(), p.unlockAndRemove())
	return errors.Join(errs...)
}
