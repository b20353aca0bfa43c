// Package bucket is the Go copy of the pipeline's bucket math
// (docs/pipeline-contract.md, "Terms"): bucket(mac) = crc16_arc(mac) & (K-1),
// vmac(b) = vmac_base | b. Tested against p4src/vectors/bucket-crc16.json.
package bucket

import "fmt"

// CRC16ARC is CRC-16/ARC: poly 0x8005 reflected (0xA001), init 0, no final xor.
func CRC16ARC(data []byte) uint16 {
	var crc uint16
	for _, b := range data {
		crc ^= uint16(b)
		for range 8 {
			if crc&1 != 0 {
				crc = crc>>1 ^ 0xA001
			} else {
				crc >>= 1
			}
		}
	}
	return crc
}

// Of returns the bucket of mac for k buckets; k must be a power of two.
func Of(mac [6]byte, k int) (uint16, error) {
	if k <= 0 || k > 1<<16 || k&(k-1) != 0 {
		return 0, fmt.Errorf("bucket count %d: must be a power of two in [1, 65536]", k)
	}
	return CRC16ARC(mac[:]) & uint16(k-1), nil
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
