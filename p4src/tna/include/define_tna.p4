// TNA specifics: Tofino ports are PortId_t (bit<9>); P4Runtime sees them as port_num_t
// (bit<16>), as on v1model, so both targets share one P4Info shape.

#ifndef SUPERGW_DEFINE_TNA_P4
#define SUPERGW_DEFINE_TNA_P4

// The CPU port differs per chip and pipe count, unlike BMv2's --cpu-port 255 (CPU_PORT in
// common/defines.p4). PCIe CPU port: Tofino 1 with 4 pipes 320, with 2 pipes 192; Tofino 2: 0.
// Override with -DSUPERGW_TNA_CPU_PORT=<port> (docs/deploy-tofino.md, "CPU port").
#ifndef SUPERGW_TNA_CPU_PORT
#if __TARGET_TOFINO__ == 2
#define SUPERGW_TNA_CPU_PORT 0
#else
#define SUPERGW_TNA_CPU_PORT 320
#endif
#endif

const PortId_t TNA_CPU_PORT = SUPERGW_TNA_CPU_PORT;

// ig_dprsr_md.digest_type that makes the ingress deparser pack learn_digest_t.
const DigestType_t LEARN_DIGEST_TYPE = 1;
// ... and learn_ip6_digest_t (one digest per packet: learn_digest_t wins).
const DigestType_t LEARN_IP6_DIGEST_TYPE = 2;

// ig_dprsr_md.drop_ctl bit 0: no unicast, multicast or resubmit copy.
const bit<3> TNA_DROP = 1;

#endif  // SUPERGW_DEFINE_TNA_P4
