// Hash probe for p4src/vectors/generate.py: BMv2 computes v1model's crc32 of each frame's
// source MAC and writes it back into the destination MAC, then sends the frame out of
// port 1. dst[31:0] = hash(crc32, 0, {src}, 2^32) (the full CRC); dst[47:32] =
// hash(crc32, 0, {src}, 65536) into a bit<16>, exactly the call of
// p4src/v1model/include/control/dispatch_config.p4 (the pipeline's host_crc).
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
}

struct headers_t {
    ethernet_t eth;
}

struct meta_t {}

parser ProbeParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                   inout standard_metadata_t std) {
    state start {
        pkt.extract(hdr.eth);
        transition accept;
    }
}

control ProbeVerify(inout headers_t hdr, inout meta_t meta) { apply {} }

control ProbeIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {
    apply {
        bit<32> full;
        bit<16> host_crc;
        hash(full, HashAlgorithm.crc32, 32w0, { hdr.eth.src }, 64w4294967296);
        hash(host_crc, HashAlgorithm.crc32, 16w0, { hdr.eth.src }, 32w65536);
        hdr.eth.dst = host_crc ++ full;
        std.egress_spec = 1;
    }
}

control ProbeEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) { apply {} }

control ProbeCompute(inout headers_t hdr, inout meta_t meta) { apply {} }

control ProbeDeparser(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.eth); }
}

V1Switch(ProbeParser(), ProbeVerify(), ProbeIngress(), ProbeEgress(), ProbeCompute(),
         ProbeDeparser()) main;
