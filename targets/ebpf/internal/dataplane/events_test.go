package dataplane

import (
	"encoding/binary"
	"strings"
	"testing"
)

func TestDecodeEventRejectsBadRecords(t *testing.T) {
	hdr := func(kind uint16, frameLen uint32) []byte {
		b := make([]byte, eventHeaderLen)
		binary.LittleEndian.PutUint16(b[0:], kind)
		binary.LittleEndian.PutUint32(b[16:], frameLen)
		return b
	}
	cases := []struct {
		name string
		raw  []byte
		want string
	}{
		{"short record", make([]byte, eventHeaderLen-1), "event record of"},
		{"unknown kind", hdr(9, 0), "unknown event kind 9"},
		{"frame longer than record", append(hdr(sgwEventPacketIn, 64), make([]byte, 10)...), "claims 64 frame bytes"},
	}
	for _, c := range cases {
		if _, err := decodeEvent(c.raw); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want error containing %q", c.name, err, c.want)
		}
	}
}

func TestDecodeEvent(t *testing.T) {
	raw := make([]byte, eventHeaderLen)
	binary.LittleEndian.PutUint16(raw[0:], sgwEventDigest)
	binary.LittleEndian.PutUint16(raw[2:], 7)
	copy(raw[6:12], []byte{2, 0, 0, 0, 0, 9})
	copy(raw[12:16], []byte{10, 0, 0, 9})
	ev, err := decodeEvent(raw)
	if err != nil || ev.Kind != EventDigest || ev.Port != 7 || ev.SrcMAC != (MAC{2, 0, 0, 0, 0, 9}) || ev.SrcIP != (IPv4{10, 0, 0, 9}) {
		t.Fatalf("digest decoded as %+v, %v", ev, err)
	}
	raw = make([]byte, eventHeaderLen, eventHeaderLen+3)
	binary.LittleEndian.PutUint16(raw[0:], sgwEventPacketIn)
	binary.LittleEndian.PutUint16(raw[2:], 3)
	binary.LittleEndian.PutUint16(raw[4:], 2)
	binary.LittleEndian.PutUint32(raw[16:], 3)
	raw = append(raw, 0xaa, 0xbb, 0xcc)
	ev, err = decodeEvent(raw)
	if err != nil || ev.Kind != EventPacketIn || ev.IngressPort != 3 || ev.Reason != 2 || string(ev.Frame) != "\xaa\xbb\xcc" {
		t.Fatalf("packet-in decoded as %+v, %v", ev, err)
	}
}
