"""Compute p4src/vectors/{bucket,client}-{crc32,identity}.json with real BMv2.

Compiles probe.p4 (beside this file) with p4c, starts `simple_switch_grpc` with pcap files
as ports (`--use-files`: no network namespace, no veth), sends one Ethernet frame per MAC
and reads back what BMv2 computed for both bucket hashes of the source MAC: the full v1model
`hash(HashAlgorithm.crc32, ...)` and the 16-bit result of the exact call the pipeline makes
(BUCKET_HASH_CRC32), and the pipeline's identity slice `src[15:0]` (BUCKET_HASH_IDENTITY)
next to v1model's `hash(HashAlgorithm.identity, ..., 65536)`, which must agree with it. The
same for the outside switch's client-address hash: one frame per IPv4 address carries it in
its payload, and BMv2 computes the CRC-32 of the 4 address bytes with the exact call of
OutsideDispatch, and the identity hash next to the pipeline's slice `ip[15:0]`. The
buckets in the files are those BMv2 values masked with K - 1; nothing here computes a hash
itself.

    python p4src/vectors/generate.py            # rewrite the four files
    python p4src/vectors/generate.py --check    # exit 1 if a committed file differs

Exit status 3: p4c or simple_switch_grpc is not installed (nothing was written).
"""

from __future__ import annotations

import argparse
import ipaddress
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
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROBE = HERE / "probe.p4"
VECTORS = HERE / "bucket-crc32.json"
IDENTITY_VECTORS = HERE / "bucket-identity.json"
CLIENT_VECTORS = HERE / "client-crc32.json"
CLIENT_IDENTITY_VECTORS = HERE / "client-identity.json"
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
    range, and random MACs (fixed seed); then the paper's last hosts and MACs whose low 16
    bits sit at the edges of the identity hash's masks."""
    macs = [f"02:00:00:00:00:{i:02x}" for i in range(64)]
    macs += [f"02:00:00:00:{i:02x}:00" for i in range(64)]
    macs += [f"02:00:00:{i:02x}:00:00" for i in range(16)]
    macs += [f"00:00:03:00:00:{i:02x}" for i in range(0x18, 0x20)]
    macs += [f"00:00:03:00:{i:02x}:00" for i in range(0x18, 0x20)]
    rng = random.Random(0x5347)
    macs += [":".join(f"{rng.randrange(256):02x}" for _ in range(6)) for _ in range(48)]
    macs += ["00:00:03:00:f7:00", "00:00:04:00:18:00", "00:00:04:00:f7:00"]
    macs += ["fe:dc:ba:98:ff:ff", "fe:dc:ba:98:f0:00", "fe:dc:ba:98:10:00", "fe:dc:ba:98:0f:ff",
             "fe:dc:ba:98:01:3f", "02:ff:ff:ff:80:40"]  # fmt: skip
    return list(dict.fromkeys(macs))  # 02:00:00:00:00:00 starts three runs


def vector_ips() -> list[str]:
    """Client addresses: sequential in the last and in the third octet (clients of one
    provider, the emulation's clients), a NAT pool's range, random addresses (fixed seed),
    and addresses at the edges of the identity hash's masks."""
    ips = [f"198.51.100.{i}" for i in range(64)]
    ips += [f"10.200.{i}.1" for i in range(64)]
    ips += [f"100.64.{i >> 8}.{i & 0xFF}" for i in range(0, 4096, 256)]
    rng = random.Random(0x4950)
    ips += [".".join(str(rng.randrange(256)) for _ in range(4)) for _ in range(48)]
    ips += ["0.0.0.0", "255.255.255.255", "203.0.113.255", "203.0.255.255", "203.0.16.0", "203.0.15.255",
            "192.0.2.63", "192.0.2.64"]  # fmt: skip
    return list(dict.fromkeys(ips))


def _ip_key(index: int) -> bytes:
    """The source MAC that names the frame of the index-th address (BMv2 reorders frames)."""
    return bytes([0x02, 0xC1, 0, 0, index >> 8, index & 0xFF])


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


