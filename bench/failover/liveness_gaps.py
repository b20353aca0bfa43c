"""How regularly each gateway's liveness frames reach the switch: the evidence that the signal
keeps its priority while the gateways are saturated (docs/pipeline-contract.md, "Gateway
liveness"; the sender: backends/supergw_gateway/liveness.py).

`python -m bench.failover.liveness_gaps SECONDS IFACE...` (root, run inside the switch's
namespace) listens on each of the switch's gateway-port interfaces for SECONDS and prints one
JSON object: per interface the frames seen and the gaps between consecutive ones (longest,
99th percentile, and how many exceeded a given threshold are the caller's to judge). Frames are
taken with the kernel's receive timestamp (SO_TIMESTAMPNS), so a busy machine delaying this
listener does not stretch a gap, through an ETH_P_ALL packet socket (which sees a frame before
the switch's tc program consumes it) with a classic BPF filter on the liveness ethertype (the
listener never sees the data traffic).
"""

from __future__ import annotations

import ctypes
import json
import select
import socket
import struct
import sys
import time
from dataclasses import dataclass, field

from supergw_proto.p4constants import ETHERTYPE_LIVENESS

_ETH_P_ALL = 0x0003
_SO_ATTACH_FILTER = 26
_SO_TIMESTAMPNS = 35
_SCM_TIMESTAMPNS = _SO_TIMESTAMPNS


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def attach_filter(s: socket.socket, ethertype: int) -> None:
    """Classic BPF on `s`: ldh [12]; jeq #ethertype, 0, 1; ret #65535; ret #0."""
    code = [(0x28, 0, 0, 12), (0x15, 0, 1, ethertype), (0x06, 0, 0, 0xFFFF), (0x06, 0, 0, 0)]
    raw = b"".join(struct.pack("HBBI", *c) for c in code)
    insns = (ctypes.c_char * len(raw)).from_buffer_copy(raw)  # alive until the kernel copied it
    fprog = _SockFprog(len(code), ctypes.addressof(insns))
    s.setsockopt(socket.SOL_SOCKET, _SO_ATTACH_FILTER, bytes(fprog))


@dataclass
class Gaps:
    frames: int = 0
    last_ns: int | None = None
    gaps_ns: list[int] = field(default_factory=list)

    def seen(self, ts_ns: int) -> None:
        if self.last_ns is not None:
            self.gaps_ns.append(ts_ns - self.last_ns)
        self.last_ns, self.frames = ts_ns, self.frames + 1

    def summary(self) -> dict[str, float | int | None]:
        g = sorted(self.gaps_ns)
        return {"frames": self.frames,
                "max_gap_ms": round(g[-1] / 1e6, 2) if g else None,
                "p99_gap_ms": round(g[min(len(g) - 1, int(len(g) * 0.99))] / 1e6, 2) if g else None,
                "median_gap_ms": round(g[len(g) // 2] / 1e6, 2) if g else None}


def listen(ifaces: list[str], seconds: float) -> dict[str, dict[str, float | int | None]]:
    socks: dict[int, tuple[str, socket.socket]] = {}
    for name in ifaces:
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(_ETH_P_ALL))
        attach_filter(s, ETHERTYPE_LIVENESS)
        s.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        s.bind((name, 0))
        socks[s.fileno()] = (name, s)
    gaps = {name: Gaps() for name in ifaces}
    end = time.monotonic() + seconds
    try:
        while (left := end - time.monotonic()) > 0:
            ready, _, _ = select.select(list(socks), [], [], left)
            for fd in ready:
                name, s = socks[fd]
                _data, anc, _flags, _addr = s.recvmsg(64, socket.CMSG_SPACE(16))
                for level, kind, value in anc:
                    if level == socket.SOL_SOCKET and kind == _SCM_TIMESTAMPNS:
                        sec, nsec = struct.unpack("qq", value[:16])
                        gaps[name].seen(sec * 1_000_000_000 + nsec)
    finally:
        for _, s in socks.values():
            s.close()
    return {name: g.summary() for name, g in gaps.items()}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 2:
        print("usage: python -m bench.failover.liveness_gaps SECONDS IFACE...", file=sys.stderr)
        return 2
    print(json.dumps(listen(args[1:], float(args[0]))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
