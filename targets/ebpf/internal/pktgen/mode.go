// Package pktgen is how the benchmarks' traffic sources (sgw-traffic, sgw-dpbench) put
// frames on a veth: the fastest way this kernel allows, chosen at start and named in
// their results.
//
//   - LiveFrames: an XDP program run with BPF_PROG_RUN and BPF_F_TEST_XDP_LIVE_FRAMES
//     returns XDP_TX, so the kernel builds and transmits the frames itself (no skb, no
//     copy from user space). Some kernels refuse it even to root (6.18 builds seen with
//     "operation not permitted"), so it is probed, never assumed.
//   - PacketTxRing: an AF_PACKET socket with a TPACKET_V2 TX ring and PACKET_QDISC_BYPASS:
//     user space writes whole frames into a shared ring and one send() hands a batch to
//     the kernel, which allocates an skb and copies each frame (the cost the live-frame
//     mode does not pay) and passes it straight to the driver.
package pktgen

import (
	"errors"
	"fmt"
)

// Mode is how frames are sent.
type Mode string

const (
	// Auto picks LiveFrames where the kernel allows it, else PacketTxRing.
	Auto         Mode = "auto"
	LiveFrames   Mode = "xdp-live-frames"
	PacketTxRing Mode = "af-packet-tx-ring"
)

// ParseMode reads a -gen-mode flag.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case Auto, LiveFrames, PacketTxRing:
		return m, nil
	}
	return "", fmt.Errorf("generator mode %q: want %s, %s or %s", s, Auto, LiveFrames, PacketTxRing)
}

// Choice is the mode a run uses and why.
type Choice struct {
	Mode Mode   `json:"mode"`
	Why  string `json:"why"`
}

// Cost says what a mode costs the sender per frame, for reports.
func (m Mode) Cost() string {
	switch m {
	case LiveFrames:
		return "frames built and transmitted by the kernel from recycled pages (no skb, no copy from user space)"
	case PacketTxRing:
		return "frames written into a shared ring by user space; the kernel allocates an skb and copies each one " +
			"(one send() per batch, qdisc bypassed)"
	}
	return ""
}

// ErrLiveFramesRefused wraps the kernel's answer when it refuses live frames.
var ErrLiveFramesRefused = errors.New("this kernel refuses BPF_PROG_RUN with BPF_F_TEST_XDP_LIVE_FRAMES")

// Choose resolves want against what the kernel allows; probe is ProbeLiveFrames (a
// parameter so the choice itself is testable). Asking for LiveFrames where the kernel
// refuses it is an error that names the kernel feature and the way out.
func Choose(want Mode, probe func() error) (Choice, error) {
	switch want {
	case PacketTxRing:
		return Choice{PacketTxRing, "asked for (-gen-mode " + string(PacketTxRing) + "); " + PacketTxRing.Cost()}, nil
	case LiveFrames:
		if err := probe(); err != nil {
			return Choice{}, fmt.Errorf("%w: use -gen-mode %s (or %s), or a kernel that allows live frames "+
				"(Linux >= 5.18 with XDP, not refused by a security module or a sandbox)", err, PacketTxRing, Auto)
		}
		return Choice{LiveFrames, "asked for (-gen-mode " + string(LiveFrames) + "); " + LiveFrames.Cost()}, nil
	case Auto:
		if err := probe(); err != nil {
			return Choice{PacketTxRing, fmt.Sprintf("%v; fell back to the AF_PACKET TX ring: %s", err, PacketTxRing.Cost())}, nil
		}
		return Choice{LiveFrames, "the kernel allows live frames: " + LiveFrames.Cost()}, nil
	}
	return Choice{}, fmt.Errorf("generator mode %q: want %s, %s or %s", want, Auto, LiveFrames, PacketTxRing)
}
