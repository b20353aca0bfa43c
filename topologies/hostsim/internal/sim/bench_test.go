package sim

import (
	"net/netip"
	"testing"
)

// The per-frame CPU of the generator and the receiver without the kernel: go test -bench . ./internal/sim
func BenchmarkStamp1408(b *testing.B) {
	tm, err := NewTemplate(1408, peer, vmac, netip.MustParseAddr("192.168.203.24"), remote, 10000, 5001, 1, 1)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 0, MaxFrameBytes)
	for i := 0; b.Loop(); i++ {
		buf = tm.Stamp(buf, uint32(i), uint64(i))
	}
}

func BenchmarkReceive64(b *testing.B) {
	s, _ := newSim(b, 224)
	tm, err := NewTemplate(64, peer, s.Hosts()[5].MAC, remote, s.Hosts()[5].IP, 10000, 5001, 1, 1)
	if err != nil {
		b.Fatal(err)
	}
	p := NewParser()
	buf := make([]byte, 0, MaxFrameBytes)
	for i := 0; b.Loop(); i++ {
		buf = tm.Stamp(buf, uint32(i), uint64(i))
		s.Handle(p, buf, uint64(i)+10)
	}
	if s.Snapshot(false, false).Totals.TestRx == 0 {
		b.Fatal("nothing counted")
	}
}
