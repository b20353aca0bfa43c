package dataplane

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"supergw/targets/ebpf/internal/p4constants"
)

// bucketVector is one MAC of p4src/vectors/bucket-*.json with the buckets BMv2 computed.
type bucketVector struct {
	MAC         string `json:"mac"`
	BucketK64   uint16 `json:"bucket_k64"`
	BucketK256  uint16 `json:"bucket_k256"`
	BucketK4096 uint16 `json:"bucket_k4096"`
}

// loadVectors reads the vector file of hash h.
func loadVectors(t *testing.T, h p4constants.BucketHash) []bucketVector {
	t.Helper()
	name := map[p4constants.BucketHash]string{
		p4constants.BucketHashCRC32:    "bucket-crc32.json",
		p4constants.BucketHashIdentity: "bucket-identity.json",
	}[h]
	if name == "" {
		t.Fatalf("no vector file for bucket hash %v", h)
	}
	path := filepath.Join("..", "..", "..", "..", "p4src", "vectors", name)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read vectors: %v", err)
	}
	var f struct {
		Vectors []bucketVector `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	if len(f.Vectors) == 0 {
		t.Fatalf("%s holds no vectors", path)
	}
	return f.Vectors
}
