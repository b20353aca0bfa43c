package dataplane

import (
	"fmt"
	"time"
)

func (f *Fake) SetNDConfig(cfg NDConfig) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nd = cfg
	return nil
}

func (f *Fake) SetHostIPv6(ip IPv6, mac MAC) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := full("host_ip6s", f.hostIP6s, ip, f.limits.hostIP6s); err != nil {
		return err
	}
	f.hostIP6s[ip] = mac
	return nil
}

func (f *Fake) DeleteHostIPv6(ip IPv6) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return remove(f.hostIP6s, ip, fmt.Sprintf("host ip6 %x", ip))
}

func (f *Fake) SetLearnedIP6(ip IPv6, mac MAC) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := LearnedIP6Key{ip, mac}
	if err := full("learned_ip6s", f.learnedIP6s, k, f.limits.learnedIP6s); err != nil {
		return err
	}
	f.learnedIP6s[k] = f.now()
	return nil
}

func (f *Fake) DeleteLearnedIP6(ip IPv6, mac MAC) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return remove(f.learnedIP6s, LearnedIP6Key{ip, mac}, fmt.Sprintf("learned ip6 %x %v", ip, mac))
}

func (f *Fake) LearnedIP6Idle(ip IPv6, mac MAC) (time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return idleOf(f.learnedIP6s, LearnedIP6Key{ip, mac}, f.now())
}

func (f *Fake) LearnedIP6IdleAll() (map[LearnedIP6Key]time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return idleOfAll(f.learnedIP6s, f.now()), nil
}

// ND returns the nd_settings configuration.
func (f *Fake) ND() NDConfig {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.nd
}

// HostIP6s returns a copy of the host_ip6s entries.
func (f *Fake) HostIP6s() map[IPv6]MAC {
	f.mu.Lock()
	defer f.mu.Unlock()
	return cloneMap(f.hostIP6s)
}

// TouchIP6 marks (ip, mac) as hit at now-idle, so LearnedIP6Idle reports idle.
func (f *Fake) TouchIP6(ip IPv6, mac MAC, idle time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := LearnedIP6Key{ip, mac}
	if _, ok := f.learnedIP6s[k]; ok {
		f.learnedIP6s[k] = f.now().Add(-idle)
	}
}
