package sim

import (
	"fmt"
	"net"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mmsghdr is struct mmsghdr (x/sys has sendmmsg's number but not the struct).
type mmsghdr struct {
	hdr unix.Msghdr
	len uint32
	_   [4]byte
}

// PacketLink is an interface's AF_PACKET sockets: one that only sends (protocol 0, so the kernel
// queues nothing to it) and one that receives everything but our own frames.
type PacketLink struct {
	tx, rx  int
	txMsgs  []mmsghdr
	txIovs  []unix.Iovec
	rxMsgs  []mmsghdr
	rxIovs  []unix.Iovec
	ifindex int
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// OpenPacketLink opens the sockets on iface; Recv returns after at most timeout without frames.
func OpenPacketLink(iface string, timeout time.Duration) (*PacketLink, error) {
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return nil, fmt.Errorf("interface %s: %w", iface, err)
	}
	l := &PacketLink{tx: -1, rx: -1, ifindex: ifi.Index}
	fail := func(what string, err error) (*PacketLink, error) {
		l.Close()
		return nil, fmt.Errorf("%s on %s: %w (supergw-hostsim needs root: AF_PACKET)", what, iface, err)
	}
	if l.tx, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0); err != nil {
		return fail("AF_PACKET socket", err)
	}
	if err = unix.Bind(l.tx, &unix.SockaddrLinklayer{Protocol: 0, Ifindex: ifi.Index}); err != nil {
		return fail("bind", err)
	}
	// The veth has no qdisc to bypass but the generic path's per-packet work; frames are sent as built.
	_ = unix.SetsockoptInt(l.tx, unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1)
	_ = unix.SetsockoptInt(l.tx, unix.SOL_SOCKET, unix.SO_SNDBUF, 4<<20)
	proto := htons(unix.ETH_P_ALL)
	if l.rx, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(proto)); err != nil {
		return fail("AF_PACKET socket", err)
	}
	if err = unix.Bind(l.rx, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: ifi.Index}); err != nil {
		return fail("bind", err)
	}
	if err = unix.SetsockoptInt(l.rx, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1); err != nil {
		return fail("PACKET_IGNORE_OUTGOING", err)
	}
	_ = unix.SetsockoptInt(l.rx, unix.SOL_SOCKET, unix.SO_RCVBUF, 8<<20)
	mreq := unix.PacketMreq{Ifindex: int32(ifi.Index), Type: unix.PACKET_MR_PROMISC}
	if err = unix.SetsockoptPacketMreq(l.rx, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mreq); err != nil {
		return fail("promiscuous mode", err)
	}
	tv := unix.NsecToTimeval(timeout.Nanoseconds())
	if err = unix.SetsockoptTimeval(l.rx, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return fail("SO_RCVTIMEO", err)
	}
	return l, nil
}

func (l *PacketLink) Close() error {
	for _, fd := range []int{l.tx, l.rx} {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
	l.tx, l.rx = -1, -1
	return nil
}

func fill(msgs *[]mmsghdr, iovs *[]unix.Iovec, bufs [][]byte, full bool) {
	if cap(*msgs) < len(bufs) {
		*msgs = make([]mmsghdr, len(bufs))
		*iovs = make([]unix.Iovec, len(bufs))
	}
	*msgs, *iovs = (*msgs)[:len(bufs)], (*iovs)[:len(bufs)]
	for i, b := range bufs {
		n := len(b)
		if full {
			n = cap(b)
			b = b[:n]
		}
		(*iovs)[i].Base = &b[0]
		(*iovs)[i].SetLen(n)
		(*msgs)[i] = mmsghdr{}
		(*msgs)[i].hdr.Iov = &(*iovs)[i]
		(*msgs)[i].hdr.SetIovlen(1)
	}
}

// Send writes the frames with one sendmmsg per call (retried for the rest after a partial send).
func (l *PacketLink) Send(frames [][]byte) (int, error) {
	done := 0
	for done < len(frames) {
		fill(&l.txMsgs, &l.txIovs, frames[done:], false)
		n, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(l.tx), uintptr(unsafe.Pointer(&l.txMsgs[0])),
			uintptr(len(l.txMsgs)), 0, 0, 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return done, fmt.Errorf("sendmmsg: %w", errno)
		}
		if n == 0 {
			return done, fmt.Errorf("sendmmsg sent nothing")
		}
		done += int(n)
	}
	return done, nil
}

// Recv waits for at least one frame (or the timeout) and returns every frame already queued, up to len(bufs).
func (l *PacketLink) Recv(bufs [][]byte, lens []int) (int, error) {
	fill(&l.rxMsgs, &l.rxIovs, bufs, true)
	for {
		n, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(l.rx), uintptr(unsafe.Pointer(&l.rxMsgs[0])),
			uintptr(len(l.rxMsgs)), unix.MSG_WAITFORONE, 0, 0)
		switch errno {
		case 0:
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return 0, nil
		default:
			return 0, fmt.Errorf("recvmmsg: %w", errno)
		}
		for i := 0; i < int(n); i++ {
			lens[i] = int(l.rxMsgs[i].len)
			if lens[i] > len(bufs[i]) { // truncated: longer than any frame we handle
				lens[i] = len(bufs[i])
			}
		}
		return int(n), nil
	}
}

func monotonicNow() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}
