// Egress half of flooding: a frame is never flooded back out of its ingress port.
// BMv2 copies the whole PHV (user metadata included) into each multicast replica.

#ifndef SUPERGW_FLOOD_PRUNING_P4
#define SUPERGW_FLOOD_PRUNING_P4

control FloodPruning(in local_metadata_t meta, inout standard_metadata_t standard_metadata) {
    apply {
        if (meta.flood && standard_metadata.egress_port == standard_metadata.ingress_port) {
            mark_to_drop(standard_metadata);
        }
    }
}

#endif  // SUPERGW_FLOOD_PRUNING_P4
