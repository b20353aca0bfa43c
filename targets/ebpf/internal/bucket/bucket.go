// Package bucket is the Go copy of the pipeline's bucket math
// (docs/pipeline-contract.md, "Terms"): bucket(mac) = hash(mac) & (K-1) with the
// settings' bucket_hash (CRC-32 or the MAC's low bits), vmac(b) = vmac_base | b; and the
// outside switch's client bucket, the same two hashes over a client's IPv4 address.
// Tested against p4src/vectors/{bucket,client}-{crc32,identity}.json.
package bucket

import (
	"fmt"
	"hash/crc32"

	c "supergw/targets/ebpf/internal/p4constants"
)

// CRC32 is the standard CRC-32 (IEEE 802.3: poly 0x04C11DB7 reflected, init and final
// xor 0xFFFFFFFF), what BMv2's HashAlgorithm.crc32 and Tofino's CRC32 compute.
func CRC32(data []byte) uint32 {
	return crc32.ChecksumIEEE(data)
}

// Hash16 returns the 16 bits of mac that the data plane masks with K-1 under h: the
// low 16 bits of its CRC-32 (BucketHashCRC32) or of the MAC itself (BucketHashIdentity).
func Hash16(mac [6]byte, h c.BucketHash) (uint16, error) { return hash16(mac[:], h) }

// ClientHash16 returns the 16 bits of a client's IPv4 address (network order) that the
// outside switch masks with K-1 under h: the low 16 bits of the CRC-32 of its 4 bytes
// (BucketHashCRC32) or of the address itself (BucketHashIdentity).
func ClientHash16(ip [4]byte, h c.BucketHash) (uint16, error) { return hash16(ip[:], h) }

// hash16 is the low 16 bits of key's CRC-32 or of key itself (its last two bytes).
func hash16(key []byte, h c.BucketHash) (uint16, error) {
	switch h {
	case c.BucketHashCRC32:
		return uint16(CRC32(key)), nil
	case c.BucketHashIdentity:
		return uint16(key[len(key)-2])<<8 | uint16(key[len(key)-1]), nil
	}
	return 0, fmt.Errorf("bucket hash %v: must be CRC32 or IDENTITY", h)
}

// Of returns the bucket of mac for k buckets under hash h; k must be a power of two.
func Of(mac [6]byte, k int, h c.BucketHash) (uint16, error) {
	v, err := Hash16(mac, h)
	if err != nil {
		return 0, err
	}
	return mask(v, k)
}

// OfClient returns the bucket of a client's IPv4 address for k buckets under hash h.
func OfClient(ip [4]byte, k int, h c.BucketHash) (uint16, error) {
	v, err := ClientHash16(ip, h)
	if err != nil {
		return 0, err
	}
	return mask(v, k)
}

func mask(v uint16, k int) (uint16, error) {
	if k <= 0 || k > 1<<16 || k&(k-1) != 0 {
		return 0, fmt.Errorf("bucket count %d: must be a power of two in [1, 65536]", k)
	}
	return v & uint16(k-1), nil
}

// VMAC returns vmac_base | b; base must have its low 16 bits zero.
func VMAC(base [6]byte, b uint16) ([6]byte, error) {
	if base[4] != 0 || base[5] != 0 {
		return [6]byte{}, fmt.Errorf("vmac base %x: low 16 bits must be zero", base)
	}
	base[4] = byte(b >> 8)
	base[5] = byte(b)
	return base, nil
}
