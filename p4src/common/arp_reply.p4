// The ARP reply rewrite shared by the v1model and TNA ArpResponder controls: it touches
// only headers_t, so it is target-independent (the egress port is set by each target).

#ifndef SUPERGW_ARP_REPLY_P4
#define SUPERGW_ARP_REPLY_P4

#include "headers.p4"

// Turns the ARP request in hdr into the reply "sender_ip is at sender_mac", addressed
// to the requester. A function, not an action: p4c would list an action in the P4Info.
void arp_request_to_reply(inout headers_t hdr, in mac_addr_t sender_mac, in ipv4_addr_t sender_ip) {
    hdr.ethernet.dst_addr = hdr.ethernet.src_addr;
    hdr.ethernet.src_addr = sender_mac;
    hdr.arp.oper = ARP_OPER_REPLY;
    hdr.arp.tha = hdr.arp.sha;
    hdr.arp.tpa = hdr.arp.spa;
    hdr.arp.sha = sender_mac;
    hdr.arp.spa = sender_ip;
}

#endif
