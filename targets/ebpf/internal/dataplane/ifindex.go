package dataplane

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Ifindex is the index of interface name in the calling thread's network
// namespace. It asks the kernel (SIOCGIFINDEX on a socket made in that
// namespace): /sys shows the namespace that mounted it, not the thread's.
func Ifindex(name string) (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return 0, err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFINDEX, ifr); err != nil {
		return 0, fmt.Errorf("ifindex of %s: %w", name, err)
	}
	return int(ifr.Uint32()), nil
}
