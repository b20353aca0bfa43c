"""TNA's bucket hash is the standard CRC-32 over the 6 MAC bytes, like BMv2's and the controller's.

The TNA program computes `Hash<bit<32>>(HashAlgorithm_t.CRC32).get({ host_mac })` and takes
its low 16 bits. bf-p4c maps HashAlgorithm_t.CRC32 to the algorithm "crc_32" (bf-p4c
mau/hash_function.cpp), which Intel's bf-utils dynamic_hash defines as polynomial
0x04C11DB7, reversed (reflected input and output), init 0xFFFFFFFF, final xor 0xFFFFFFFF —
the Rocksoft parameters of CRC-32 (IEEE 802.3, zlib's crc32). The hash unit consumes the
field list in wire order, so a bit<48> MAC is its 6 bytes, first octet first. This test runs
those parameters through an independent, bit-by-bit Rocksoft CRC model (not zlib) and
checks it against the catalogue check value, the BMv2 vectors in
p4src/vectors/bucket-crc32.json and the controller's function. What it cannot check here is
the Tofino hash unit itself (no hardware or model): that is the "bucket move" step of
docs/deploy-tofino.md.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from supergw_proto.bucket import crc32

TNA = Path(__file__).resolve().parents[1]
VECTORS = TNA.parent / "vectors" / "bucket-crc32.json"


@dataclass(frozen=True)
class Crc:
    """A CRC in the Rocksoft model, as bf-utils' dynamic_hash describes its algorithms."""

    width: int
    poly: int
    reverse: bool
    init: int
    final_xor: int

    def __call__(self, data: bytes) -> int:
        top = 1 << (self.width - 1)
        mask = (1 << self.width) - 1
        crc = self.init
        for byte in data:
            if self.reverse:
                byte = int(f"{byte:08b}"[::-1], 2)
            crc ^= byte << (self.width - 8)
            for _ in range(8):
                crc = ((crc << 1) ^ self.poly) & mask if crc & top else (crc << 1) & mask
        if self.reverse:
            crc = int(f"{crc:0{self.width}b}"[::-1], 2)
        return crc ^ self.final_xor


# bf-utils dynamic_hash's standard_crc_algs entries: {name, poly, reverse, init, final_xor}.
BF_UTILS_CRC_32 = Crc(32, 0x04C11DB7, True, 0xFFFFFFFF, 0xFFFFFFFF)
BF_UTILS_CRC_32_BZIP2 = Crc(32, 0x04C11DB7, False, 0xFFFFFFFF, 0xFFFFFFFF)


def _vectors() -> list[dict[str, object]]:
    data = json.loads(VECTORS.read_text())
    vectors = data["vectors"]
    assert isinstance(vectors, list) and len(vectors) >= 8
    return vectors


def _mac(text: object) -> bytes:
    assert isinstance(text, str)
    return bytes.fromhex(text.replace(":", ""))


def test_the_tna_program_hashes_the_host_mac_with_crc32() -> None:
    src = (TNA / "include" / "control" / "dispatch_config.p4").read_text()
    decl = re.search(r"Hash<bit<32>>\(HashAlgorithm_t\.(\w+)\)\s+(\w+);", src)
    assert decl is not None and decl.group(1) == "CRC32"
    assert re.search(rf"(\w+)\s*=\s*{decl.group(2)}\.get\(\{{\s*host_mac\s*\}}\)", src)
    assert re.search(r"bit<32>\s+host_crc;", src)  # the whole CRC, sliced where it is used
    assert re.search(r"host_hash\s*=\s*host_crc\[15:0\];", src)  # CRC32: its low 16 bits
    assert re.search(r"host_hash\s*=\s*host_mac\[15:0\];", src)  # IDENTITY: the MAC's low 16 bits
    assert re.search(r"host_hash\s*&\s*meta\.bucket_mask", src)  # the bucket = low bits
    assert re.search(r"mac_addr_t\s+host_mac;", src)  # bit<48>: six bytes, no padding


def test_the_model_is_the_catalogued_crc32() -> None:
    # reveng CRC catalogue: CRC-32/ISO-HDLC check("123456789") = 0xCBF43926.
    assert BF_UTILS_CRC_32(b"123456789") == 0xCBF43926
    assert BF_UTILS_CRC_32_BZIP2(b"123456789") == 0xFC891918  # CRC-32/BZIP2: the model is not a constant


def test_tofino_crc32_matches_the_bmv2_vectors_and_the_controller() -> None:
    for v in _vectors():
        mac = _mac(v["mac"])
        assert BF_UTILS_CRC_32(mac) == v["crc32"], v["mac"]
        assert crc32(mac) == v["crc32"], v["mac"]
        for k in (64, 256, 4096):
            assert BF_UTILS_CRC_32(mac) & (k - 1) == v[f"bucket_k{k}"], (v["mac"], k)


def test_the_unreflected_variant_would_not_match() -> None:
    assert any(BF_UTILS_CRC_32_BZIP2(_mac(v["mac"])) != v["crc32"] for v in _vectors())


CLIENT_VECTORS = TNA.parent / "vectors" / "client-crc32.json"


def test_the_tna_program_hashes_the_client_address_with_crc32() -> None:
    # The outside switch's client-address hash: the same extern and slice, over bit<32>.
    src = (TNA / "include" / "control" / "outside_dispatch.p4").read_text()
    decl = re.search(r"Hash<bit<32>>\(HashAlgorithm_t\.(\w+)\)\s+(\w+);", src)
    assert decl is not None and decl.group(1) == "CRC32"
    assert re.search(rf"client_crc\s*=\s*{decl.group(2)}\.get\(\{{\s*meta\.lookup\.ipv4_src\s*\}}\)", src)
    assert re.search(r"client_hash\s*=\s*client_crc\[15:0\];", src)
    assert re.search(r"client_hash\s*=\s*meta\.lookup\.ipv4_src\[15:0\];", src)
    assert re.search(r"client_hash\s*&\s*meta\.bucket_mask", src)


def test_tofino_crc32_matches_the_bmv2_client_vectors() -> None:
    vectors = json.loads(CLIENT_VECTORS.read_text())["vectors"]
    assert len(vectors) >= 8
    for v in vectors:
        ip = bytes(int(o) for o in v["ip"].split("."))
        assert BF_UTILS_CRC_32(ip) == v["crc32"], v["ip"]
        for k in (64, 256, 4096):
            assert BF_UTILS_CRC_32(ip) & (k - 1) == v[f"bucket_k{k}"], (v["ip"], k)
