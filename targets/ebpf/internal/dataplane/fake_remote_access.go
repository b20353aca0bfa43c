package dataplane

import "fmt"

func (f *Fake) SetRAConfig(cfg RAConfig) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ra = cfg
	return nil
}

func (f *Fake) dispatchIndex(t DispatchTable) (*dispatchIndex, error) {
	x := f.dispatchTbl[t]
	if x == nil {
		return nil, fmt.Errorf("%v: %w", t, ErrBadKey)
	}
	return x, nil
}

func (f *Fake) SetDispatchEntry(t DispatchTable, k DispatchKey, gw Gateway) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	x, err := f.dispatchIndex(t)
	if err != nil {
		return err
	}
	e, inserted, err := x.set(k, gw)
	if err != nil {
		return err
	}
	if inserted {
		f.dispatchCtr[t][e.slot] = Counter{}
	}
	return nil
}

func (f *Fake) DeleteDispatchEntry(t DispatchTable, k DispatchKey) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	x, err := f.dispatchIndex(t)
	if err != nil {
		return err
	}
	e, err := x.del(k)
	if err != nil {
		return err
	}
	delete(f.dispatchCtr[t], e.slot)
	return nil
}

func (f *Fake) DispatchCounter(t DispatchTable, k DispatchKey) (Counter, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	x, err := f.dispatchIndex(t)
	if err != nil {
		return Counter{}, err
	}
	e, err := x.get(k)
	if err != nil {
		return Counter{}, err
	}
	return f.dispatchCtr[t][e.slot], nil
}

func (f *Fake) SetDispatchCounter(t DispatchTable, k DispatchKey, c Counter) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	x, err := f.dispatchIndex(t)
	if err != nil {
		return err
	}
	e, err := x.get(k)
	if err != nil {
		return err
	}
	f.dispatchCtr[t][e.slot] = c
	return nil
}

// RA returns the current ra_settings configuration.
func (f *Fake) RA() RAConfig {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ra
}

// DispatchEntries returns a copy of one DispatchTable's entries.
func (f *Fake) DispatchEntries(t DispatchTable) map[DispatchKey]Gateway {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[DispatchKey]Gateway{}
	if x := f.dispatchTbl[t]; x != nil {
		for k, e := range x.entries {
			out[k] = e.gw
		}
	}
	return out
}
