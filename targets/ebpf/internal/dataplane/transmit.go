package dataplane

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// transmitter sends packet-outs: one AF_PACKET socket per front port, bound to
// its interface with protocol 0 so that it never receives.
type transmitter struct {
	fds map[uint16]int
}

const (
	minFrame = 14
	maxFrame = 65535
)

func newTransmitter(ifindex map[uint16]int) (*transmitter, error) {
	t := &transmitter{fds: map[uint16]int{}}
	for port, idx := range ifindex {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.close()
			return nil, fmt.Errorf("packet socket for port %d: %w", port, err)
		}
		t.fds[port] = fd
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: idx}); err != nil {
			t.close()
			return nil, fmt.Errorf("bind packet socket to port %d (ifindex %d): %w", port, idx, err)
		}
	}
	return t, nil
}

func (t *transmitter) send(port uint16, frame []byte) error {
	fd, ok := t.fds[port]
	if !ok {
		return fmt.Errorf("transmit on port %d: no such port", port)
	}
	if len(frame) < minFrame || len(frame) > maxFrame {
		return fmt.Errorf("transmit on port %d: frame of %d bytes, want %d..%d", port, len(frame), minFrame, maxFrame)
	}
	n, err := unix.Write(fd, frame)
	if err != nil {
		return fmt.Errorf("transmit on port %d: %w", port, err)
	}
	if n != len(frame) {
		return fmt.Errorf("transmit on port %d: sent %d of %d bytes", port, n, len(frame))
	}
	return nil
}

func (t *transmitter) close() error {
	var errs []error
	for port, fd := range t.fds {
		if err := unix.Close(fd); err != nil {
			errs = append(errs, fmt.Errorf("close packet socket of port %d: %w", port, err))
		}
	}
	t.fds = nil
	return errors.Join(errs...)
}
