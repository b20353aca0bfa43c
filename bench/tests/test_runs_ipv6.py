"""The dataplane benchmark's IPv6 row (rootless): the LAN it configures is dual stack, and the
IPv6 direction's plan holds IPv6 frames from each host's learned address to its own vmac,
judged by the same sinks and shares as the IPv4 host -> gateway row."""

from __future__ import annotations

import struct
from pathlib import Path

from bench.dataplane import frames, runs, trial
from supergw_proto.bucket import bucket_of, vmac


def test_the_ipv6_row_runs_on_the_same_dual_stack_lan(tmp_path: Path) -> None:
    lan = runs.the_lan()
    assert lan.gateway_ip6 == (runs.GATEWAY_LL6, frames.ip6_of(runs.GATEWAY_IP))
    assert [mac for mac, _ in lan.host_ip6s] == [mac for mac, _ in lan.hosts]
    to_gateway, _ = runs.directions(lan)
    six = runs.direction_ipv6(lan)
    assert six.ipv6 and not to_gateway.ipv6 and six.label == "IPv6 host -> gateway"
    assert (six.gen, six.sinks, six.rewritten) == (to_gateway.gen, to_gateway.sinks, trial.dst_rewritten)
    size = runs.SIZES6[0]
    data = runs.plan_file(tmp_path, lan, six, size).read_bytes()
    (length,) = struct.unpack_from("<H", data)
    assert length == size - frames.FCS_BYTES == frames.ETH_IP6_UDP and len(data) == len(lan.hosts) * (2 + length)
    first = data[2:2 + length]
    mac, ip6 = lan.host_ip6s[0]
    assert first[0:6] == bytes.fromhex(vmac(lan.vmac_base, bucket_of(mac, lan.buckets, frames.BUCKET_HASH)).replace(":", ""))
    assert first[12:14] == b"\x86\xdd" and first[22:38] == frames._ip(ip6)
    # the IPv4 row's plan of the same size is another file
    assert runs.plan_file(tmp_path, lan, to_gateway, 64) != runs.plan_file(tmp_path, lan, six, size)