@dataclass(frozen=True)
class Probed:
    """What BMv2 computed for one source MAC."""

    crc32: int  # hash(crc32, 0, {mac}, 2^32)
    crc32_16: int  # hash(crc32, 0, {mac}, 65536): the pipeline's BUCKET_HASH_CRC32 call
    identity_slice: int  # mac[15:0]: the pipeline's BUCKET_HASH_IDENTITY
    identity_hash: int  # hash(identity, 0, {mac}, 65536)


@dataclass(frozen=True)
class ProbedIP:
    """What BMv2 computed for one client address."""

    crc32: int  # hash(crc32, 0, {ip}, 2^32)
    crc32_16: int  # hash(crc32, 0, {ip}, 65536): the pipeline's client hash call
    identity_hash: int  # hash(identity, 0, {ip}, 65536): must equal the pipeline's slice ip[15:0]


def _frame(src: bytes, ip: int = 0) -> bytes:
    return b"\x00" * 6 + src + _ETHERTYPE + b"\x00" * 4 + ip.to_bytes(4, "big") + b"\x00" * 38


def run_bmv2(macs: list[str], ips: list[str]) -> tuple[list[Probed], list[ProbedIP]]:
    """What BMv2 computes for each MAC and each client address, in order."""
    p4c, switch = _tool("p4c"), _tool("simple_switch_grpc")
    frames = [_frame(bytes.fromhex(m.replace(":", ""))) for m in macs]
    frames += [_frame(_ip_key(i), int(ipaddress.IPv4Address(ip))) for i, ip in enumerate(ips)]
    out: list[bytes] = []
    with tempfile.TemporaryDirectory(prefix="supergw-vectors-") as tmp:
        subprocess.run([p4c, "--target", "bmv2", "--arch", "v1model", "--Werror", "-o", tmp, str(PROBE)], check=True)
        for start in range(0, len(frames), _BATCH):
            batch = Path(tmp) / f"batch{start}"
            batch.mkdir()
            out += _run_switch(switch, Path(tmp) / "probe.json", batch, frames[start : start + _BATCH])
    probed = []
    for frame in out[: len(macs)]:
        payload = frame[14:18]
        probed.append(Probed(crc32=int.from_bytes(frame[2:6], "big"), crc32_16=int.from_bytes(frame[0:2], "big"),
                             identity_slice=int.from_bytes(payload[0:2], "big"),
                             identity_hash=int.from_bytes(payload[2:4], "big")))  # fmt: skip
    probed_ips = []
    for frame in out[len(macs) :]:
        client = frame[18:30]
        probed_ips.append(ProbedIP(crc32=int.from_bytes(client[4:8], "big"), crc32_16=int.from_bytes(client[8:10], "big"),
                                   identity_hash=int.from_bytes(client[10:12], "big")))  # fmt: skip
    return probed, probed_ips


