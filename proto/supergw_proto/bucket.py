"""Bucket math of the dispatcher: the one Python implementation of `bucket(mac)` and `vmac(b)`.

The data plane computes ``bucket(mac) = hash(mac) & (K - 1)`` with the hash the settings
name (`BucketHash`, param ``bucket_hash`` of ``set_dispatch_config``):

- ``CRC32`` (the default): the standard CRC-32 (IEEE 802.3, as ``zlib.crc32``: v1model
  ``hash(HashAlgorithm.crc32, 0, {mac}, 65536)`` on BMv2, TNA's ``HashAlgorithm_t.CRC32``,
  the same CRC in eBPF);
- ``IDENTITY``: the MAC's low 16 bits, so ``bucket = mac & (K - 1)`` (the clustering
  paper's ``h(m) = base | (m % K)``);

and answers ARP for the gateway IP with ``vmac(bucket(mac)) = vmac_base | bucket``.
The outside switch of remote access buckets a client by its outer IPv4 address the same
way, ``client_bucket(ip) = client_hash(ip) & (K - 1)`` with the same two hashes over the 4
address bytes (`client_hash`; vectors `p4src/vectors/client-crc32.json` and
`client-identity.json`).
`p4src/vectors/bucket-crc32.json` and `bucket-identity.json` (computed by real BMv2) pin
all of it; see docs/pipeline-contract.md for the definitions. In configuration files a
hash is named in lower case (``crc32``, ``identity``): `BucketHashName`.

MACs are as `supergw_proto.addresses` takes and gives them.
"""

from __future__ import annotations

import ipaddress
import zlib
from typing import Annotated, Final

from pydantic import BeforeValidator, PlainSerializer, WithJsonSchema

from supergw_proto.addresses import MacLike, int_to_mac, ipv4_to_int, mac_to_bytes, mac_to_int, mac_to_str
from supergw_proto.p4constants import MAX_BUCKETS, BucketHash

_VMAC_BUCKET_BITS = 16
_VMAC_BUCKET_MASK = (1 << _VMAC_BUCKET_BITS) - 1
# Both hashes give 16 bits; the bucket is their low log2(K) bits (K <= MAX_BUCKETS <= 65536).
_HASH_MASK = 0xFFFF


def hash_name(bucket_hash: BucketHash) -> str:
    """The name of a hash in configuration files: ``crc32``, ``identity``."""
    return bucket_hash.name.lower()


HASH_NAMES: Final[tuple[str, ...]] = tuple(hash_name(h) for h in BucketHash)


def parse_hash(value: object) -> BucketHash:
    """`value` as a `BucketHash`: a member, or its configuration name; ValueError otherwise."""
    if isinstance(value, BucketHash):
        return value
    if isinstance(value, str) and value in HASH_NAMES:
        return BucketHash[value.upper()]
    raise ValueError(f"unknown bucket hash {value!r}: use one of {', '.join(HASH_NAMES)}")


# A pydantic field type: read as a name ("identity"), written back as the name.
BucketHashName = Annotated[
    BucketHash,
    BeforeValidator(parse_hash),
    PlainSerializer(hash_name, return_type=str),
    WithJsonSchema({"type": "string", "enum": list(HASH_NAMES)}),
]


def crc32(data: bytes) -> int:
    """CRC-32/ISO-HDLC (IEEE 802.3: poly 0x04C11DB7 reflected, init and final xor 0xFFFFFFFF)."""
    return zlib.crc32(data)


def check_k(k: int) -> int:
    """Return ``k`` if it is a valid bucket count (a power of two, 1..MAX_BUCKETS)."""
    if isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"bucket count must be an int, not {type(k).__name__}")
    if k < 1 or k > MAX_BUCKETS or k & (k - 1):
        raise ValueError(f"bucket count must be a power of two in 1..{MAX_BUCKETS}, got {k}")
    return k


def bucket_mask(k: int) -> int:
    """The ``bucket_mask`` parameter of ``set_dispatch_config`` for ``k`` buckets."""
    return check_k(k) - 1


