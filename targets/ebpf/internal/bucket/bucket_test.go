package bucket

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"testing"
)

// VectorsPath is the BMv2-computed vector file, relative to this package.
var vectorsPath = filepath.Join("..", "..", "..", "..", "p4src", "vectors", "bucket-crc32.json")

type vector struct {
	MAC         string `json:"mac"`
	CRC32       uint32 `json:"crc32"`
	BucketK64   uint16 `json:"bucket_k64"`
	BucketK256  uint16 `json:"bucket_k256"`
	BucketK4096 uint16 `json:"bucket_k4096"`
}

func loadVectors(t *testing.T) []vector {
	t.Helper()
	raw, err := os.ReadFile(vectorsPath)
	if err != nil {
		t.Fatalf("read vectors: %v", err)
	}
	var f struct {
		Vectors []vector `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatalf("parse %s: %v", vectorsPath, err)
	}
	if len(f.Vectors) == 0 {
		t.Fatalf("%s holds no vectors", vectorsPath)
	}
	return f.Vectors
}

func TestVectors(t *testing.T) {
	for _, v := range loadVectors(t) {
		hw, err := net.ParseMAC(v.MAC)
		if err != nil {
			t.Fatalf("vector mac %q: %v", v.MAC, err)
		}
		mac := [6]byte(hw)
		if got := CRC32(mac[:]); got != v.CRC32 {
			t.Errorf("crc32(%s) = %d, want %d", v.MAC, got, v.CRC32)
		}
		for _, c := range []struct {
			k    int
			want uint16
		}{{64, v.BucketK64}, {256, v.BucketK256}, {4096, v.BucketK4096}} {
			got, err := Of(mac, c.k)
			if err != nil || got != c.want {
				t.Errorf("Of(%s, %d) = %d, %v; want %d", v.MAC, c.k, got, err, c.want)
			}
		}
	}
}

func TestCheckValue(t *testing.T) {
	// The catalogue check value of CRC-32/ISO-HDLC (IEEE 802.3).
	if got := CRC32([]byte("123456789")); got != 0xCBF43926 {
		t.Fatalf("crc32(123456789) = %#x, want 0xcbf43926", got)
	}
}

func TestBadInput(t *testing.T) {
	for _, k := range []int{0, -1, 3, 1000, 1 << 17} {
		if _, err := Of([6]byte{}, k); err == nil {
			t.Errorf("Of(k=%d): want error", k)
		}
	}
	if _, err := VMAC([6]byte{2, 0, 0, 0, 0, 1}, 5); err == nil {
		t.Error("VMAC with low bits set: want error")
	}
	got, err := VMAC([6]byte{2, 0x53, 0x47, 0x57, 0, 0}, 0x0abc)
	if err != nil || got != [6]byte{2, 0x53, 0x47, 0x57, 0x0a, 0xbc} {
		t.Errorf("VMAC = %x, %v", got, err)
	}
}
