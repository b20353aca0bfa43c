// Port roles: what sits behind a port. Frames from a port without a role are dropped.
// Same as v1model: the control only touches local metadata.

#ifndef SUPERGW_PORT_CLASSIFIER_P4
#define SUPERGW_PORT_CLASSIFIER_P4

control PortClassifier(inout local_metadata_t meta) {
    action set_port_role(port_role_t role) {
        meta.port_role = role;
    }

    // Keyed by the ingress port, or by the requested egress port of a packet-out.
    // The default is const: the controller cannot open unknown ports by accident.
    table port_roles {
        key = {
            meta.classified_port : exact @name("port");
        }
        actions = {
            set_port_role;
        }
        const default_action = set_port_role(PORT_ROLE_UNKNOWN);
        size = PORT_ROLES_TABLE_SIZE;
    }

    apply {
        if (!meta.frame_valid) {
            // Shorter than an Ethernet header (or than a packet-out header).
            meta.drop_reason = DROP_REASON_MALFORMED_FRAME;
            meta.decided = true;
        } else {
            port_roles.apply();
            // A packet-out's unknown egress port is reported by PacketIoIngress.
            if (!meta.is_packet_out && meta.port_role == PORT_ROLE_UNKNOWN) {
                meta.drop_reason = DROP_REASON_UNKNOWN_PORT;
                meta.decided = true;
            }
        }
    }
}

#endif  // SUPERGW_PORT_CLASSIFIER_P4
