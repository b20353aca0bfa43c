// Hash probe for p4src/vectors/generate.py: BMv2 computes both bucket hashes of each
// frame's source MAC, writes them back into the frame and sends it out of port 1.
// CRC-32 into the destination MAC: dst[31:0] = hash(crc32, 0, {src}, 2^32) (the full CRC);
// dst[47:32] = hash(crc32, 0, {src}, 65536) into a bit<16>, exactly the call of
// p4src/v1model/include/control/dispatch_config.p4 (BUCKET_HASH_CRC32).
// Identity into the first 4 payload bytes: slice = src[15:0], exactly the pipeline's
// BUCKET_HASH_IDENTITY; ident = hash(identity, 0, {src}, 65536), v1model's identity
// extern, which must agree with the slice.
// The client-address hash of the outside switch into the 12 payload bytes after that, for
// the IPv4 address in its first 4: crc = hash(crc32, 0, {ip}, 2^32); crc16 = hash(crc32, 0,
// {ip}, 65536), exactly OutsideDispatch's call (p4src/v1model/include/control/
// outside_dispatch.p4); ident = hash(identity, 0, {ip}, 65536), which must equal the
// pipeline's slice ip[15:0].
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
}

header identity_t {
    bit<16> slice;
    bit<16> ident;
}

header client_t {
    bit<32> ip;
    bit<32> crc;
    bit<16> crc16;
    bit<16> ident;
}

struct headers_t {
    ethernet_t eth;
    identity_t identity;
    client_t   client;
}

struct meta_t {}

parser ProbeParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                   inout standard_metadata_t std) {
    state start {
        pkt.extract(hdr.eth);
        pkt.extract(hdr.identity);
        pkt.extract(hdr.client);
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
        hdr.identity.slice = hdr.eth.src[15:0];
        hash(hdr.identity.ident, HashAlgorithm.identity, 16w0, { hdr.eth.src }, 32w65536);
        hash(hdr.client.crc, HashAlgorithm.crc32, 32w0, { hdr.client.ip }, 64w4294967296);
        hash(hdr.client.crc16, HashAlgorithm.crc32, 16w0, { hdr.client.ip }, 32w65536);
        hash(hdr.client.ident, HashAlgorithm.identity, 16w0, { hdr.client.ip }, 32w65536);
        std.egress_spec = 1;
    }
}

control ProbeEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) { apply {} }

control ProbeCompute(inout headers_t hdr, inout meta_t meta) { apply {} }

control ProbeDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.eth);
        pkt.emit(hdr.identity);
        pkt.emit(hdr.client);
    }
}

V1Switch(ProbeParser(), ProbeVerify(), ProbeIngress(), ProbeEgress(), ProbeCompute(),
         ProbeDeparser()) main;
