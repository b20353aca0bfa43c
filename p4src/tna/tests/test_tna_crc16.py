"""TNA's bucket hash is CRC-16/ARC over the 6 MAC bytes, like BMv2's and the controller's.

The TNA program computes `Hash<bit<16>>(HashAlgorithm_t.CRC16).get({ host_mac })`.
bf-p4c maps HashAlgorithm_t.CRC16 to the algorithm "crc_16" (bf-p4c mau/hash_function.cpp),
which Intel's bf-utils dynamic_hash defines as polynomial 0x8005, reversed (reflected
input and output), init 0, final xor 0 — the Rocksoft parameters of CRC-16/ARC. The hash
unit consumes the field list in wire order, so a bit<48> MAC is its 6 bytes, first octet
first. This test runs those parameters through an independent, bit-by-bit Rocksoft CRC
model (not the controller's table-driven code) and checks it against the catalogue check
value, the BMv2 vectors in p4src/vectors/bucket-crc16.json and the controller's function.
What it cannot check here is the Tofino hash unit itself (no hardware or model): that is
the "bucket move" step of docs/deploy-tofino.md.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from supergw_controller.bucket import crc16_arc

TNA = Path(__file__).resolve().parents[1]
VECTORS = TNA.parent / "vectors" / "bucket-crc16.json"


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
BF_UTILS_CRC_16 = Crc(16, 0x8005, True, 0x0000, 0x0000)
BF_UTILS_CRC_16_BYPASS = Crc(16, 0x8005, False, 0x0000, 0x0000)


def _vectors() -> list[dict[str, object]]:
    data = json.loads(VECTORS.read_text())
    vectors = data["vectors"]
    assert isinstance(vectors, list) and len(vectors) >= 8
    return vectors


def _mac(text: object) -> bytes:
    assert isinstance(text, str)
    return bytes.fromhex(text.replace(":", ""))


def test_the_tna_program_hashes_the_host_mac_with_crc16() -> None:
    src = (TNA / "include" / "control" / "dispatch_config.p4").read_text()
    decl = re.search(r"Hash<bit<16>>\(HashAlgorithm_t\.(\w+)\)\s+(\w+);", src)
    assert decl is not None and decl.group(1) == "CRC16"
    assert re.search(rf"{decl.group(2)}\.get\(\{{\s*host_mac\s*\}}\)", src)
    assert re.search(r"mac_addr_t\s+host_mac;", src)  # bit<48>: six bytes, no padding


def test_the_model_is_the_catalogued_crc16_arc() -> None:
    # reveng CRC catalogue: CRC-16/ARC check("123456789") = 0xBB3D.
    assert BF_UTILS_CRC_16(b"123456789") == 0xBB3D
    assert BF_UTILS_CRC_16_BYPASS(b"123456789") == 0xFEE8  # CRC-16/BUYPASS: the model is not a constant


def test_tofino_crc16_matches_the_bmv2_vectors_and_the_controller() -> None:
    for v in _vectors():
        mac = _mac(v["mac"])
        assert BF_UTILS_CRC_16(mac) == v["crc16"], v["mac"]
        assert crc16_arc(mac) == v["crc16"], v["mac"]
        assert BF_UTILS_CRC_16(mac) & 0xFFF == v["bucket_k4096"]
        assert BF_UTILS_CRC_16(mac) & 0xFF == v["bucket_k256"]


def test_the_unreflected_variant_would_not_match() -> None:
    assert any(BF_UTILS_CRC_16_BYPASS(_mac(v["mac"])) != v["crc16"] for v in _vectors())
