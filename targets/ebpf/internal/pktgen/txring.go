package pktgen

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Ring geometry: 2048 slots of 2 KiB (any Ethernet frame without jumbo fits with its
// 32-byte tpacket2_hdr), in blocks of 64 KiB: 4 MiB mapped.
const (
	slotSize   = 2048
	blockSize  = 1 << 16
	ringBlocks = 64
	ringSlots  = ringBlocks * blockSize / slotSize
	// Data starts right after the header: TPACKET_ALIGN(sizeof(struct tpacket2_hdr)).
	dataOffset = (unix.SizeofTpacket2Hdr + unix.TPACKET_ALIGNMENT - 1) &^ (unix.TPACKET_ALIGNMENT - 1)
	// MaxFrame is the longest frame a slot holds.
	MaxFrame = slotSize - dataOffset
	// batch is how many frames one send() hands over at most: large enough that the
	// syscall costs little per frame, small enough that pacing stays even.
	batch = 256
	// burst is how many frames pacing may send back to back after a pause (as the
	// live-frame generator's token bucket).
	burst = 32
)

// TxRing is an AF_PACKET socket bound to one interface, with a TPACKET_V2 TX ring and
// PACKET_QDISC_BYPASS. Not safe for concurrent use.
type TxRing struct {
	fd      int
	ring    []byte
	next    int  // the next slot to fill
	offload bool // each slot starts with a virtio_net_hdr (PACKET_VNET_HDR)
}

// OpenTxRing opens the ring on ifindex in the calling thread's network namespace. With
// offload, UDP frames (over IPv4 or IPv6) leave as a host's stack hands them to a NIC or a
// veth: with their checksum to be completed by the device (CHECKSUM_PARTIAL, through a
// virtio_net_hdr with NEEDS_CSUM), so a receiver does not verify it in software. Without
// it an injected frame carries no checksum state, and the receiving veth's GRO verifies
// every UDP checksum that is not zero — IPv6's always (it is mandatory), IPv4's never when
// the frame carries none: a cost no NIC-fed or stack-fed switch port pays, and one that
// would set the two families apart.
func OpenTxRing(ifindex int, offload bool) (*TxRing, error) {
	// Protocol 0: the socket only sends; it never sees the interface's traffic.
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("AF_PACKET socket: %w (needs root and a kernel with CONFIG_PACKET)", err)
	}
	r := &TxRing{fd: fd, offload: offload}
	fail := func(what string, err error) (*TxRing, error) {
		r.Close()
		return nil, fmt.Errorf("AF_PACKET TX ring: %s: %w", what, err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V2); err != nil {
		return fail("PACKET_VERSION TPACKET_V2", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1); err != nil {
		return fail("PACKET_QDISC_BYPASS", err)
	}
	if offload { // before the ring: the kernel refuses it afterwards
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VNET_HDR, 1); err != nil {
			return fail("PACKET_VNET_HDR", err)
		}
	}
	req := unix.TpacketReq{Block_size: blockSize, Block_nr: ringBlocks, Frame_size: slotSize, Frame_nr: ringSlots}
	if err := unix.SetsockoptTpacketReq(fd, unix.SOL_PACKET, unix.PACKET_TX_RING, &req); err != nil {
		return fail("PACKET_TX_RING", err)
	}
	if r.ring, err = unix.Mmap(fd, 0, blockSize*ringBlocks, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		return fail("mmap", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: ifindex}); err != nil {
		return fail(fmt.Sprintf("bind to ifindex %d", ifindex), err)
	}
	return r, nil
}

// Close unmaps the ring and closes the socket.
func (r *TxRing) Close() {
	if r.ring != nil {
		_ = unix.Munmap(r.ring)
		r.ring = nil
	}
	if r.fd >= 0 {
		_ = unix.Close(r.fd)
		r.fd = -1
	}
}

func (r *TxRing) header(slot int) *unix.Tpacket2Hdr {
	return (*unix.Tpacket2Hdr)(unsafe.Pointer(&r.ring[slot*slotSize]))
}

func (r *TxRing) status(slot int) uint32 {
	return atomic.LoadUint32(&r.header(slot).Status)
}

// SendStats is what a Send did.
type SendStats struct {
	Sent    uint64        // frames the kernel took from the ring and passed to the interface
	Elapsed time.Duration // first frame handed over to the last
}

// SendOptions bound a Send: it stops at Duration or after Frames frames (0: no count),
// whichever comes first.
type SendOptions struct {
	Duration time.Duration
	Frames   uint64
	Rate     float64 // frames a second, evenly spaced; 0: as fast as the kernel takes them
}

// Send transmits frames round robin (frames[0], frames[1], ...) within o: as fast as the
// kernel takes them, or o.Rate frames a second (a token bucket, bursts of at most 32).
// Every frame must fit MaxFrame.
func (r *TxRing) Send(frames [][]byte, o SendOptions) (SendStats, error) {
	if len(frames) == 0 {
		return SendStats{}, errors.New("no frames to send")
	}
	if o.Duration <= 0 {
		return SendStats{}, fmt.Errorf("duration %v: want > 0", o.Duration)
	}
	limit := MaxFrame
	if r.offload {
		limit -= vnetHdrLen
	}
	for i, f := range frames {
		if len(f) < 14 || len(f) > limit {
			return SendStats{}, fmt.Errorf("frame %d: %d bytes, want 14..%d", i, len(f), limit)
		}
	}
	var vnet [][]byte
	if r.offload {
		vnet = make([][]byte, len(frames))
		for i, f := range frames {
			vnet[i] = vnetHeader(f)
		}
	}
	var (
		handed uint64
		next   int // the plan frame that goes next
		tokens = float64(burst)
		start  = time.Now()
		last   = start
	)
	for now := start; now.Sub(start) < o.Duration && (o.Frames == 0 || handed < o.Frames); now = time.Now() {
		want := batch
		if o.Rate > 0 {
			tokens = min(tokens+now.Sub(last).Seconds()*o.Rate, burst)
			last = now
			if tokens < 1 {
				time.Sleep(time.Duration((1 - tokens) / o.Rate * float64(time.Second)))
				continue
			}
			want = int(tokens)
		}
		if o.Frames > 0 {
			want = int(min(uint64(want), o.Frames-handed))
		}
		n, err := r.fill(frames, vnet, &next, want)
		if err != nil {
			return SendStats{}, err
		}
		tokens -= float64(n)
		handed += uint64(n)
		if err := r.flush(); err != nil {
			return SendStats{}, err
		}
		if n == 0 {
			// Every slot is still with the kernel (the receiver's queue is full): let it drain.
			time.Sleep(20 * time.Microsecond)
		}
	}
	elapsed := time.Since(start)
	left, err := r.drain(time.Second)
	if err != nil {
		return SendStats{}, err
	}
	return SendStats{Sent: handed - left, Elapsed: elapsed}, nil
}

// fill writes up to want frames (each behind its vnet header, with offload) into free slots
// and marks them for sending.
func (r *TxRing) fill(frames, vnet [][]byte, next *int, want int) (int, error) {
	n := 0
	for ; n < want; n++ {
		st := r.status(r.next)
		if st&unix.TP_STATUS_WRONG_FORMAT != 0 {
			return n, fmt.Errorf("AF_PACKET TX ring: the kernel refused frame of slot %d as malformed", r.next)
		}
		if st&(unix.TP_STATUS_SEND_REQUEST|unix.TP_STATUS_SENDING) != 0 {
			break
		}
		f := frames[*next]
		at := r.next*slotSize + dataOffset
		if vnet != nil {
			at += copy(r.ring[at:], vnet[*next])
		}
		*next = (*next + 1) % len(frames)
		copy(r.ring[at:], f)
		h := r.header(r.next)
		h.Len = uint32(at - r.next*slotSize - dataOffset + len(f))
		atomic.StoreUint32(&h.Status, unix.TP_STATUS_SEND_REQUEST)
		r.next = (r.next + 1) % ringSlots
	}
	return n, nil
}

// flush asks the kernel to send every slot marked for sending, without waiting for
// the frames to leave.
func (r *TxRing) flush() error {
	err := unix.Sendto(r.fd, nil, unix.MSG_DONTWAIT, nil)
	switch {
	case err == nil, errors.Is(err, unix.EAGAIN), errors.Is(err, unix.ENOBUFS):
		// ENOBUFS: the receiving end dropped a frame (its queue was full); the rest of
		// the batch stays marked and goes with the next send.
		return nil
	}
	return fmt.Errorf("AF_PACKET TX ring: send: %w", err)
}

// drain flushes until no slot waits to be sent or the timeout passes, and returns
// how many slots still wait (frames that were never sent).
func (r *TxRing) drain(timeout time.Duration) (uint64, error) {
	for deadline := time.Now().Add(timeout); ; {
		if err := r.flush(); err != nil {
			return 0, err
		}
		var waiting uint64
		for s := 0; s < ringSlots; s++ {
			if r.status(s)&unix.TP_STATUS_SEND_REQUEST != 0 {
				waiting++
			}
		}
		if waiting == 0 || time.Now().After(deadline) {
			return waiting, nil
		}
		time.Sleep(time.Millisecond)
	}
}

// vnetHdrLen is the size of struct virtio_net_hdr.
const vnetHdrLen = 10

// vnetHeader is the virtio_net_hdr of frame (little endian, as packet sockets read it on
// the hosts we run on): NEEDS_CSUM at the UDP checksum of an IPv4 or IPv6 UDP frame, no
// flags for anything else.
func vnetHeader(f []byte) []byte {
	h := make([]byte, vnetHdrLen)
	start := 0
	switch {
	case len(f) >= 14+20+8 && f[12] == 0x08 && f[13] == 0x00 && f[14]>>4 == 4 && f[23] == 17:
		start = 14 + int(f[14]&0x0f)*4
	case len(f) >= 14+40+8 && f[12] == 0x86 && f[13] == 0xdd && f[20] == 17:
		start = 14 + 40
	}
	if start == 0 || start+8 > len(f) {
		return h
	}
	h[0] = 1 // VIRTIO_NET_HDR_F_NEEDS_CSUM
	binary.LittleEndian.PutUint16(h[6:], uint16(start))
	binary.LittleEndian.PutUint16(h[8:], 6) // the UDP checksum's offset in its header
	return h
}
