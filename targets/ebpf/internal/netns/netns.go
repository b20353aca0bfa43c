// Package netns runs code inside a named network namespace (/run/netns/NAME).
package netns

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Do runs f with the calling thread in /run/netns/name, then returns the thread to the
// namespace it was in. The caller must hold its OS thread (runtime.LockOSThread):
// namespaces belong to threads, not to goroutines.
func Do(name string, f func() error) error {
	orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(orig)
	target, err := unix.Open("/run/netns/"+name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("namespace %s: %w", name, err)
	}
	defer unix.Close(target)
	if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("enter %s: %w", name, err)
	}
	ferr := f()
	if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
		// This thread is stuck in the wrong namespace: nothing after this may run on it.
		panic("netns: cannot return from namespace " + name + ": " + err.Error())
	}
	return ferr
}
