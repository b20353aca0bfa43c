package main

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseFlagsRejectsBadInput(t *testing.T) {
	base := []string{"-gen", "ns:eth0", "-sink", "g1:eth0", "-frames", "f"}
	if _, err := parseFlags(base); err != nil {
		t.Fatalf("good flags: %v", err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-sink", "g1:eth0", "-frames", "f"}, "-gen"},
		{[]string{"-gen", "ns", "-sink", "g1:eth0", "-frames", "f"}, "want NETNS:DEV"},
		{[]string{"-gen", "ns:eth0", "-frames", "f"}, "at least one -sink"},
		{[]string{"-gen", "ns:eth0", "-sink", "g1:eth0"}, "-frames FILE"},
		{append(base, "-seconds", "0"), "-seconds 0"},
		{append(base, "-rate", "-5"), "-rate -5"},
		{append(base, "-cpu", "4096"), "-cpu 4096"},
		{append(base, "-vmac-base", "nope"), "-vmac-base"},
		{append(base, "-bucket-mask", "70000"), "-bucket-mask"},
		{append(base, "-prog-stats", "x"), "want NETNS:DEV"},
		{append(base, "extra"), "unexpected arguments"},
		{append(base, "-gen-mode", "dpdk"), `generator mode "dpdk"`},
	} {
		_, err := parseFlags(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
}

// writeFrames writes a plan of frames of the given lengths, IPv4 (ethertype 0x0800) unless
// ethertype says otherwise.
func writeFrames(t *testing.T, lengths ...int) string {
	t.Helper()
	return writePlan(t, 0x0800, lengths...)
}

func writePlan(t *testing.T, ethertype uint16, lengths ...int) string {
	t.Helper()
	var data []byte
	for _, n := range lengths {
		data = binary.LittleEndian.AppendUint16(data, uint16(n))
		f := make([]byte, n)
		if n >= 14 {
			binary.BigEndian.PutUint16(f[12:], ethertype)
		}
		data = append(data, f...)
	}
	path := filepath.Join(t.TempDir(), "plan.bin")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestReadFrames(t *testing.T) {
	p, err := readFrames(writeFrames(t, 60, 60, 60))
	if err != nil || len(p.frames) != 3 || len(p.frames[2]) != 60 || p.ipv6 || p.headers != 42 || p.family() != "ipv4" {
		t.Fatalf("3 IPv4 frames of 60: got %+v, %v", p, err)
	}
	p, err = readFrames(writePlan(t, 0x86dd, 62, 62))
	if err != nil || len(p.frames) != 2 || !p.ipv6 || p.headers != 62 || p.family() != "ipv6" {
		t.Fatalf("2 IPv6 frames of 62: got %+v, %v", p, err)
	}
	mixed := writeFrames(t, 80)
	data, _ := os.ReadFile(mixed)
	v6, _ := os.ReadFile(writePlan(t, 0x86dd, 80))
	_ = os.WriteFile(mixed, append(data, v6...), 0o600)
	for _, tc := range []struct {
		path string
		want string
	}{
		{writeFrames(t), "0 frames"},
		{writeFrames(t, 60, 61), "one length per plan"},
		{writeFrames(t, 20), "length 20 (want >= 42 for ipv4"},
		{writeFrames(t, 10), "length 10"},
		{writePlan(t, 0x86dd, 60), "length 60 (want >= 62 for ipv6"},
		{writePlan(t, 0x0806, 60), "ethertype 0x0806"},
		{mixed, "one family per plan"},
		{filepath.Join(t.TempDir(), "missing"), "no such file"},
	} {
		if _, err := readFrames(tc.path); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.path, err, tc.want)
		}
	}
	truncated := writeFrames(t, 60)
	data, _ = os.ReadFile(truncated)
	_ = os.WriteFile(truncated, data[:30], 0o600)
	if _, err := readFrames(truncated); err == nil || !strings.Contains(err.Error(), "length 60") {
		t.Errorf("truncated frame: error %v", err)
	}
}
