package p4rt

import (
	"encoding/binary"
	"math/bits"
)

// canonical returns the shortest big-endian representation of a P4Runtime
// bytestring (spec section 8.4: leading zero bytes stripped, zero is one 0x00).
func canonical(b []byte) []byte {
	i := 0
	for i < len(b)-1 && b[i] == 0 {
		i++
	}
	out := make([]byte, len(b)-i)
	copy(out, b[i:])
	return out
}

// bitLen is the number of significant bits of a big-endian bytestring.
func bitLen(b []byte) int {
	c := canonical(b)
	if len(c) == 0 {
		return 0
	}
	return (len(c)-1)*8 + bits.Len8(c[0])
}

// fits reports whether b holds a value representable in bitwidth bits.
func fits(b []byte, bitwidth int32) bool { return bitLen(b) <= int(bitwidth) }

// toUint interprets a bytestring of at most 8 significant bytes.
func toUint(b []byte) uint64 {
	c := canonical(b)
	var buf [8]byte
	if len(c) > 8 {
		c = c[len(c)-8:]
	}
	copy(buf[8-len(c):], c)
	return binary.BigEndian.Uint64(buf[:])
}

// fromUint returns the canonical bytestring of v.
func fromUint(v uint64) []byte {
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], v)
	return canonical(buf[:])
}

// rightAlign copies the canonical value of b into the last bytes of out
// (network order), used for MACs and IPv4 addresses.
func rightAlign(b []byte, out []byte) {
	c := canonical(b)
	clear(out)
	if len(c) > len(out) {
		c = c[len(c)-len(out):]
	}
	copy(out[len(out)-len(c):], c)
}
