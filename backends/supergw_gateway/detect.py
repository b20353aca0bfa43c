"""Which ESP backend can this gateway use? Ask the kernel, don't guess."""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from supergw_gateway.config import Backend
from supergw_gateway.executor import Executor

# A throwaway SA between two TEST-NET addresses: added then deleted at once.
_SRC, _DST = "192.0.2.254", "192.0.2.253"


@dataclass(frozen=True)
class Detection:
    kernel_esp: bool
    detail: str


def probe_kernel_esp(ex: Executor) -> Detection:
    """Try to create a kernel ESP state (AES-GCM, as our default proposal needs)."""
    spi = f"0x{secrets.randbits(31) | 0x40000000:08x}"
    key = "0x" + secrets.token_hex(20)
    add = ["ip", "xfrm", "state", "add", "src", _SRC, "dst", _DST, "proto", "esp", "spi", spi,
           "reqid", "1", "mode", "tunnel", "aead", "rfc4106(gcm(aes))", key, "128"]
    res = ex.run(add, check=False)
    if res.returncode != 0:
        return Detection(False, f"kernel refused an ESP state in {ex.where}: {res.stderr.strip() or res.stdout.strip()}")
    ex.run(["ip", "xfrm", "state", "delete", "src", _SRC, "dst", _DST, "proto", "esp", "spi", spi], check=False)
    return Detection(True, f"kernel ESP state created and deleted in {ex.where}")


def choose_backend(requested: Backend, ex: Executor) -> tuple[Backend, Detection]:
    """`auto` picks XFRM when the kernel can hold ESP states, else kernel-libipsec."""
    det = probe_kernel_esp(ex)
    if requested is Backend.AUTO:
        return (Backend.XFRM if det.kernel_esp else Backend.LIBIPSEC), det
    return requested, det
