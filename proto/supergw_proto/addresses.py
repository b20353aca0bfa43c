"""MAC and IPv4 address helpers: the one implementation every supergw package uses.

MACs are accepted as ``"aa:bb:cc:dd:ee:ff"`` (case-insensitive) or as 6 raw bytes and
returned as lower-case colon strings; `normalise_mac` also takes ``aa-bb-...`` (config files).
"""

from __future__ import annotations

import ipaddress
import re

MacLike = str | bytes

_MAC_RE = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$")
_HEX_MAC_RE = re.compile(r"[0-9a-fA-F]{2}(?::[0-9a-fA-F]{2}){5}")


def mac_to_bytes(mac: MacLike) -> bytes:
    """Six bytes in network order; raises ValueError for anything that is not a MAC."""
    if isinstance(mac, bytes | bytearray):
        if len(mac) != 6:
            raise ValueError(f"a MAC has 6 bytes, got {len(mac)}")
        return bytes(mac)
    if not isinstance(mac, str):
        raise TypeError(f"MAC must be str or bytes, not {type(mac).__name__}")
    if _HEX_MAC_RE.fullmatch(mac):  # the common case, ten times faster than parsing each part
        return bytes.fromhex(mac.replace(":", ""))
    parts = mac.split(":")
    if len(parts) != 6 or any(len(p) != 2 for p in parts):
        raise ValueError(f"not a MAC address (want aa:bb:cc:dd:ee:ff): {mac!r}")
    try:
        return bytes(int(p, 16) for p in parts)
    except ValueError:
        raise ValueError(f"not a MAC address (bad hex digit): {mac!r}") from None


def mac_to_str(mac: MacLike) -> str:
    """Canonical lower-case ``aa:bb:cc:dd:ee:ff`` form."""
    return ":".join(f"{b:02x}" for b in mac_to_bytes(mac))


def mac_to_int(mac: MacLike) -> int:
    return int.from_bytes(mac_to_bytes(mac), "big")


def int_to_mac(value: int) -> str:
    if not 0 <= value < 1 << 48:
        raise ValueError(f"MAC value out of range: {value:#x}")
    return "%02x:%02x:%02x:%02x:%02x:%02x" % tuple(value.to_bytes(6, "big"))


def normalise_mac(value: object) -> str:
    """Accept ``aa:bb:cc:dd:ee:ff`` or ``aa-bb-...`` in any case; return lower-case colon form."""
    if not isinstance(value, str):
        raise ValueError("must be a MAC address string like '02:00:00:00:00:01'")
    mac = value.strip().lower().replace("-", ":")
    if not _MAC_RE.match(mac):
        raise ValueError(f"{value!r} is not a MAC address (expected six hex bytes like '02:00:00:00:00:01')")
    return mac


def mac_offset(base: MacLike, n: int) -> str:
    """The MAC ``n`` addresses after ``base`` (sequential host MACs)."""
    return int_to_mac(mac_to_int(base) + n)


def ipv4_to_int(ip: str | int | ipaddress.IPv4Address) -> int:
    return ip if isinstance(ip, int) else int(ipaddress.IPv4Address(ip))


def int_to_ipv4(value: int) -> str:
    if not 0 <= value < 1 << 32:
        raise ValueError(f"IPv4 value out of range: {value:#x}")
    return "%d.%d.%d.%d" % tuple(value.to_bytes(4, "big"))
