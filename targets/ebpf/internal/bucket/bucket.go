// Package bucket is the Go copy of the pipeline's bucket math
// (docs/pipeline-contract.md, "Terms"): bucket(mac) = crc32(mac) & (K-1),
// vmac(b) = vmac_base | b. Tested against p4src/vectors/bucket-crc32.json.
package bucket

import (
	"fmt"
	"hash/crc32"
)

// CRC32 is the standard CRC-32 (IEEE 802.3: poly 0x04C11DB7 reflected, init and final
// xor 0xFFFFFFFF), what BMv2's HashAlgorithm.crc32 and Tofino's CRC32 compute.
func CRC32(data []byte) uint32 {
	return crc32.ChecksumIEEE(data)
}

// Of returns the bucket of mac for k buckets; k must be a power of two.
func Of(mac [6]byte, k int) (uint16, error) {
	if k <= 0 || k > 1<<16 || k&(k-1) != 0 {
		return 0, fmt.Errorf("bucket count %d: must be a power of two in [1, 65536]", k)
	}
	return uint16(CRC32(mac[:]) & uint32(k-1)), nil
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
