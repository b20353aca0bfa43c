// Controller packet I/O through the CPU port: packet-out at the start of ingress,
// packet-in at its end. TNA: the packet_in header is added in ingress, where the ingress
// port and the punt reason are known, instead of in egress as on v1model; that saves
// bridging both to egress (which is bypassed).

#ifndef SUPERGW_PACKET_IO_P4
#define SUPERGW_PACKET_IO_P4

control PacketIoIngress(inout headers_t hdr,
                        inout local_metadata_t meta,
                        inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    apply {
        if (meta.is_packet_out) {
            // port_roles was looked up with the requested egress port.
            if (meta.port_role == PORT_ROLE_UNKNOWN) {
                meta.drop_reason = DROP_REASON_PACKET_OUT_BAD_PORT;
            } else {
                ig_tm_md.ucast_egress_port = (PortId_t)hdr.packet_out.egress_port;
                hdr.packet_out.setInvalid();
            }
            meta.decided = true;
        } else if (meta.lookup.eth_type == ETHERTYPE_PACKET_OUT) {
            meta.drop_reason = DROP_REASON_PACKET_OUT_FROM_FRONT_PORT;
            meta.decided = true;
        }
    }
}

// Runs last in ingress: a punted frame (ArpResponder) gets the packet_in header.
// ArpResponder already chose the CPU port.
control PacketIoPunt(inout headers_t hdr, in local_metadata_t meta) {
    apply {
        if (meta.drop_reason == DROP_REASON_NONE && meta.punt_reason != PUNT_REASON_NONE) {
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = meta.ingress_port;
            hdr.packet_in.reason = meta.punt_reason;
        }
    }
}

#endif  // SUPERGW_PACKET_IO_P4
