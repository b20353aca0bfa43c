package dataplane

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

type crcVector struct {
	MAC         string `json:"mac"`
	CRC32       uint32 `json:"crc32"`
	BucketK64   uint16 `json:"bucket_k64"`
	BucketK256  uint16 `json:"bucket_k256"`
	BucketK4096 uint16 `json:"bucket_k4096"`
}

func loadVectors(t *testing.T) []crcVector {
	t.Helper()
	path := filepath.Join("..", "..", "..", "..", "p4src", "vectors", "bucket-crc32.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read vectors: %v", err)
	}
	var f struct {
		Vectors []crcVector `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	if len(f.Vectors) == 0 {
		t.Fatalf("%s holds no vectors", path)
	}
	return f.Vectors
}
