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
	} {
		_, err := parseFlags(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
}

func writeFrames(t *testing.T, lengths ...int) string {
	t.Helper()
	var data []byte
	for _, n := range lengths {
		data = binary.LittleEndian.AppendUint16(data, uint16(n))
		data = append(data, make([]byte, n)...)
	}
	path := filepath.Join(t.TempDir(), "plan.bin")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestReadFrames(t *testing.T) {
	frames, err := readFrames(writeFrames(t, 60, 60, 60))
	if err != nil || len(frames) != 3 || len(frames[2]) != 60 {
		t.Fatalf("3 frames of 60: got %d, %v", len(frames), err)
	}
	for _, tc := range []struct {
		path string
		want string
	}{
		{writeFrames(t), "0 frames"},
		{writeFrames(t, 60, 61), "one length per plan"},
		{writeFrames(t, 20), "length 20"},
		{filepath.Join(t.TempDir(), "missing"), "no such file"},
	} {
		if _, err := readFrames(tc.path); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.path, err, tc.want)
		}
	}
	truncated := writeFrames(t, 60)
	data, _ := os.ReadFile(truncated)
	_ = os.WriteFile(truncated, data[:30], 0o600)
	if _, err := readFrames(truncated); err == nil || !strings.Contains(err.Error(), "length 60") {
		t.Errorf("truncated frame: error %v", err)
	}
}