def _run_switch(switch: str, program: Path, work: Path, frames: list[bytes]) -> list[bytes]:
    """The frames BMv2 sends back, in the order of `frames` (matched by source MAC)."""
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
            while len(seen) < len(frames):
                if proc.poll() is not None:
                    raise RuntimeError(f"simple_switch_grpc exited ({proc.returncode}): {(work / 'switch.log').read_text()}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"BMv2 sent {len(seen)} of {len(frames)} frames in {_TIMEOUT_S:.0f} s")
                time.sleep(0.1)
                # BMv2 does not keep the order (one thread per queue); the source MAC names a frame.
                seen = {frame[6:12]: frame for frame in _read_pcap(work / "p1_out.pcap")}
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    return [seen[frame[6:12]] for frame in frames]


def build() -> dict[Path, dict[str, object]]:
    """The content of each vector file."""
    macs, ips = vector_macs(), vector_ips()
    probed, probed_ips = run_bmv2(macs, ips)
    crc_vectors, identity_vectors = [], []
    for mac, got in zip(macs, probed, strict=True):
        if got.crc32_16 != got.crc32 & 0xFFFF:
            raise RuntimeError(f"{mac}: BMv2's 16-bit hash {got.crc32_16:#x} is not the low bits of its crc32 {got.crc32:#x}")
        if got.identity_hash != got.identity_slice:
            raise RuntimeError(f"{mac}: BMv2's identity hash {got.identity_hash:#x} differs from the slice "
                               f"{got.identity_slice:#x} the pipeline computes")  # fmt: skip
        crc_vectors.append({"mac": mac, "crc32": got.crc32, **{f"bucket_k{k}": got.crc32 & (k - 1) for k in KS}})
        identity_vectors.append(
            {"mac": mac, "low16": got.identity_slice, **{f"bucket_k{k}": got.identity_slice & (k - 1) for k in KS}}
        )
    crc_about = (
        "MAC -> bucket test vectors, computed by real BMv2 (simple_switch_grpc, v1model "
        "hash(HashAlgorithm.crc32, base 0, {src MAC}, max)) by p4src/vectors/generate.py; "
        "bucket = crc32 & (K-1). BMv2's crc32 is the standard CRC-32 (IEEE 802.3, zlib.crc32) "
        "over the 6 MAC bytes in network order."
    )
    identity_about = (
        "MAC -> bucket test vectors of bucket_hash IDENTITY, computed by real BMv2 (simple_switch_grpc) "
        "by p4src/vectors/generate.py: low16 is the pipeline's slice src_mac[15:0], which BMv2's "
        "v1model hash(HashAlgorithm.identity, base 0, {src MAC}, 65536) matched for every MAC; "
        "bucket = low16 & (K-1), the clustering paper's h(m) = base | (m % K)."
    )
    client_crc, client_identity = [], []
    for ip, got_ip in zip(ips, probed_ips, strict=True):
        if got_ip.crc32_16 != got_ip.crc32 & 0xFFFF:
            raise RuntimeError(f"{ip}: BMv2's 16-bit hash {got_ip.crc32_16:#x} is not the low bits of its crc32 {got_ip.crc32:#x}")
        low16 = int(ipaddress.IPv4Address(ip)) & 0xFFFF
        if got_ip.identity_hash != low16:
            raise RuntimeError(f"{ip}: BMv2's identity hash {got_ip.identity_hash:#x} differs from the slice "
                               f"{low16:#x} the pipeline computes")  # fmt: skip
        client_crc.append({"ip": ip, "crc32": got_ip.crc32, **{f"bucket_k{k}": got_ip.crc32 & (k - 1) for k in KS}})
        client_identity.append({"ip": ip, "low16": low16, **{f"bucket_k{k}": low16 & (k - 1) for k in KS}})
    client_crc_about = (
        "Client address -> bucket test vectors of the outside switch (remote access), computed by real BMv2 "
        "(simple_switch_grpc, v1model hash(HashAlgorithm.crc32, base 0, {IPv4 source}, max)) by "
        "p4src/vectors/generate.py; bucket = crc32 & (K-1): the standard CRC-32 (zlib.crc32) over the 4 "
        "address bytes in network order."
    )
    client_identity_about = (
        "Client address -> bucket test vectors of bucket_hash IDENTITY on the outside switch, computed by real "
        "BMv2 by p4src/vectors/generate.py: low16 is the pipeline's slice ip[15:0], which BMv2's v1model "
        "hash(HashAlgorithm.identity, base 0, {IPv4 source}, 65536) matched for every address; "
        "bucket = low16 & (K-1)."
    )
    return {
        VECTORS: {"about": crc_about, "vectors": crc_vectors},
        IDENTITY_VECTORS: {"about": identity_about, "vectors": identity_vectors},
        CLIENT_VECTORS: {"about": client_crc_about, "vectors": client_crc},
        CLIENT_IDENTITY_VECTORS: {"about": client_identity_about, "vectors": client_identity},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed file instead of writing it")
    args = parser.parse_args(argv)
    try:
        files = build()
    except ToolMissing as e:
        print(f"generate: SKIPPED — {e}", file=sys.stderr)
        return 3
    stale = 0
    for path, data in files.items():
        text = json.dumps(data, indent=1) + "\n"
        if not args.check:
            path.write_text(text)
            print(f"generate: wrote {path}")
        elif not path.exists() or path.read_text() != text:
            print(f"generate: {path} differs from what BMv2 computes; run p4src/vectors/generate.py", file=sys.stderr)
            stale += 1
        else:
            print(f"generate: {path.name} matches BMv2 ({len(data['vectors'])} vectors)")  # type: ignore[arg-type]
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
