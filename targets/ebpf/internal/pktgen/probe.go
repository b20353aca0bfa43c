package pktgen

import (
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"
)

// XDPMd is struct xdp_md as BPF_PROG_RUN takes it.
type XDPMd struct {
	Data, DataEnd, DataMeta, IngressIfindex, RxQueueIndex, EgressIfindex uint32
}

const loopbackIfindex = 1 // lo: in every network namespace, always index 1

// ProbeLiveFrames asks the kernel whether it runs XDP programs in live-frame mode: one
// run of a program that drops its frame (so nothing is sent) on lo. nil means allowed;
// otherwise the error wraps ErrLiveFramesRefused with the kernel's answer.
func ProbeLiveFrames() error {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: "sgw_live_probe", Type: ebpf.XDP, License: "Dual MIT/GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 1 /* XDP_DROP */), asm.Return()},
	})
	if err != nil {
		return fmt.Errorf("%w: cannot even load an XDP program: %v", ErrLiveFramesRefused, err)
	}
	defer prog.Close()
	frame := make([]byte, 60)
	_, err = prog.Run(&ebpf.RunOptions{
		Data: frame, Repeat: 1, Flags: unix.BPF_F_TEST_XDP_LIVE_FRAMES,
		Context: XDPMd{DataEnd: uint32(len(frame)), IngressIfindex: loopbackIfindex},
	})
	if err != nil {
		return fmt.Errorf("%w (%v)", ErrLiveFramesRefused, err)
	}
	return nil
}

// ProbeTxRing asks the kernel for an AF_PACKET socket, the TX ring's only requirement
// beyond an interface to bind to.
func ProbeTxRing() error {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("AF_PACKET socket: %w (needs root and a kernel with CONFIG_PACKET)", err)
	}
	return unix.Close(fd)
}

// Availability is whether this kernel allows a mode, and if not, why.
type Availability struct {
	Mode    Mode   `json:"mode"`
	Allowed bool   `json:"allowed"`
	Why     string `json:"why"`
}

// Available probes every mode, fastest first.
func Available() []Availability {
	var out []Availability
	for _, m := range []struct {
		mode  Mode
		probe func() error
	}{{LiveFrames, ProbeLiveFrames}, {PacketTxRing, ProbeTxRing}} {
		a := Availability{Mode: m.mode, Allowed: true, Why: m.mode.Cost()}
		if err := m.probe(); err != nil {
			a.Allowed, a.Why = false, err.Error()
		}
		out = append(out, a)
	}
	return out
}
