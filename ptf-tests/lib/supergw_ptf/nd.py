"""IPv6 Neighbor Discovery helpers (docs/pipeline-contract.md, "IPv6 Neighbor Discovery on
the LAN"): the gateway's IPv6 addresses in nd_settings, host_ip6s, learned_ip6s, the
learn_ip6 digest, and the NA the switch must build from an NS."""

from __future__ import annotations

import ipaddress
import time

from finsy import P4DigestEntry, P4TableAction, P4TableEntry, P4TableMatch
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from supergw_proto import p4constants as c
from supergw_proto.addresses import mac_to_int

from . import nd_frames as nf
from .supergw import PuntReason, SupergwTest

GATEWAY_LL = "fe80::1"
GATEWAY_GUA = "2001:db8:1::1"


def host_ll(mac: str) -> str:
    """The modified EUI-64 link-local address of `mac` (RFC 4291 appendix A)."""
    b = bytes(int(x, 16) for x in mac.split(":"))
    iid = bytes([b[0] ^ 0x02, b[1], b[2], 0xFF, 0xFE, b[3], b[4], b[5]])
    return str(ipaddress.IPv6Address(bytes.fromhex("fe80000000000000") + iid))


def host_gua(mac: str) -> str:
    """The SLAAC address of `mac` in the test's prefix 2001:db8:1::/64."""
    return str(ipaddress.IPv6Address(int(ipaddress.IPv6Address(host_ll(mac))) & ((1 << 64) - 1) | int(ipaddress.IPv6Address("2001:db8:1::"))))


class NdTest(SupergwTest):
    """A SupergwTest with ND settings, tables, digests and the expected NAs."""

    def configure_nd(self, link_local: str = GATEWAY_LL, global_: str = GATEWAY_GUA) -> None:
        params = {c.PARAM_SET_ND_CONFIG_LINK_LOCAL_IP6: link_local, c.PARAM_SET_ND_CONFIG_GLOBAL_IP6: global_}
        self.set_default_action(
            c.TABLE_ND_SETTINGS, P4TableAction(c.ACTION_SET_ND_CONFIG, **params), restore=P4TableAction(c.ACTION_MARK_ND_UNCONFIGURED)
        )

    def setup_nd(self) -> None:
        self.setup_switch()
        self.configure_nd()

    def host_ip6_entry(self, ip6: str, mac: str) -> P4TableEntry:
        action = P4TableAction(c.ACTION_ADVERTISE_HOST_MAC, **{c.PARAM_ADVERTISE_HOST_MAC_HOST_MAC: mac})
        return P4TableEntry(c.TABLE_HOST_IP6S, match=P4TableMatch({c.MATCH_HOST_IP6S_TARGET_IP6: ip6}), action=action)

    def learned_ip6_entry(self, ip6: str, mac: str) -> P4TableEntry:
        match = P4TableMatch({c.MATCH_LEARNED_IP6S_SRC_IP6: ip6, c.MATCH_LEARNED_IP6S_SRC_MAC: mac})
        return P4TableEntry(c.TABLE_LEARNED_IP6S, match=match, action=P4TableAction(c.ACTION_MARK_IP6_KNOWN))

    # ---- the NA the switch builds from an NS

    def gateway_na(self, request: bytes, host: str) -> bytes:
        """The switch's answer to `host`'s answerable NS `request` for a gateway address:
        from vmac(bucket(host)), R|S|O (R|O to all-nodes for DAD)."""
        return self.na_for(request, self.dispatch.vmac_of(host), router=True)

    @staticmethod
    def na_for(request: bytes, answer_mac: str, *, router: bool) -> bytes:
        eth, ip = Ether(request), Ether(request)[IPv6]
        target = str(ip.payload.tgt)
        dad = ip.src == nf.UNSPECIFIED
        return nf.na(
            eth_src=answer_mac,
            eth_dst=nf.ALL_NODES_MAC if dad else eth.src,
            ip_src=target,
            ip_dst=nf.ALL_NODES if dad else ip.src,
            target=target,
            router=router,
            solicited=not dad,
            tllao=answer_mac,
            tc=ip.tc,
            fl=ip.fl,
        )

    # ---- punts and digests

    def assert_punted(self, frame: bytes, port: int, reason: PuntReason) -> None:
        """`frame` on `port` goes to the controller only: packet-in (port, reason) with the
        frame as received, nothing out of any port, no drop counted."""
        before = self.all_drop_counts()
        self.send(port, frame)
        got = self.get_packet_in()
        self.assertIsNotNone(got, f"expected a packet-in {reason.name}")
        assert got is not None
        self.assertEqual(got.metadata, self.packet_in_meta(port, reason), "packet_in metadata")
        self.assertEqual(got.payload, frame, "packet-in payload must be the frame as received")
        self.expect_nothing()
        self.assert_no_packet_in()
        self.assert_not_dropped(before)

    def enable_ip6_digests(self) -> None:
        self.insert(P4DigestEntry(c.DIGEST_LEARN_IP6_DIGEST, max_list_size=1, ack_timeout_ns=1_000_000_000))
        while self.client.digest(0.3) is not None:
            pass

    def ip6_samples(self, timeout: float) -> list[dict[str, int]]:
        """The learn_ip6 samples that arrive within `timeout` (other digests are ignored)."""
        out: list[dict[str, int]] = []
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            got = self.client.digest(left)
            if got is None:
                break
            if got.digest_id == c.DIGEST_LEARN_IP6_DIGEST:
                out.extend(got.data)
        return out

    def ip6_sample(self, mac: str, port: int, ip6: str) -> dict[str, int]:
        return {
            c.DIGEST_LEARN_IP6_DIGEST_SRC_MAC: mac_to_int(mac),
            c.DIGEST_LEARN_IP6_DIGEST_PORT: port,
            c.DIGEST_LEARN_IP6_DIGEST_SRC_IP6: int(ipaddress.IPv6Address(ip6)),
        }

    def expect_ip6_digest(self, mac: str, port: int, ip6: str) -> None:
        want = self.ip6_sample(mac, port, ip6)
        deadline = time.monotonic() + self.default_timeout
        seen: list[dict[str, int]] = []
        while (left := deadline - time.monotonic()) > 0:
            samples = self.ip6_samples(min(left, 0.5))
            if want in samples:
                return
            seen.extend(samples)
        self.fail(f"no learn_ip6 digest {want} within {self.default_timeout}s; got {seen}")

    def expect_no_ip6_digest(self, mac: str, timeout: float = 1.0) -> None:
        for sample in self.ip6_samples(timeout):
            if sample[c.DIGEST_LEARN_IP6_DIGEST_SRC_MAC] == mac_to_int(mac):
                self.fail(f"unexpected learn_ip6 digest {sample}")
