package main

import (
	"os"
	"runtime"
	"testing"

	"supergw/targets/ebpf/internal/pktgen"
)

// TestLiveRunForwardsInEveryAllowedMode runs the rig's live mode with each generator
// mode this kernel allows (a refused one is skipped with the kernel's answer): frames
// reach the gateway port through the switch, and the result names the mode.
func TestLiveRunForwardsInEveryAllowedMode(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (namespaces, eBPF)")
	}
	for _, a := range pktgen.Available() {
		t.Run(string(a.Mode), func(t *testing.T) {
			if !a.Allowed {
				t.Skip(a.Why)
			}
			// runBench moves this thread into the rig's namespace and pins it to a CPU.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			// Device id 989: its own pin directory, apart from a benchmark's (990).
			res, err := runBench(options{mode: "live", packets: 20_000, size: 60, deviceID: 989, genMode: a.Mode})
			if err != nil {
				t.Fatal(err)
			}
			r := res[0]
			if r.Generator == nil || r.Generator.Mode != a.Mode || r.Forwarded == 0 || r.Forwarded > r.Packets {
				t.Fatalf("live with %s: %+v (generator %+v)", a.Mode, r, r.Generator)
			}
		})
	}
}
