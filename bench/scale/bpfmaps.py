"""The eBPF switch's host maps read straight from bpffs (the `bpf()` system call), for the
learning measurement on the eBPF target.

A P4Runtime Read of 50,000 entries makes the switch's server build them under its write lock
(tens of milliseconds, during which the controller's writes wait): polling that way slowed
the very learning it measured. The pinned map (`<pin dir>/<device id>/sgw_host_ips`, the
data plane's own `host_ips`) is read with BPF_MAP_LOOKUP_BATCH instead: a few system calls
for the whole table, no lock of the switch's. Only keys are kept; the values are the hosts'
MACs, which the measurement does not need. Linux on x86-64 or arm64.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
from pathlib import Path

BPF_OBJ_GET = 7
BPF_MAP_LOOKUP_BATCH = 24
BATCH = 8192
_SYSCALL_BPF = {"x86_64": 321, "aarch64": 280}
_libc = ctypes.CDLL(None, use_errno=True)


class BpfError(OSError):
    pass


class _ObjGet(ctypes.Structure):
    _fields_ = [("pathname", ctypes.c_uint64), ("bpf_fd", ctypes.c_uint32), ("file_flags", ctypes.c_uint32)]


class _Batch(ctypes.Structure):
    _fields_ = [("in_batch", ctypes.c_uint64), ("out_batch", ctypes.c_uint64), ("keys", ctypes.c_uint64),
                ("values", ctypes.c_uint64), ("count", ctypes.c_uint32), ("map_fd", ctypes.c_uint32),
                ("elem_flags", ctypes.c_uint64), ("flags", ctypes.c_uint64)]


def _bpf(cmd: int, attr: ctypes.Structure) -> int:
    nr = _SYSCALL_BPF.get(platform.machine())
    if nr is None:
        raise BpfError(errno.ENOSYS, f"bpf(): no system call number known for {platform.machine()}")
    return int(_libc.syscall(nr, cmd, ctypes.byref(attr), ctypes.sizeof(attr)))


class PinnedMap:
    """One pinned hash map, `key_size` and `value_size` bytes per entry (as the C struct)."""

    def __init__(self, path: Path, key_size: int, value_size: int) -> None:
        name = ctypes.create_string_buffer(os.fsencode(path))
        attr = _ObjGet(pathname=ctypes.addressof(name))
        fd = _bpf(BPF_OBJ_GET, attr)
        if fd < 0:
            err = ctypes.get_errno()
            raise BpfError(err, f"{path}: {os.strerror(err)} (is the eBPF switch running with its maps pinned there?)")
        self.fd, self.path, self.key_size, self.value_size = fd, path, key_size, value_size

    def close(self) -> None:
        os.close(self.fd)

    def keys(self) -> list[bytes]:
        """Every key in the map now (one batch lookup per BATCH entries)."""
        keys = ctypes.create_string_buffer(BATCH * self.key_size)
        values = ctypes.create_string_buffer(BATCH * max(8, self.value_size))
        token_in, token_out = ctypes.c_uint64(0), ctypes.c_uint64(0)
        out: list[bytes] = []
        first = True
        while True:
            attr = _Batch(in_batch=0 if first else ctypes.addressof(token_in), out_batch=ctypes.addressof(token_out),
                          keys=ctypes.addressof(keys), values=ctypes.addressof(values), count=BATCH, map_fd=self.fd)
            rc = _bpf(BPF_MAP_LOOKUP_BATCH, attr)
            err = ctypes.get_errno() if rc < 0 else 0
            if rc < 0 and err != errno.ENOENT:
                raise BpfError(err, f"{self.path}: batch lookup: {os.strerror(err)}")
            raw = keys.raw[: attr.count * self.key_size]
            out += [raw[i : i + self.key_size] for i in range(0, len(raw), self.key_size)]
            if rc < 0:  # ENOENT: that was the last batch
                return out
            token_in.value, first = token_out.value, False
