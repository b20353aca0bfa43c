"""Compute p4src/vectors/bucket-crc32.json with real BMv2.

Compiles probe.p4 (beside this file) with p4c, starts `simple_switch_grpc` with pcap files
as ports (`--use-files`: no network namespace, no veth), sends one Ethernet frame per MAC
and reads back what BMv2 computed: the full v1model `hash(HashAlgorithm.crc32, ...)` of
the source MAC and the 16-bit result of the exact call the pipeline makes. The buckets in
the file are those BMv2 values masked with K - 1; nothing here computes a CRC itself.

    python p4src/vectors/generate.py            # rewrite bucket-crc32.json
    python p4src/vectors/generate.py --check    # exit 1 if the committed file differs

Exit status 3: p4c or simple_switch_grpc is not installed (nothing was written).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROBE = HERE / "probe.p4"
VECTORS = HERE / "bucket-crc32.json"
KS = (64, 256, 4096)
TOOL_DIRS = ("/opt/p4tools/bin",)  # the prebuilt toolchain of the CI machines
_PCAP_HEADER = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
_ETHERTYPE = b"\x88\xb5"  # IEEE local experimental: never mistaken for real traffic
_TIMEOUT_S = 30.0
# BMv2 reads a pcap port as fast as it can and drops what overflows an egress queue (64
# frames by default): one switch run per batch keeps every batch below that.
_BATCH = 32


class ToolMissing(Exception):
    pass


def vector_macs() -> list[str]:
    """Sequential MACs (last byte, second-to-last byte, step 65536), the emulation's host
    range, and random MACs (fixed seed)."""
    macs = [f"02:00:00:00:00:{i:02x}" for i in range(64)]
    macs += [f"02:00:00:00:{i:02x}:00" for i in range(64)]
    macs += [f"02:00:00:{i:02x}:00:00" for i in range(16)]
    macs += [f"00:00:03:00:00:{i:02x}" for i in range(0x18, 0x20)]
    macs += [f"00:00:03:00:{i:02x}:00" for i in range(0x18, 0x20)]
    rng = random.Random(0x5347)
    macs += [":".join(f"{rng.randrange(256):02x}" for _ in range(6)) for _ in range(48)]
    return list(dict.fromkeys(macs))  # 02:00:00:00:00:00 starts three runs


def _tool(name: str) -> str:
    path = shutil.which(name, path=os.pathsep.join([*TOOL_DIRS, os.environ.get("PATH", "")]))
    if path is None:
        raise ToolMissing(f"{name} is not installed (see p4src/README.md, 'Get p4c and BMv2')")
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _write_pcap(path: Path, frames: list[bytes]) -> None:
    with path.open("wb") as f:
        f.write(_PCAP_HEADER)
        for frame in frames:
            f.write(struct.pack("<IIII", 0, 0, len(frame), len(frame)) + frame)


def _read_pcap(path: Path) -> list[bytes]:
    if not path.exists():
        return []
    data = path.read_bytes()
    frames, pos = [], 24
    while pos + 16 <= len(data):
        caplen = struct.unpack_from("<IIII", data, pos)[2]
        if pos + 16 + caplen > len(data):
            break
        frames.append(data[pos + 16 : pos + 16 + caplen])
        pos += 16 + caplen
    return frames


def run_bmv2(macs: list[str]) -> list[tuple[int, int]]:
    """(crc32, 16-bit pipeline host_crc) of each MAC as BMv2 computes them, in order."""
    p4c, switch = _tool("p4c"), _tool("simple_switch_grpc")
    results: list[tuple[int, int]] = []
    with tempfile.TemporaryDirectory(prefix="supergw-vectors-") as tmp:
        subprocess.run([p4c, "--target", "bmv2", "--arch", "v1model", "--Werror", "-o", tmp, str(PROBE)], check=True)
        for start in range(0, len(macs), _BATCH):
            batch = Path(tmp) / f"batch{start}"
            batch.mkdir()
            results += _run_switch(switch, Path(tmp) / "probe.json", batch, macs[start : start + _BATCH])
    return results


def _run_switch(switch: str, program: Path, work: Path, macs: list[str]) -> list[tuple[int, int]]:
    frames = [b"\x00" * 6 + bytes.fromhex(m.replace(":", "")) + _ETHERTYPE + b"\x00" * 46 for m in macs]
    _write_pcap(work / "p0_in.pcap", frames)
    _write_pcap(work / "p1_in.pcap", [])
    cmd = [switch, "--device-id", "7", "--use-files", "0", "-i", "0@p0", "-i", "1@p1",
           "--notifications-addr", f"ipc://{work}/notifications.ipc", str(program),
           "--", "--grpc-server-addr", f"127.0.0.1:{_free_port()}"]  # fmt: skip
    seen: dict[bytes, bytes] = {}
    with (work / "switch.log").open("wb") as log:
        proc = subprocess.Popen(cmd, cwd=work, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + _TIMEOUT_S
            while len(seen) < len(macs):
                if proc.poll() is not None:
                    raise RuntimeError(f"simple_switch_grpc exited ({proc.returncode}): {(work / 'switch.log').read_text()}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"BMv2 sent {len(seen)} of {len(macs)} frames in {_TIMEOUT_S:.0f} s")
                time.sleep(0.1)
                # BMv2 does not keep the order (one thread per queue); the source MAC names a frame.
                seen = {frame[6:12]: frame for frame in _read_pcap(work / "p1_out.pcap")}
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    results = []
    for mac in macs:
        frame = seen[bytes.fromhex(mac.replace(":", ""))]
        results.append((int.from_bytes(frame[2:6], "big"), int.from_bytes(frame[0:2], "big")))
    return results


def build() -> dict[str, object]:
    macs = vector_macs()
    vectors = []
    for mac, (crc, host_crc) in zip(macs, run_bmv2(macs), strict=True):
        if host_crc != crc & 0xFFFF:
            raise RuntimeError(f"{mac}: BMv2's 16-bit hash {host_crc:#x} is not the low bits of its crc32 {crc:#x}")
        vectors.append({"mac": mac, "crc32": crc, **{f"bucket_k{k}": crc & (k - 1) for k in KS}})
    about = (
        "MAC -> bucket test vectors, computed by real BMv2 (simple_switch_grpc, v1model "
        "hash(HashAlgorithm.crc32, base 0, {src MAC}, max)) by p4src/vectors/generate.py; "
        "bucket = crc32 & (K-1). BMv2's crc32 is the standard CRC-32 (IEEE 802.3, zlib.crc32) "
        "over the 6 MAC bytes in network order."
    )
    return {"about": about, "vectors": vectors}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed file instead of writing it")
    args = parser.parse_args(argv)
    try:
        data = build()
    except ToolMissing as e:
        print(f"generate: SKIPPED — {e}", file=sys.stderr)
        return 3
    text = json.dumps(data, indent=1) + "\n"
    if args.check:
        if not VECTORS.exists() or VECTORS.read_text() != text:
            print(f"generate: {VECTORS} differs from what BMv2 computes; run p4src/vectors/generate.py", file=sys.stderr)
            return 1
        print(f"generate: {VECTORS.name} matches BMv2 ({len(data['vectors'])} vectors)")  # type: ignore[arg-type]
        return 0
    VECTORS.write_text(text)
    print(f"generate: wrote {VECTORS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
