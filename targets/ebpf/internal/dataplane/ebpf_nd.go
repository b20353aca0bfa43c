package dataplane

import (
	"encoding/binary"
	"errors"
	"time"

	"github.com/cilium/ebpf"
)

// The IPv6 Neighbor Discovery maps (bpf/supergw_nd.h): nd_settings, host_ip6s,
// learned_ip6s and the IPv6 digest hold-off.
type ndMaps struct {
	settings   hashMap[uint32, bpfSgwNdConfig]
	hostIP6s   hashMap[IPv6, MAC]
	learned    hashMap[bpfSgwLearnIp6Key, uint64]
	digestSent hashMap[bpfSgwLearnIp6Key, uint64]
}

func (e *EBPF) loadND() {
	m := &e.objs.bpfMaps
	e.nd = ndMaps{
		settings:   hashMap[uint32, bpfSgwNdConfig]{m.SgwNdSettings, "nd_settings"},
		hostIP6s:   hashMap[IPv6, MAC]{m.SgwHostIp6s, "host_ip6s"},
		learned:    hashMap[bpfSgwLearnIp6Key, uint64]{m.SgwLearnedIp6s, "learned_ip6s"},
		digestSent: hashMap[bpfSgwLearnIp6Key, uint64]{m.SgwDigestIp6Sent, "digest_ip6_sent"},
	}
}

func (e *EBPF) ndMapsByName() map[string]*ebpf.Map {
	m := &e.objs.bpfMaps
	return map[string]*ebpf.Map{
		bpfMapSgwNdSettings:    m.SgwNdSettings,
		bpfMapSgwHostIp6s:      m.SgwHostIp6s,
		bpfMapSgwLearnedIp6s:   m.SgwLearnedIp6s,
		bpfMapSgwDigestIp6Sent: m.SgwDigestIp6Sent,
	}
}

// ip6Words is ip as struct sgw_ip6: four words whose bytes in memory are the address.
func ip6Words(ip IPv6) bpfSgwIp6 {
	var w bpfSgwIp6
	for i := range w.W {
		w.W[i] = binary.NativeEndian.Uint32(ip[4*i:])
	}
	return w
}

func ip6FromWords(w bpfSgwIp6) IPv6 {
	var ip IPv6
	for i, v := range w.W {
		binary.NativeEndian.PutUint32(ip[4*i:], v)
	}
	return ip
}

func (e *EBPF) SetNDConfig(cfg NDConfig) error {
	var v bpfSgwNdConfig
	if cfg.Configured {
		v = bpfSgwNdConfig{LinkLocalIp6: ip6Words(cfg.LinkLocal), GlobalIp6: ip6Words(cfg.Global), Configured: 1}
	}
	return e.nd.settings.put(0, v)
}

func (e *EBPF) SetHostIPv6(ip IPv6, mac MAC) error { return e.nd.hostIP6s.put(ip, mac) }

func (e *EBPF) DeleteHostIPv6(ip IPv6) error { return e.nd.hostIP6s.del(ip) }

func learnIP6Key(ip IPv6, mac MAC) bpfSgwLearnIp6Key {
	return bpfSgwLearnIp6Key{Ip6: ip6Words(ip), Mac: mac}
}

func (e *EBPF) SetLearnedIP6(ip IPv6, mac MAC) error {
	now, err := monotonicNow()
	if err != nil {
		return err
	}
	return e.nd.learned.put(learnIP6Key(ip, mac), now)
}

// DeleteLearnedIP6 also forgets the digest hold-off, so the next frame from the
// address is reported at once.
func (e *EBPF) DeleteLearnedIP6(ip IPv6, mac MAC) error {
	k := learnIP6Key(ip, mac)
	if err := e.nd.learned.del(k); err != nil {
		return err
	}
	if err := e.nd.digestSent.del(k); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	return nil
}

func (e *EBPF) LearnedIP6Idle(ip IPv6, mac MAC) (time.Duration, error) {
	last, err := e.nd.learned.get(learnIP6Key(ip, mac))
	if err != nil {
		return 0, err
	}
	now, err := monotonicNow()
	if err != nil {
		return 0, err
	}
	return time.Duration(now - min(now, last)), nil
}

func (e *EBPF) LearnedIP6IdleAll() (map[LearnedIP6Key]time.Duration, error) {
	now, err := monotonicNow()
	if err != nil {
		return nil, err
	}
	out := make(map[LearnedIP6Key]time.Duration)
	err = readAll(e.nd.learned, func(k bpfSgwLearnIp6Key, last uint64) {
		out[LearnedIP6Key{IP: ip6FromWords(k.Ip6), MAC: k.Mac}] = time.Duration(now - min(now, last))
	})
	return out, err
}
