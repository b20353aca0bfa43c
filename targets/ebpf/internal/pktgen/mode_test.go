package pktgen

import (
	"errors"
	"strings"
	"testing"
)

func TestParseMode(t *testing.T) {
	for _, s := range []string{"auto", "xdp-live-frames", "af-packet-tx-ring"} {
		if m, err := ParseMode(s); err != nil || string(m) != s {
			t.Errorf("ParseMode(%q) = %q, %v", s, m, err)
		}
	}
	for _, s := range []string{"", "xdp", "AUTO", "af_packet"} {
		if _, err := ParseMode(s); err == nil || !strings.Contains(err.Error(), "want auto, xdp-live-frames or af-packet-tx-ring") {
			t.Errorf("ParseMode(%q): error %v", s, err)
		}
	}
}

// TestChoose: the choice follows the probe, a refused live-frame request names the
// kernel feature and the way out, and every choice says why.
func TestChoose(t *testing.T) {
	allowed := func() error { return nil }
	refused := func() error {
		return errors.Join(ErrLiveFramesRefused, errors.New("run program: operation not permitted"))
	}
	never := func() error { t.Fatal("the TX ring needs no probe"); return nil }
	for _, tc := range []struct {
		want  Mode
		probe func() error
		got   Mode
		why   string
	}{
		{Auto, allowed, LiveFrames, "allows live frames"},
		{Auto, refused, PacketTxRing, "operation not permitted; fell back to the AF_PACKET TX ring"},
		{LiveFrames, allowed, LiveFrames, "asked for"},
		{PacketTxRing, never, PacketTxRing, "asked for"},
	} {
		c, err := Choose(tc.want, tc.probe)
		if err != nil || c.Mode != tc.got || !strings.Contains(c.Why, tc.why) || !strings.Contains(c.Why, "skb") && c.Mode == PacketTxRing {
			t.Errorf("Choose(%s): %+v, %v; want %s, why containing %q", tc.want, c, err, tc.got, tc.why)
		}
	}
	_, err := Choose(LiveFrames, refused)
	if !errors.Is(err, ErrLiveFramesRefused) || !strings.Contains(err.Error(), "BPF_F_TEST_XDP_LIVE_FRAMES") ||
		!strings.Contains(err.Error(), "use -gen-mode af-packet-tx-ring") {
		t.Errorf("live frames asked for and refused: %v", err)
	}
	if _, err := Choose("dpdk", allowed); err == nil {
		t.Error("an unknown mode was chosen")
	}
}
