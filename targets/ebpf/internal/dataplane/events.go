package dataplane

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"github.com/cilium/ebpf/ringbuf"
)

// Values of struct sgw_event.kind (bpf/supergw_maps.h).
const (
	sgwEventDigest    = 1
	sgwEventPacketIn  = 2
	sgwEventDigestIP6 = 3
)

var (
	eventHeaderLen = int(unsafe.Sizeof(bpfSgwEvent{}))
	eventSrcIP6Off = int(unsafe.Offsetof(bpfSgwEvent{}.SrcIp6))
)

func (e *EBPF) readEvents() {
	defer e.readerWG.Done()
	defer close(e.events)
	for {
		rec, err := e.reader.Read()
		if err != nil {
			if errors.Is(err, ringbuf.ErrClosed) {
				return
			}
			continue
		}
		ev, err := decodeEvent(rec.RawSample)
		if err != nil {
			continue
		}
		select {
		case e.events <- ev:
		case <-e.done:
			// Close is running and nobody reads Events any more.
			return
		}
	}
}

// decodeEvent parses one struct sgw_event record (host byte order, except the
// network-order src_ip) and the frame bytes that follow a packet-in.
func decodeEvent(raw []byte) (Event, error) {
	if len(raw) < eventHeaderLen {
		return Event{}, fmt.Errorf("event record of %d bytes, want >= %d", len(raw), eventHeaderLen)
	}
	le := binary.LittleEndian
	kind := le.Uint16(raw[0:])
	port := le.Uint16(raw[2:])
	switch kind {
	case sgwEventDigest:
		ev := Event{Kind: EventDigest, Port: port}
		copy(ev.SrcMAC[:], raw[6:12])
		copy(ev.SrcIP[:], raw[12:16])
		return ev, nil
	case sgwEventDigestIP6:
		ev := Event{Kind: EventDigestIP6, Port: port}
		copy(ev.SrcMAC[:], raw[6:12])
		copy(ev.SrcIP6[:], raw[eventSrcIP6Off:eventSrcIP6Off+16])
		return ev, nil
	case sgwEventPacketIn:
		n := int(le.Uint32(raw[16:]))
		if n > len(raw)-eventHeaderLen {
			return Event{}, fmt.Errorf("packet-in claims %d frame bytes, record holds %d", n, len(raw)-eventHeaderLen)
		}
		frame := make([]byte, n)
		copy(frame, raw[eventHeaderLen:])
		return Event{Kind: EventPacketIn, IngressPort: port, Reason: le.Uint16(raw[4:]), Frame: frame}, nil
	default:
		return Event{}, fmt.Errorf("unknown event kind %d", kind)
	}
}
