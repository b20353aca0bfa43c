package bucket

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"testing"

	c "supergw/targets/ebpf/internal/p4constants"
)

// The BMv2-computed vector files, relative to this package.
var (
	vectorsPath         = filepath.Join("..", "..", "..", "..", "p4src", "vectors", "bucket-crc32.json")
	identityVectorsPath = filepath.Join("..", "..", "..", "..", "p4src", "vectors", "bucket-identity.json")
	clientVectorsPath   = filepath.Join("..", "..", "..", "..", "p4src", "vectors", "client-crc32.json")
	clientIdentityPath  = filepath.Join("..", "..", "..", "..", "p4src", "vectors", "client-identity.json")
)

type vector struct {
	MAC         string `json:"mac"`
	IP          string `json:"ip"`
	CRC32       uint32 `json:"crc32"`
	Low16       uint16 `json:"low16"`
	BucketK64   uint16 `json:"bucket_k64"`
	BucketK256  uint16 `json:"bucket_k256"`
	BucketK4096 uint16 `json:"bucket_k4096"`
}

func loadVectors(t *testing.T, path string) []vector {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read vectors: %v", err)
	}
	var f struct {
		Vectors []vector `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	if len(f.Vectors) == 0 {
		t.Fatalf("%s holds no vectors", path)
	}
	return f.Vectors
}

// TestVectors checks each hash against its BMv2 vector file: the 16 hashed bits (the
// CRC-32 file records the whole CRC) and the buckets for K = 64, 256 and 4096.
func TestVectors(t *testing.T) {
	for _, file := range []struct {
		path string
		hash c.BucketHash
	}{{vectorsPath, c.BucketHashCRC32}, {identityVectorsPath, c.BucketHashIdentity}} {
		for _, v := range loadVectors(t, file.path) {
			hw, err := net.ParseMAC(v.MAC)
			if err != nil {
				t.Fatalf("vector mac %q: %v", v.MAC, err)
			}
			mac := [6]byte(hw)
			want16 := v.Low16
			if file.hash == c.BucketHashCRC32 {
				want16 = uint16(v.CRC32)
				if got := CRC32(mac[:]); got != v.CRC32 {
					t.Errorf("crc32(%s) = %d, want %d", v.MAC, got, v.CRC32)
				}
			}
			if got, err := Hash16(mac, file.hash); err != nil || got != want16 {
				t.Errorf("Hash16(%s, %v) = %d, %v; want %d", v.MAC, file.hash, got, err, want16)
			}
			for k, want := range map[int]uint16{64: v.BucketK64, 256: v.BucketK256, 4096: v.BucketK4096} {
				if got, err := Of(mac, k, file.hash); err != nil || got != want {
					t.Errorf("Of(%s, %d, %v) = %d, %v; want %d", v.MAC, k, file.hash, got, err, want)
				}
			}
		}
	}
}

// TestClientVectors checks the client-address hash against its BMv2 vector files.
func TestClientVectors(t *testing.T) {
	for _, file := range []struct {
		path string
		hash c.BucketHash
	}{{clientVectorsPath, c.BucketHashCRC32}, {clientIdentityPath, c.BucketHashIdentity}} {
		for _, v := range loadVectors(t, file.path) {
			ip := [4]byte(net.ParseIP(v.IP).To4())
			want16 := v.Low16
			if file.hash == c.BucketHashCRC32 {
				want16 = uint16(v.CRC32)
			}
			if got, err := ClientHash16(ip, file.hash); err != nil || got != want16 {
				t.Errorf("ClientHash16(%s, %v) = %d, %v; want %d", v.IP, file.hash, got, err, want16)
			}
			for k, want := range map[int]uint16{64: v.BucketK64, 256: v.BucketK256, 4096: v.BucketK4096} {
				if got, err := OfClient(ip, k, file.hash); err != nil || got != want {
					t.Errorf("OfClient(%s, %d, %v) = %d, %v; want %d", v.IP, k, file.hash, got, err, want)
				}
			}
		}
	}
	if _, err := OfClient([4]byte{}, 3, c.BucketHashCRC32); err == nil {
		t.Error("K = 3 accepted")
	}
	if _, err := ClientHash16([4]byte{}, 2); err == nil {
		t.Error("bucket hash 2 accepted")
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
		if _, err := Of([6]byte{}, k, c.BucketHashCRC32); err == nil {
			t.Errorf("Of(k=%d): want error", k)
		}
	}
	for _, h := range []c.BucketHash{2, 255} {
		if _, err := Of([6]byte{}, 256, h); err == nil {
			t.Errorf("Of(hash=%d): want error", h)
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