def host_hash(mac: MacLike, bucket_hash: BucketHash = BucketHash.CRC32) -> int:
    """The 16 bits the data plane masks with ``K - 1`` to get ``mac``'s bucket."""
    bucket_hash = _check_hash(bucket_hash)
    if bucket_hash is BucketHash.IDENTITY:
        return mac_to_int(mac) & _HASH_MASK
    return crc32(mac_to_bytes(mac)) & _HASH_MASK


def bucket_of(mac: MacLike, k: int, bucket_hash: BucketHash = BucketHash.CRC32) -> int:
    """The bucket the data plane puts ``mac`` in when it runs with ``k`` buckets and
    ``bucket_hash`` (the settings' ``bucket_hash``; CRC-32 unless configured otherwise)."""
    return host_hash(mac, bucket_hash) & bucket_mask(k)


IPv4Like = str | int | ipaddress.IPv4Address


def client_hash(address: IPv4Like, bucket_hash: BucketHash = BucketHash.CRC32) -> int:
    """The 16 bits the outside switch masks with ``K - 1`` to get the bucket of a remote
    client's outer IPv4 ``address``: the CRC-32 of its 4 bytes in network order
    (``CRC32``), or its low 16 bits (``IDENTITY``)."""
    bucket_hash = _check_hash(bucket_hash)
    if isinstance(address, bool) or not isinstance(address, str | int | ipaddress.IPv4Address):
        raise TypeError(f"client address must be an IPv4 address, not {type(address).__name__}")
    value = ipv4_to_int(address)
    if not 0 <= value <= 0xFFFFFFFF:
        raise ValueError(f"client address must be a 32-bit IPv4 address, got {value}")
    if bucket_hash is BucketHash.IDENTITY:
        return value & _HASH_MASK
    return crc32(value.to_bytes(4, "big")) & _HASH_MASK


def client_bucket_of(address: IPv4Like, k: int, bucket_hash: BucketHash = BucketHash.CRC32) -> int:
    """The bucket the outside switch sends a new client from ``address`` to (IKE_SA_INIT and
    other unpinned traffic to the public address), with ``k`` buckets and ``bucket_hash``."""
    return client_hash(address, bucket_hash) & bucket_mask(k)


def _check_hash(bucket_hash: object) -> BucketHash:
    if not isinstance(bucket_hash, BucketHash):
        raise TypeError(f"bucket_hash must be a BucketHash, not {type(bucket_hash).__name__}")
    return bucket_hash


def check_vmac_base(base: MacLike) -> int:
    """Return ``base`` as an int if it is a usable vmac base, else raise ValueError.

    It must be a locally administered unicast MAC with its low 16 bits zero, so that
    ``base | bucket`` never carries into the fixed part for any K <= 65536.
    """
    value = mac_to_int(base)
    first_octet = value >> 40
    if first_octet & 0x01:
        raise ValueError(f"vmac base must be unicast (I/G bit clear): {mac_to_str(base)}")
    if not first_octet & 0x02:
        raise ValueError(f"vmac base must be locally administered (U/L bit set): {mac_to_str(base)}")
    if value & _VMAC_BUCKET_MASK:
        raise ValueError(f"vmac base must have its low 16 bits zero: {mac_to_str(base)}")
    return value


def vmac(base: MacLike, bucket: int) -> str:
    """The virtual MAC of ``bucket``: ``base | bucket``."""
    base_value = check_vmac_base(base)
    if isinstance(bucket, bool) or not isinstance(bucket, int):
        raise TypeError(f"bucket must be an int, not {type(bucket).__name__}")
    if not 0 <= bucket < MAX_BUCKETS:
        raise ValueError(f"bucket must be in 0..{MAX_BUCKETS - 1}, got {bucket}")
    return int_to_mac(base_value | bucket)


def bucket_of_vmac(mac: MacLike, base: MacLike, k: int) -> int | None:
    """The bucket ``mac`` addresses if it is a vmac of ``base`` with ``k`` buckets, else None.

    Mirrors the data plane: ``mac & ~0xffff == base`` and ``mac & 0xffff <= k - 1``.
    """
    value = mac_to_int(mac)
    if value & ~_VMAC_BUCKET_MASK != check_vmac_base(base):
        return None
    low = value & _VMAC_BUCKET_MASK
    return low if low <= bucket_mask(k) else None


def is_vmac(mac: MacLike, base: MacLike, k: int) -> bool:
    return bucket_of_vmac(mac, base, k) is not None
