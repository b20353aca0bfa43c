"""When a secret file changed: the stamp both token-file watchers compare (REST tokens in
`api.auth`, heartbeat keys in `heartbeat_keys`)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

# What identifies one version of a file: (device, inode, mtime ns, size), or why stat failed.
Stamp = tuple[int, int, int, int] | str


def stamp(path: Path) -> Stamp:
    try:
        st = os.stat(path)
    except OSError as exc:
        return exc.strerror or str(exc)
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)


def stamps(paths: Iterable[Path]) -> tuple[Stamp, ...]:
    return tuple(stamp(p) for p in paths)
