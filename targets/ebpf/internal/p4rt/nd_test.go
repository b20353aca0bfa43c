package p4rt

import (
	"bytes"
	"net"
	"testing"
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"

	"supergw/targets/ebpf/internal/dataplane"
)

// The IPv6 ND tables through P4Runtime: nd_settings' default action, host_ip6s,
// learned_ip6s with its idle timeout, and learn_ip6_digest_t.

func v6(s string) dataplane.IPv6 { return dataplane.IPv6(net.ParseIP(s).To16()) }

func TestNDTablesReachDataplane(t *testing.T) {
	h := newHarness(t)
	h.primary()
	b := h.srv.bind
	ll, gua, host := v6("fe80::1"), v6("2001:db8::1"), v6("2001:db8::11")
	hostMAC := dataplane.MAC{0, 0, 3, 0, 0, 0x19}
	h.mustWrite(
		mod(&p4v1.TableEntry{TableId: b.ndSettings, IsDefaultAction: true, Action: action(b.setND,
			param(b.llParam, ll[:]...), param(b.guaParam, gua[:]...))}),
		ins(&p4v1.TableEntry{TableId: b.hostIP6s, Match: []*p4v1.FieldMatch{exact(b.hostIP6sTarget, host[:]...)},
			Action: action(b.advertiseHostMAC, param(b.hostIP6MACParam, hostMAC[:]...))}),
	)
	if got := h.fake.ND(); got != (dataplane.NDConfig{Configured: true, LinkLocal: ll, Global: gua}) {
		t.Errorf("nd_settings: %+v", got)
	}
	if got := h.fake.HostIP6s(); len(got) != 1 || got[host] != hostMAC {
		t.Errorf("host_ip6s: %v", got)
	}
	// A global address left unset (::, a canonical empty value) reaches the data plane as ::.
	h.mustWrite(mod(&p4v1.TableEntry{TableId: b.ndSettings, IsDefaultAction: true, Action: action(b.setND,
		param(b.llParam, ll[:]...), param(b.guaParam, 0))}))
	if got := h.fake.ND(); got != (dataplane.NDConfig{Configured: true, LinkLocal: ll}) {
		t.Errorf("nd_settings with GUA unset: %+v", got)
	}
	h.mustWrite(
		mod(&p4v1.TableEntry{TableId: b.ndSettings, IsDefaultAction: true, Action: action(b.ndUnconfigured)}),
		del(&p4v1.TableEntry{TableId: b.hostIP6s, Match: []*p4v1.FieldMatch{exact(b.hostIP6sTarget, host[:]...)}}),
	)
	if got := h.fake.ND(); got != (dataplane.NDConfig{}) {
		t.Errorf("nd_settings after mark_nd_unconfigured: %+v", got)
	}
	if got := h.fake.HostIP6s(); len(got) != 0 {
		t.Errorf("host_ip6s after delete: %v", got)
	}
}

func TestLearnedIP6IdleTimeoutAndDigest(t *testing.T) {
	h := newHarness(t)
	sc := h.primary()
	b := h.srv.bind
	ip, mac := v6("fe80::200:3ff:fe00:19"), dataplane.MAC{0, 0, 3, 0, 0, 0x19}
	timeout := 200 * time.Millisecond
	h.mustWrite(ins(&p4v1.TableEntry{TableId: b.learnedIP6s,
		Match:  []*p4v1.FieldMatch{exact(b.learnedIP6sIP, ip[:]...), exact(b.learnedIP6sMAC, mac[:]...)},
		Action: action(b.markIP6Known), IdleTimeoutNs: timeout.Nanoseconds()}))
	sc.none(50 * time.Millisecond)
	h.fake.TouchIP6(ip, mac, time.Second)
	n := sc.next(2 * time.Second).GetIdleTimeoutNotification()
	if n == nil || len(n.GetTableEntry()) != 1 || n.GetTableEntry()[0].GetTableId() != b.learnedIP6s {
		t.Fatalf("want an idle notification for learned_ip6s, got %v", n)
	}

	d := b.learnIP6Digest
	h.mustWrite(digestUpdate(p4v1.Update_INSERT, d, &p4v1.DigestEntry_Config{MaxTimeoutNs: 0, MaxListSize: 1, AckTimeoutNs: int64(time.Hour)}))
	h.fake.Emit(dataplane.Event{Kind: dataplane.EventDigestIP6, SrcMAC: mac, Port: 2, SrcIP6: ip})
	list := sc.next(2 * time.Second).GetDigest()
	if list == nil || list.GetDigestId() != d || len(list.GetData()) != 1 {
		t.Fatalf("want one learn_ip6_digest_t, got %v", list)
	}
	members := list.GetData()[0].GetStruct().GetMembers()
	if len(members) != 3 {
		t.Fatalf("learn_ip6_digest_t members: %v", members)
	}
	want := map[string][]byte{"src_mac": canonical(mac[:]), "port": {2}, "src_ip6": canonical(ip[:])}
	for i, name := range b.digestIP6Members {
		if got := members[i].GetBitstring(); !bytes.Equal(got, want[name]) {
			t.Errorf("member %s = %x, want %x", name, got, want[name])
		}
	}
}
