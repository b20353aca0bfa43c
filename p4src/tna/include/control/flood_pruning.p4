// No flood copy back out of the ingress port, decided in ingress and done by the PRE
// (v1model drops that copy in egress after replicating it).
//
// The PRE prunes a level-2 (port) replica when the packet's rid equals the replica's
// node rid and the port is in the prune mask of the packet's level2_exclusion_id (the
// PRE's L2 XID table, bfrt `$pre.prune`). The controller writes the flood group's replicas
// with instance (= node rid) 0. The L2 XID table has one entry per port, indexed by the
// port's compact number pipe * 72 + port-in-pipe (288 entries on a 4-pipe Tofino), not
// by the 9-bit device port pipe << 7 | port-in-pipe; p4src/tna/pre_prune.py writes
// XID(p) -> {p} for every port p once at switch start-up (P4Runtime has no entity for
// it). Here the packet's XID is XID(ingress port) and its rid 0.

#ifndef SUPERGW_FLOOD_PRUNING_P4
#define SUPERGW_FLOOD_PRUNING_P4

// The replica instance of every HOST_FLOOD_GROUP member (P4Runtime Replica.instance).
const bit<16> HOST_FLOOD_RID = 0;

control FloodPruning(in local_metadata_t meta,
                     in ingress_intrinsic_metadata_t ig_intr_md,
                     inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    apply {
        if (meta.flood) {
            L2ExclusionId_t pipe = (L2ExclusionId_t)ig_intr_md.ingress_port[8:7];
            L2ExclusionId_t port_in_pipe = (L2ExclusionId_t)ig_intr_md.ingress_port[6:0];
            // pipe * 72 as shifts: the MAU has no multiplier.
            ig_tm_md.level2_exclusion_id = (pipe << 6) + (pipe << 3) + port_in_pipe;
            ig_tm_md.rid = HOST_FLOOD_RID;
        }
    }
}

#endif  // SUPERGW_FLOOD_PRUNING_P4
