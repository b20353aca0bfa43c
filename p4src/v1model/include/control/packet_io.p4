// Controller packet I/O: packet-out in ingress, packet-in in egress.

#ifndef SUPERGW_PACKET_IO_P4
#define SUPERGW_PACKET_IO_P4

control PacketIoIngress(inout headers_t hdr,
                        inout local_metadata_t meta,
                        inout standard_metadata_t standard_metadata) {
    apply {
        if (meta.is_packet_out) {
            // port_roles was looked up with the requested egress port.
            if (meta.port_role == PORT_ROLE_UNKNOWN) {
                meta.drop_reason = DROP_REASON_PACKET_OUT_BAD_PORT;
            } else {
                standard_metadata.egress_spec = (v1model_port_t)hdr.packet_out.egress_port;
                hdr.packet_out.setInvalid();
            }
            meta.decided = true;
        } else if (meta.lookup.eth_type == ETHERTYPE_PACKET_OUT) {
            meta.drop_reason = DROP_REASON_PACKET_OUT_FROM_FRONT_PORT;
            meta.decided = true;
        }
    }
}

control PacketIoEgress(inout headers_t hdr,
                       in local_metadata_t meta,
                       in standard_metadata_t standard_metadata) {
    apply {
        if (standard_metadata.egress_port == V1MODEL_CPU_PORT) {
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = (port_num_t)standard_metadata.ingress_port;
            hdr.packet_in.reason = meta.punt_reason;
        }
    }
}

#endif  // SUPERGW_PACKET_IO_P4
