package dataplane

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// pinDir is a per-device directory on bpffs, held with flock so that a second
// instance of the same device id fails instead of clobbering the first one.
type pinDir struct {
	path string
	dir  *os.File
}

func lockPinDir(path string) (*pinDir, error) {
	if err := ensureBPFFS(filepath.Dir(path)); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(path, 0o700); err != nil {
		return nil, fmt.Errorf("create pin directory: %w", err)
	}
	dir, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open pin directory: %w", err)
	}
	if err := unix.Flock(int(dir.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		dir.Close()
		return nil, fmt.Errorf("pin directory %s is in use by another switch instance: %w", path, err)
	}
	// What an earlier instance left is Open's to adopt or remove.
	return &pinDir{path: path, dir: dir}, nil
}

// bpffsMount is where bpffs normally lives and where ensureBPFFS may mount it.
const bpffsMount = "/sys/fs/bpf"

// ensureBPFFS checks that dir will be on a bpffs. When the nearest existing
// ancestor is not, and dir is under /sys/fs/bpf, it mounts bpffs there as
// iproute2 does: `ip netns exec` remounts /sys, which hides /sys/fs/bpf.
func ensureBPFFS(dir string) error {
	dir = filepath.Clean(dir)
	probe := dir
	for {
		var st unix.Statfs_t
		err := unix.Statfs(probe, &st)
		if err == nil {
			if st.Type == unix.BPF_FS_MAGIC {
				return nil
			}
			break
		}
		if !errors.Is(err, unix.ENOENT) || probe == "/" {
			return fmt.Errorf("pin directory %s: %w", dir, err)
		}
		probe = filepath.Dir(probe)
	}
	if dir != bpffsMount && !strings.HasPrefix(dir, bpffsMount+"/") {
		return fmt.Errorf("pin directory %s is not on a bpffs (mount one: mount -t bpf bpf <dir>)", dir)
	}
	if err := os.MkdirAll(bpffsMount, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", bpffsMount, err)
	}
	if err := unix.Mount("bpf", bpffsMount, "bpf", 0, "mode=0700"); err != nil {
		return fmt.Errorf("%s is not a bpffs and mounting one failed: %w", bpffsMount, err)
	}
	return nil
}

// removeAll removes every pin in the directory (maps stay alive while open).
func (p *pinDir) removeAll() error {
	entries, err := os.ReadDir(p.path)
	if err != nil {
		return fmt.Errorf("read pin directory: %w", err)
	}
	var errs []error
	for _, ent := range entries {
		if err := os.RemoveAll(filepath.Join(p.path, ent.Name())); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// unlock releases the directory for the next instance, leaving its pins.
func (p *pinDir) unlock() {
	p.dir.Close()
}

func (p *pinDir) unlockAndRemove() error {
	err := os.Remove(p.path)
	p.dir.Close()
	if err != nil {
		return fmt.Errorf("remove pin directory: %w", err)
	}
	// The per-project parent goes too when this was its last device.
	_ = os.Remove(filepath.Dir(p.path))
	return nil
}
