// The IPv6 twin of ArpGuard (docs/pipeline-contract.md, "IPv6 Neighbor Discovery on the
// LAN"), shared by v1model and TNA (it touches only metadata). Runs before learning, so a
// spoofer is not learned.
// - A host's NS from a gateway address would update every receiver's neighbour entry for
//   it, and a host's NA for one would override the vmac each host holds.
// - A gateway's RS, RA or Redirect: only the controller advertises the router, and a
//   gateway's own would carry its MAC (Redirect) or reach the other gateways (RS).

#ifndef SUPERGW_ND_GUARD_P4
#define SUPERGW_ND_GUARD_P4

#include "headers.p4"

control NdGuard(inout local_metadata_t meta) {
    apply {
        if (meta.port_role == PORT_ROLE_HOST) {
            if ((meta.lookup.nd_type == ICMPV6_TYPE_NS && meta.ip6_src_is_gateway)
                    || (meta.lookup.nd_type == ICMPV6_TYPE_NA && meta.nd_target_is_gateway)) {
                meta.drop_reason = DROP_REASON_ND_SPOOF_GATEWAY_IP;
                meta.decided = true;
            }
        } else if (meta.port_role == PORT_ROLE_GATEWAY) {
            if (meta.lookup.nd_type == ICMPV6_TYPE_RS || meta.lookup.nd_type == ICMPV6_TYPE_RA
                    || meta.lookup.nd_type == ICMPV6_TYPE_REDIRECT) {
                meta.drop_reason = DROP_REASON_GATEWAY_ROUTER_ND;
                meta.decided = true;
            }
        }
    }
}

#endif  // SUPERGW_ND_GUARD_P4
