// Remote-access settings of the outside switch: the public address IP_P that every gateway
// holds (without answering ARP for it) and the MAC the switch answers ARP for IP_P with.
// Until the controller sets them, every frame from an outside port (UPLINK,
// GATEWAY_OUTSIDE) is dropped RA_NOT_CONFIGURED: without IP_P the switch can tell neither
// what to dispatch nor which gateway frames to give the public MAC.

#ifndef SUPERGW_RA_CONFIG_P4
#define SUPERGW_RA_CONFIG_P4

control RaConfig(inout local_metadata_t meta) {
    @id(0x0100000c)
    action set_ra_config(ipv4_addr_t public_ip, mac_addr_t public_mac) {
        meta.ra_configured = true;
        meta.public_ip = public_ip;
        meta.public_mac = public_mac;
    }

    @id(0x0100000d)
    action mark_ra_unconfigured() {
        meta.ra_configured = false;
    }

    // Keyless, like settings: the controller MODIFYs the default action.
    @id(0x02000007)
    table ra_settings {
        actions = {
            @defaultonly set_ra_config;
            @defaultonly mark_ra_unconfigured;
        }
        default_action = mark_ra_unconfigured();
        size = RA_SETTINGS_TABLE_SIZE;
    }

    apply {
        if (meta.port_role == PORT_ROLE_UPLINK || meta.port_role == PORT_ROLE_GATEWAY_OUTSIDE) {
            ra_settings.apply();
            if (!meta.ra_configured) {
                meta.drop_reason = DROP_REASON_RA_NOT_CONFIGURED;
                meta.decided = true;
            }
        }
    }
}

#endif  // SUPERGW_RA_CONFIG_P4
